"""The latch target, checked against the Latch SDK's documented API, without the SDK.

``from latch.resources.tasks import small_task, ...`` (the presets), ``from latch import
custom_task, workflow`` with ``custom_task(cpu: int, memory: int GiB, *, storage_gib: int)``.
The source is read back with ``ast``; ``test_sdk_modules.py`` imports and runs it with the SDK.
"""

from __future__ import annotations

import ast
import pickle
import warnings

import pytest

from taskcell.export import ExportError, ExportWarning, export_notebook
from taskcell.spec import BUILTIN_PRESETS

from .conftest import notebook

PRESETS = set(BUILTIN_PRESETS)
LATCH_NAMES = {("latch", "custom_task"), ("latch", "workflow")} | {
    ("latch.resources.tasks", p) for p in PRESETS
}
LATCH_NAMES |= {("latch.types.file", "LatchFile"), ("latch.types.directory", "LatchDir")}


def decorators(source: str) -> dict[str, str]:
    """Task function -> its decorator as source, checking names against the SDK's."""
    tree = ast.parse(source)
    imported = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("latch"):
            for alias in node.names:
                assert (node.module, alias.name) in LATCH_NAMES
                imported[alias.asname or alias.name] = alias.name
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.decorator_list:
            decorator = node.decorator_list[0]
            called = decorator.func if isinstance(decorator, ast.Call) else decorator
            assert isinstance(called, ast.Name) and called.id in imported
            if isinstance(decorator, ast.Call) and imported[called.id] == "custom_task":
                keywords = {k.arg for k in decorator.keywords}
                assert {"cpu", "memory"} <= keywords <= {"cpu", "memory", "storage_gib", "retries"}
            found[node.name] = ast.unparse(decorator).replace(called.id, imported[called.id], 1)
    return found


def quietly(*cells: str) -> str:
    """The latch module of a notebook, its warnings (shm left out, ...) ignored."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExportWarning)
        return export_notebook(notebook(*cells), "latch")


def function(source: str, name: str) -> ast.FunctionDef:
    return next(node for node in ast.parse(source).body if getattr(node, "name", None) == name)  # type: ignore[return-value]


def signature(source: str, name: str) -> str:
    """``(a: int, b: _typing.Any) -> str`` of a function in ``source``."""
    node = function(source, name)
    return f"({ast.unparse(node.args)}) -> {ast.unparse(node.returns)}"


CASES = {
    "plain": ("", "small_task"),
    "preset": ("v100_x4_task", "v100_x4_task"),
    "retried": ("small_task --retries 2", "small_task(retries=2)"),
    "fields": (
        "--cpu 4 --memory 16Gi --disk 100Gi",
        "custom_task(cpu=4, memory=16, storage_gib=100)",
    ),
    "rounded": ("--cpu 500m --memory 1500Mi", "custom_task(cpu=1, memory=2)"),
    "ranged": ("--cpu 2,8 --memory 4Gi,8Gi", "custom_task(cpu=8, memory=8)"),
    "partial": ("--memory 64Gi", "custom_task(cpu=2, memory=64)"),
    "overridden": ("small_task --memory 8Gi", "custom_task(cpu=2, memory=8)"),
    "gpu": ("--gpu 1 --cpu 4 --memory 16Gi", "small_gpu_task"),
    "a10g": ("--gpu A10G:1 --cpu 16 --memory 100Gi", "large_gpu_task"),
    "v100": ("--gpu V100:1", "v100_x1_task"),
    "l40s": ("--gpu L40s:4 --cpu 96", "g6e_24xlarge_task"),
    "maxima": (
        "--cpu 126 --memory 975Gi --disk 4949Gi",
        "custom_task(cpu=126, memory=975, storage_gib=4949)",
    ),
}


def test_decorators():
    cells = [f"%%task {line} --name {name}\n{name}_out = 1" for name, (line, _) in CASES.items()]
    found = decorators(export_notebook(notebook(*cells), "latch"))
    assert {name: found[name] for name in CASES} == {
        name: expected for name, (_, expected) in CASES.items()
    }
    assert found["main"] == "workflow"


def test_larger_gpu_preset_is_warned_about():
    with pytest.warns(UserWarning, match=r"cell 1 .*smallest GPU preset that holds it is v100_x4"):
        source = export_notebook(notebook("%%task --gpu V100:2\nx = 1"), "latch")
    assert "@_v100_x4_task" in source


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("--cpu 128", r"cpu=128 exceeds latch's maximum of 126 cpus"),
        ("--memory 1Ti", r"memory=1Ti exceeds latch's maximum of 975Gi"),
        ("--disk 5000Gi", r"disk=5000Gi exceeds latch's maximum of 4949Gi"),
        ("--gpu A100:1", r"Latch has no A100 GPUs"),
        ('--gpu "A100/1g.5gb:1"', r"Latch cannot express gpu='A100/1g.5gb:1'"),
        ("--gpu V5P/2x2x1", r"Latch cannot express gpu='V5P/2x2x1'"),
        ("--gpu device:fpga", r"Latch cannot express gpu='device:fpga:1'"),
        ("--gpu V100:8 --cpu 200", r"no Latch GPU preset holds"),
        ('--gpu "len(x)"', r"Latch cannot compute --gpu when the task runs"),
    ],
    ids=["cpu", "memory", "disk", "a100", "mig", "tpu", "device", "too-big", "dynamic-gpu"],
)
def test_requests_latch_cannot_express_are_refused(line, message):
    with pytest.raises(ExportError, match=r"cell 2 \(%%task .*\): " + message):
        export_notebook(notebook("x = [1]", f"%%task {line}\ny = 1"), "latch")


def test_dynamic_resources_become_standalone_resource_functions():
    source = export_notebook(
        notebook(
            "files = ['a', 'b']",
            '%%task --cpu "min(8, len(files))" --memory "f\'{len(files)}Gi\'"\nn = len(files)',
        ),
        "latch",
    )
    assert (
        "def allocate_cpu_for_compute_n(files, **kwargs) -> int:\n"
        '    """Cores for compute_n: the notebook\'s --cpu \'min(8, len(files))\'."""\n'
        "    return _cores(min(8, len(files)))" in source
    )
    assert (
        "@_custom_task(cpu=allocate_cpu_for_compute_n, memory=allocate_memory_for_compute_n)"
        in source
    )
    tree = ast.parse(source)
    helpers = [
        node
        for node in tree.body
        if (isinstance(node, ast.FunctionDef) and node.name in ("_cores", "_gib"))
        or (isinstance(node, ast.FunctionDef) and node.name.startswith("allocate_"))
    ]
    namespace: dict = {}
    exec(compile(ast.Module(helpers, []), "resource_functions", "exec"), namespace)
    assert namespace["allocate_cpu_for_compute_n"](files=["a", "b"], count=1) == 2
    assert namespace["allocate_memory_for_compute_n"](files=["a", "b", "c"]) == 3
    assert "taskcell" not in source.split('"""')[-1]  # no import, no name of taskcell's


def test_shm_and_extra_are_warned_about():
    with pytest.warns(UserWarning) as caught:
        export_notebook(notebook("%%task --cpu 1 --shm 1Gi --resources process=1\nx = 1"), "latch")
    messages = [str(w.message) for w in caught]
    assert any("no shared-memory option" in m for m in messages)
    assert any("no Latch equivalent" in m for m in messages)


def test_a_workflow_wires_the_tasks_with_keywords():
    source = quietly("a = 1", "%%task\nb, c = a, a", "print(b + c)")
    assert "b, c = compute_b(a=a)" in source
    assert signature(source, "main") == "(a: int=1) -> None"  # b, c: read by the last cell


def test_parameters_are_the_notebooks_typed_literals():
    source = quietly(
        "from pathlib import Path",
        "n = 3\nrate = 0.5\nname = 'x'\nflag = True\nsizes = [1, 2]\n"
        "weights = {'a': 1.5}\nreads = Path('reads.fq')\nout = Path('results/')\n"
        "pairs = (1, 2)\nrng = range(3)",
        "%%task\nfound = [n, rate, name, flag, sizes, weights, reads, out, pairs, rng]",
    )
    assert signature(source, "main") == (
        "(reads: _LatchFile, out: _LatchDir, n: int=3, rate: float=0.5, name: str='x', "
        "flag: bool=True, sizes: _typing.List[int]=[1, 2], "
        "weights: _typing.Dict[str, float]={'a': 1.5}) -> None"
    )
    task = function(source, "compute_found")
    assert ast.unparse(task.body[0]) == "reads = _pathlib.Path(reads)"
    assert ast.unparse(task.body[1]) == "out = _pathlib.Path(out)"
    assert "pairs: _typing.Any" in signature(source, "compute_found")  # computed in cell_2
    run_here = ast.parse(source).body[-1]
    assert ast.unparse(run_here.body[0]) == (
        "main(reads=_on_this_machine('reads.fq', _LatchFile), "
        "out=_on_this_machine('results/', _LatchDir))"
    )


def test_tasks_are_typed_from_the_code():
    source = quietly(
        "data = [3, 1, 4]",
        "%%task\ntotal = sum(data)\nscaled = [x * 0.5 for x in data]\nlabel = f'{total}'",
        "%%task\nstats = {'n': len(data), 'mean': total / len(data)}\nshape = (1, 2)",
        "print(stats, shape, scaled, label)",
    )
    assert signature(source, "compute_total") == (
        "(data: _typing.List[int]) -> _typing.Tuple[int, _typing.List[float], str]"
    )
    assert signature(source, "compute_stats") == (
        "(data: _typing.List[int], total: int) -> "
        "_typing.Tuple[_typing.Dict[str, _typing.Union[int, float]], _typing.Any]"
    )
    assert "return stats, _portable(shape)" in source


def test_a_tuple_travels_as_itself():
    source = quietly("%%task\npair = (1, 'a')", "print(pair)")
    namespace: dict = {}
    exec(ast.unparse(function(source, "_portable")), namespace)
    carried = pickle.loads(pickle.dumps(namespace["_portable"]((1, "a"))))
    assert carried == (1, "a") and type(carried) is tuple


def test_code_cells_become_tasks_and_definitions_move_to_the_top():
    source = quietly(
        "import math",
        "scale = 3\n\ndef helper(v):\n    return v * scale\n\nitems = [helper(1)]",
        "items.append(math.pi)",
        "%%task\nn = len(items)",
    )
    tree = ast.parse(source)
    top = [getattr(n, "name", None) or ast.unparse(n) for n in tree.body]
    assert top.index("scale = 3") < top.index("helper") < top.index("cell_2")
    assert signature(source, "cell_2") == "() -> _typing.Any"
    assert signature(source, "cell_3") == "(items: _typing.Any) -> _typing.Any"  # changed in place
    assert "items = cell_3(items=items)" in source


def test_a_function_reading_a_computed_value_travels_as_a_value():
    source = quietly(
        "scale = len('abc')\n\ndef helper(v):\n    return v * scale", "%%task\ny = helper(2)"
    )
    assert signature(source, "cell_1") == "() -> _typing.Tuple[int, _typing.Any]"
    assert signature(source, "compute_y") == "(helper: _typing.Any, scale: int) -> None"
    assert "scale, helper = cell_1()" in source


@pytest.mark.parametrize(
    "cells",
    [
        ("def f():\n    return 1", "a = f()", "def f():\n    return 2", "%%task\ny = f() + a"),
        ("import dask\ndef f():\n    return 1", "f = dask.delayed(f)", "%%task\ny = f().compute()"),
    ],
    ids=["defined-again", "rebound"],
)
def test_a_function_bound_again_means_what_it_meant_in_the_notebook(cells, tmp_path):
    source = quietly(*cells)
    assert "def f():" not in source.split("@_small_task")[0]  # not at the module's top
    assert signature(source, "compute_y").startswith("(f: _typing.Any")


def test_results_are_the_typed_values_no_later_cell_reads():
    source = quietly("%%task\nx = 2\nblob = object()", "%%task\ny = x + 1")
    assert 'Results = _typing.NamedTuple("Results", [("y", int)])' in source
    assert "return y" in source


def test_names_sharing_objects_travel_in_one_pickle():
    source = quietly(
        "results = []\nalias = results\nsize = 3",
        "%%task\nresults.append(1)",
        "print(alias is results, alias, size)",
    )
    assert "shared_1 = (results, alias)" in source
    assert signature(source, "cell_2") == "(shared_1: _typing.Any) -> _typing.Any"
    assert "results, alias = shared_1" in source
    assert "size: int" in signature(source, "cell_3")


def test_an_immutable_value_a_task_seems_to_change_is_not_returned():
    source = quietly("text = 'a b'", "%%task\nwords = text.split()", "print(words, text)")
    assert signature(source, "compute_words") == "(text: str) -> _typing.List[str]"


def test_a_function_carried_as_a_value_reads_the_names_as_they_are_when_called():
    source = quietly(
        "rate = 0.1\n\ndef apply(x):\n    return x * rate", "rate = 0.2", "%%task\nout = apply(10)"
    )
    assert signature(source, "compute_out") == "(apply: _typing.Any, rate: float) -> None"
    assert "apply = _rebound(apply, rate=rate)" in source
