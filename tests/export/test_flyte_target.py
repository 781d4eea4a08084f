"""The flyte target, checked against Flyte 2's API (flyte 2.12.1 signatures), without the SDK.

The generated source is read back with ``ast``: every ``flyte.Resources(...)`` is turned back
into a taskcell request and compared with the one the ``%%task`` line builds, and each call is
checked against Flyte's signatures. ``test_sdk_modules.py`` imports and runs it with the SDK.
"""

from __future__ import annotations

import ast

import pytest

from taskcell.export import ExportError, export_notebook
from taskcell.export.flyte_target import FLYTE_ACCELERATORS, FLYTE_MIG
from taskcell.runner.task_line import build_request, parse_task_line
from taskcell.spec import BUILTIN_PRESETS, GPU, TPU, Device, Resources

from .conftest import notebook

# flyte 2.12.1: TaskEnvironment(name, ..., resources=, depends_on=), Resources(cpu, memory, gpu,
# disk, shm), GPU(device, quantity, partition), TPU(device, partition),
# Device(quantity, device_class, device, partition).
SIGNATURES = {
    "TaskEnvironment": {"name", "resources", "depends_on"},
    "Resources": {"cpu", "memory", "gpu", "disk", "shm"},
    "GPU": {"device", "quantity", "partition"},
    "TPU": {"device", "partition"},
    "Device": {"quantity", "device_class", "device", "partition"},
}

LINES = {
    "plain": "",
    "fields": "--cpu 2,8 --memory 8Gi,32Gi --gpu A100:2 --disk 50Gi --shm 8Gi",
    "half": "--cpu 500m --memory 512Mi --shm auto",
    "preset": "small_task",
    "mig": '--gpu "A100/1g.5gb:1"',
    "big": '--gpu "A100 80G:8"',
    "tpu": "--gpu V5P/2x2x1",
    "device": '--gpu "device:custom_accelerator/large:2"',
    "count": "--gpu 4",
    "b200": "--gpu B200:2",
    "trainium": '--gpu "Trn1:4"',
    "trainium_3": '--gpu "Trn1:3"',
    "trn3": '--gpu "neuron:Trn3:16"',
    "a2": "--gpu A2:4",
    "rtx_mig": '--gpu "RTX_PRO_6000/1g.24gb:1"',
    "shared": '--gpu "L40s shared:1"',
    "amd": "--gpu MI300X:1",
}


def flyte_call(node: ast.AST) -> str | None:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "_flyte"
    ):
        return node.func.attr
    return None


def as_request(call: ast.Call) -> Resources:
    """A ``flyte.Resources(...)`` call read back as a taskcell request, checking Flyte's types."""
    fields = {}
    for keyword in call.keywords:
        kind = flyte_call(keyword.value)
        if kind is not None:
            args = {k.arg: ast.literal_eval(k.value) for k in keyword.value.keywords}
            assert set(args) <= SIGNATURES[kind]
            record = {"GPU": GPU, "TPU": TPU, "Device": Device}[kind]
            fields[keyword.arg] = record(**args)
            continue
        value = ast.literal_eval(keyword.value)
        if keyword.arg in ("memory", "disk", "shm"):  # Flyte takes Kubernetes quantity strings
            assert isinstance(value, str) or all(isinstance(v, str) for v in value)
        if keyword.arg == "gpu" and isinstance(value, str):  # one of Flyte's Accelerators
            device, _, count = value.partition(":")
            assert int(count) in FLYTE_ACCELERATORS[device]
        fields[keyword.arg] = value
    return Resources(**fields)


def environments(source: str) -> dict[str, Resources]:
    """Task function name -> the request of the environment it is defined in."""
    tree = ast.parse(source)
    envs: dict[str, Resources] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and flyte_call(node) in SIGNATURES:
            assert {k.arg for k in node.keywords} <= SIGNATURES[flyte_call(node)]
        if isinstance(node, ast.Assign) and flyte_call(node.value) == "TaskEnvironment":
            resources = next((k.value for k in node.value.keywords if k.arg == "resources"), None)
            envs[node.targets[0].id] = as_request(resources) if resources else Resources()
    tasks = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.decorator_list:
            decorator = node.decorator_list[0]
            assert isinstance(decorator, ast.Attribute) and decorator.attr == "task"
            tasks[node.name] = envs[decorator.value.id]
    return tasks


def test_requests_equal_the_notebooks():
    cells = [f"%%task {line} --name {name}\n{name}_out = 1" for name, line in LINES.items()]
    source = export_notebook(notebook(*cells), "flyte")
    found = environments(source)
    for name, line in LINES.items():
        assert found[name] == build_request(parse_task_line(line), lambda: BUILTIN_PRESETS, {}, {})
    assert found["main"] == Resources()
    assert 'fields_env = _flyte.TaskEnvironment(\n    name="fields",' in source
    assert 'gpu=_flyte.GPU(device="A100", quantity=1, partition="1g.5gb")' in source
    assert 'gpu="A100_80G:8"' in source
    assert 'gpu="Trn1:4"' in source
    assert 'gpu=_flyte.Device(quantity=3, device_class="NEURON", device="Trn1")' in source
    assert 'gpu=_flyte.Device(quantity=16, device_class="NEURON", device="Trn3")' in source
    assert 'gpu=_flyte.GPU(device="A2", quantity=4)' in source
    assert 'gpu="L40S shared:1"' in source


def test_an_environment_and_a_cells_own_fields_give_one_whole_request():
    # taskcell combines field by field; Flyte replaces a request whole, so the task's
    # environment carries the combined request, every field of it.
    source = export_notebook(
        notebook(
            "%task_env etl --cpu 1 --memory 1Gi --gpu A100:1",
            "%%task --env etl --memory 2Gi\na = 1",
            '%%task --env etl --cpu "len(str(a))"\nb = a',
            "print(b)",
        ),
        "flyte",
    )
    assert environments(source)["compute_a"] == Resources(cpu=1, memory="2Gi", gpu="A100:1")
    assert (
        'compute_b.override(\n        resources=_flyte.Resources(memory="1Gi", gpu="A100:1", '
        "cpu=len(str(a)))\n    )" in source
    )


def test_one_environment_per_distinct_request():
    source = export_notebook(
        notebook(
            "%task_env etl --cpu 1 --memory 2Gi",
            "%%task --env etl\na = 1",
            "%%task --cpu 1 --memory 2Gi\nb = 1",
            "%%task small_task\nc = 1",
            "%%task\nd = 1",
        ),
        "flyte",
    )
    tree = ast.parse(source)
    names = [
        k.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and flyte_call(node) == "TaskEnvironment"
        for k in node.keywords
        if k.arg == "name"
    ]
    assert names == ["etl", "small_task", "tasks", "driver"]
    assert "depends_on=[etl_env, small_task_env, tasks_env]" in source


def test_driver_awaits_independent_tasks_together():
    source = export_notebook(
        notebook(
            "x = 1",
            "%%task\na = x + 1",
            "%%task\nb, c = x + 2, x + 3",
            "%%task\nd = a + b",
            '%%task --cpu "min(2, x)"\ne = x',
            "print(d, e)",
        ),
        "flyte",
    )
    assert "a, b = await _asyncio.gather(compute_a.aio(x), compute_b.aio(x))" in source
    assert "d, e = await _asyncio.gather(\n" in source
    assert "compute_e.override(resources=_flyte.Resources(cpu=min(2, x))).aio(x)" in source
    assert "def compute_b(x: int) -> int:" in source  # c: no later cell reads it
    assert "async def main() -> None:" in source


def test_values_are_typed_where_the_code_makes_it_certain():
    source = export_notebook(
        notebook(
            "import pandas as pd\nn = 3\nnames = ['a', 'b']\nthing = object()",
            "%%task\nframe = pd.DataFrame({'n': [n]})\npair = (n, names)\nlabel = names[0]",
            "%%task\nfirst = frame.head(1)\nkind = type(thing)\nnone = None",
            "print(pair, label, first, kind, none)",
        ),
        "flyte",
    )
    assert (
        "def compute_frame(\n    n: int, names: list[str], state: _typing.Any\n"
        ") -> tuple[_pandas.DataFrame, _typing.Any, str, _typing.Any]:" in source
    )
    assert "return frame, _portable(pair), label, _portable(_process_state())" in source
    assert "    frame: _pandas.DataFrame, thing: _typing.Any, state: _typing.Any\n" in source
    assert "return frame, first, _portable(kind), _portable(none)" in source
    assert "compute_first.aio(\n        frame, _portable(thing), _process_state()\n    )" in source


def test_changes_in_place_and_state_come_back_to_the_driver():
    source = export_notebook(
        notebook("import random\nitems = [3, 1]", "%%task\nitems.sort()\nr = random.random()"),
        "flyte",
    )
    assert "items_new, state = await cell_2.aio(_portable(items), _process_state())" in source
    assert (
        "(items,) = _update((items,), (items_new,), ())\n"
        "    _set_process_state(state, returned=True)" in source
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('--gpu "A100:9"', r"cell 1 .*asks for 9 A100 GPUs; Flyte requests 1 to 8"),
        ('--gpu "A100/1g.10gb:1"', r"Flyte has no A100 MIG partition '1g.10gb'"),
    ],
    ids=["too-many", "partition"],
)
def test_requests_flyte_cannot_express(line, message):
    assert "1g.10gb" not in FLYTE_MIG["A100"]
    with pytest.raises(ExportError, match=message):
        export_notebook(notebook(f"%%task {line}\nx = 1"), "flyte")


def test_left_out_parts_are_warned_about():
    with pytest.warns(UserWarning, match=r"taskcell: cell 1 .*have no Flyte equivalent"):
        source = export_notebook(notebook("%%task --resources process=1\nx = 1"), "flyte")
    assert "process" not in source


def test_retries():
    source = export_notebook(notebook("%%task --retries 3 --cpu 1\nx = 1", "print(x)"), "flyte")
    assert "@compute_x_env.task(retries=3)\ndef compute_x() -> int:" in source
