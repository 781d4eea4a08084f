"""Dynamic resources: seed 001's custom_task and resource functions, and expressions."""

from __future__ import annotations

import math
import pickle
from typing import Any

import pytest

from taskcell.errors import SpecError
from taskcell.spec import Expression, Resources, ResourceTemplate, latch_custom

GI = 1024**3


class LatchFile:
    """Stands in for latch.types.file.LatchFile: all seed 001 uses is ``size()``."""

    def __init__(self, size: int) -> None:
        self._size = size

    def size(self) -> int:
        return self._size


# seed 001, "Dynamic Task Resource", verbatim but for the type hints.
def allocate_cpu(files: list[LatchFile], **kwargs: Any) -> int:  # number of cores to allocate
    return min(8, len(files))


def allocate_storage(files: list[LatchFile], **kwargs: Any) -> int:  # GiBs of storage to allocate
    return sum([1.5 * file.size() for file in files]) // 1024**3


def my_task_params() -> list[str]:
    return ["files", "count"]  # def my_task(files: List[LatchFile], count: int)


def test_latch_dynamic_example() -> None:
    template = latch_custom(cpu=allocate_cpu, memory=8, storage_gib=allocate_storage)
    assert template.is_dynamic
    template.check_params(my_task_params(), "my_task")
    files = [LatchFile(4 * GI), LatchFile(8 * GI)]
    assert template.resolve({"files": files, "count": 3}) == Resources(
        cpu=2, memory="8Gi", disk="18Gi"
    )
    many = [LatchFile(GI)] * 20
    assert template.resolve({"files": many, "count": 1}) == Resources(
        cpu=8, memory="8Gi", disk="30Gi"
    )


def test_latch_storage_of_zero_gib_is_no_storage_request() -> None:
    template = latch_custom(cpu=allocate_cpu, memory=8, storage_gib=allocate_storage)
    assert template.resolve({"files": [LatchFile(100)], "count": 1}) == Resources(
        cpu=1, memory="8Gi"
    )


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (dict(cpu=4, memory=16), Resources(cpu=4, memory="16Gi")),
        (
            dict(cpu=126, memory=975, storage_gib=4949),
            Resources(cpu=126, memory="975Gi", disk="4949Gi"),
        ),
        (dict(cpu=2, memory=1.5), Resources(cpu=2, memory="1536Mi")),
        (dict(cpu=2, memory="512Mi"), Resources(cpu=2, memory="512Mi")),
    ],
    ids=["ints", "latch-maxima", "float-gib", "quantity-text"],
)
def test_latch_custom_fixed(kwargs: dict, expected: Resources) -> None:
    template = latch_custom(**kwargs)
    assert not template.is_dynamic
    assert template.resolve({}) == expected
    assert template.fixed == expected


def test_latch_custom_memory_function_returns_gib() -> None:
    template = latch_custom(cpu=1, memory=lambda count: count * 2)
    assert template.resolve({"count": 3}).memory.request == 6 * GI


def test_latch_custom_refuses_bad_fixed_values_at_definition() -> None:
    with pytest.raises(SpecError, match="memory="):
        latch_custom(cpu=2, memory=-1)


def test_function_naming_a_parameter_the_task_lacks_is_refused_at_definition() -> None:
    def allocate_memory(file_list: list, **kwargs: Any) -> str:
        return "8Gi"

    template = ResourceTemplate(memory=allocate_memory)
    with pytest.raises(SpecError) as info:
        template.check_params(my_task_params(), "my_task")
    message = str(info.value)
    for word in ["memory=", "allocate_memory", "'file_list'", "'my_task'", "files, count"]:
        assert word in message


def test_nearest_parameter_is_suggested() -> None:
    template = ResourceTemplate(cpu=lambda file: 1)
    with pytest.raises(SpecError, match='did you mean "files"'):
        template.check_params(my_task_params(), "my_task")


def test_parameters_with_defaults_and_var_args_are_fine() -> None:
    def cores(files: list, scale: int = 2, *args: Any, **kwargs: Any) -> int:
        return len(files) * scale

    template = ResourceTemplate(cpu=cores)
    template.check_params(my_task_params(), "my_task")
    assert template.resolve({"files": [1, 2], "count": 1}).cpu.request == 4


def test_positional_only_parameters_are_refused() -> None:
    def cores(files: list, /) -> int:
        return 1

    with pytest.raises(SpecError, match="positionally only"):
        ResourceTemplate(cpu=cores).check_params(["files"], "t")


def test_functions_get_only_what_they_name_unless_they_take_kwargs() -> None:
    seen: dict[str, dict] = {}

    def named(files: list) -> int:
        seen["named"] = {"files": files}
        return 1

    def everything(**kwargs: Any) -> str:
        seen["everything"] = kwargs
        return "1Gi"

    ResourceTemplate(cpu=named, memory=everything).resolve({"files": [1], "count": 2})
    assert seen == {"named": {"files": [1]}, "everything": {"files": [1], "count": 2}}


def test_missing_argument_at_resolve_names_the_function() -> None:
    def cores(files: list) -> int:
        return 1

    with pytest.raises(
        SpecError, match=r"cpu= resource function .*cores needs argument\(s\) 'files'"
    ):
        ResourceTemplate(cpu=cores).resolve({"count": 1})


def test_bad_result_names_field_and_function() -> None:
    def allocate_memory(files: list) -> str:
        return "lots"

    with pytest.raises(SpecError) as info:
        ResourceTemplate(memory=allocate_memory).resolve({"files": []})
    message = str(info.value)
    for word in ["memory=", "allocate_memory", "returned 'lots'", '"4Gi"']:
        assert word in message


def test_exceptions_inside_functions_propagate_unchanged() -> None:
    def broken(files: list) -> int:
        raise ZeroDivisionError("mine")

    with pytest.raises(ZeroDivisionError, match="mine"):
        ResourceTemplate(cpu=broken).resolve({"files": []})


def test_none_result_leaves_the_field_unset() -> None:
    template = ResourceTemplate(cpu=2, gpu=lambda use_gpu: "A100:1" if use_gpu else None)
    assert template.resolve({"use_gpu": False}) == Resources(cpu=2)
    assert template.resolve({"use_gpu": True}) == Resources(cpu=2, gpu="A100:1")


def test_fixed_values_are_checked_at_definition() -> None:
    with pytest.raises(SpecError, match="memory="):
        ResourceTemplate(cpu=lambda files: 1, memory="lots")


EXPRESSIONS = [
    ("min(8, len(files))", {"files": [1, 2, 3]}, "cpu", 3),
    ("f'{2 * len(df)}Gi'", {"df": [0] * 4}, "memory", 8 * GI),
    ("'A100:2' if big else 1", {"big": True}, "gpu", "A100:2"),
    ("sum(f for f in sizes) * 2", {"sizes": [GI, GI]}, "disk", 4 * GI),
]


@pytest.mark.parametrize(
    ("source", "arguments", "field", "expected"), EXPRESSIONS, ids=[s for s, *_ in EXPRESSIONS]
)
def test_expressions(source: str, arguments: dict, field: str, expected: object) -> None:
    template = ResourceTemplate(**{field: Expression(source)})
    template.check_params(list(arguments), "cell")
    assert template.resolve(arguments) == Resources(**{field: expected})


def test_expression_names_exclude_builtins_and_comprehension_variables() -> None:
    assert Expression("sum(f.size for f in files) + len(extra)").names == {"files", "extra"}
    assert Expression("(lambda x: x + n)(1)").names == {"n"}


def test_expression_syntax_error_is_refused_at_definition() -> None:
    with pytest.raises(SpecError, match=r"resource expression 'min\(8,' is not a valid Python"):
        Expression("min(8,")


@pytest.mark.parametrize("source", ["", "   ", 3], ids=repr)
def test_empty_expression_is_refused(source: object) -> None:
    with pytest.raises(SpecError, match="non-empty string"):
        Expression(source)  # type: ignore[arg-type]


def test_expression_reading_a_name_the_task_lacks_is_refused() -> None:
    with pytest.raises(SpecError) as info:
        ResourceTemplate(memory=Expression("len(fils) * 1024")).check_params(["files"], "t")
    message = str(info.value)
    for word in ["memory=", "'fils'", "task 't'", 'did you mean "files"?']:
        assert word in message


def test_template_repr_and_override() -> None:
    template = ResourceTemplate(cpu=allocate_cpu, memory="8Gi", gpu=Expression("n"))
    assert repr(template) == (
        "ResourceTemplate(cpu=allocate_cpu, memory='8Gi', gpu=Expression(source='n'))"
    )
    assert template.dynamic == {"cpu": allocate_cpu, "gpu": Expression("n")}
    overridden = template.override(Resources(cpu=4, disk="10Gi"))
    assert not overridden.dynamic.keys() - {"gpu"}
    assert overridden.resolve({"n": 1}) == Resources(cpu=4, memory="8Gi", gpu=1, disk="10Gi")
    back = ResourceTemplate(cpu=2).override(template)
    assert back.dynamic.keys() == {"cpu", "gpu"}


def test_template_from_resources() -> None:
    resources = Resources(cpu=("1", "2"), memory="1Gi", gpu="V5P/2x2x1", shm="auto", extra={"a": 1})
    template = ResourceTemplate.from_resources(resources)
    assert not template.is_dynamic
    assert template.resolve({}) == resources
    assert template == ResourceTemplate.from_resources(resources)
    assert hash(template) == hash(ResourceTemplate.from_resources(resources))


def test_templates_pickle() -> None:
    template = latch_custom(cpu=allocate_cpu, memory=8, storage_gib=allocate_storage)
    template = template.override(ResourceTemplate(gpu=Expression("'A100:1' if big else None")))
    copy = pickle.loads(pickle.dumps(template))
    arguments = {"files": [LatchFile(2 * GI)], "count": 1, "big": True}
    assert copy.resolve(arguments) == template.resolve(arguments)
    assert copy.resolve(arguments) == Resources(cpu=1, memory="8Gi", gpu="A100:1", disk="3Gi")


def test_expression_reads_arguments_then_the_globals_of_the_code_defining_the_task() -> None:
    template = ResourceTemplate(cpu=Expression("math.ceil(len(files) / n)"))
    module = {"math": math, "n": 99}  # the argument n wins over the global
    template.check_params(["files", "n"], "t", module)
    assert template.resolve({"files": "abc", "n": 2}, module) == Resources(cpu=2)
    with pytest.raises(SpecError, match="reads 'math', which task 't' does not take"):
        template.check_params(["files", "n"], "t")
