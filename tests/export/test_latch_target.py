"""The latch target, checked against the Latch SDK's documented API.

``from latch.resources.tasks import small_task, ...`` (the presets) and
``from latch import custom_task`` with ``custom_task(cpu: int, memory: int GiB, *,
storage_gib: int)``. Without the SDK the source is read back with ``ast``; with it, imported.
"""

from __future__ import annotations

import ast
import importlib.util
import sys

import pytest

from taskcell.export import ExportError, export_notebook
from taskcell.spec import BUILTIN_PRESETS

from .conftest import notebook

PRESETS = set(BUILTIN_PRESETS)


def decorators(source: str) -> dict[str, str]:
    """Task function -> its decorator as source, checking names against the SDK's."""
    tree = ast.parse(source)
    imported = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module in ("latch", "latch.resources.tasks"):
            for alias in node.names:
                assert (node.module, alias.name) in {("latch", "custom_task")} | {
                    ("latch.resources.tasks", p) for p in PRESETS
                }
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
            found[node.name] = ast.unparse(decorator)
    return found


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
    source = export_notebook(notebook(*cells), "latch")
    assert decorators(source) == {name: expected for name, (_, expected) in CASES.items()}
    assert "from latch import custom_task" in source
    assert "def fields(" in source and "-> Any:" in source


def test_larger_gpu_preset_is_warned_about():
    with pytest.warns(UserWarning, match=r"cell 1 .*smallest GPU preset that holds it is v100_x4"):
        source = export_notebook(notebook("%%task --gpu V100:2\nx = 1"), "latch")
    assert "@v100_x4_task" in source


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


def test_dynamic_resources_become_resource_functions():
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
        "    return math.ceil(parse_cpu(min(8, len(files))))" in source
    )
    assert (
        "@custom_task(cpu=allocate_cpu_for_compute_n, memory=allocate_memory_for_compute_n)"
        in source
    )
    tree = ast.parse(source)
    helpers = [
        node
        for node in tree.body
        if (isinstance(node, ast.Import | ast.ImportFrom) and "latch" not in ast.unparse(node))
        or (isinstance(node, ast.FunctionDef) and node.name.startswith("allocate_"))
    ]
    namespace: dict = {}
    exec(compile(ast.Module(helpers, []), "resource_functions", "exec"), namespace)
    assert namespace["allocate_cpu_for_compute_n"](files=["a", "b"], count=1) == 2
    assert namespace["allocate_memory_for_compute_n"](files=["a", "b", "c"]) == 3


def test_shm_and_extra_are_warned_about():
    with pytest.warns(UserWarning) as caught:
        export_notebook(notebook("%%task --cpu 1 --shm 1Gi --resources process=1\nx = 1"), "latch")
    messages = [str(w.message) for w in caught]
    assert any("no shared-memory option" in m for m in messages)
    assert any("no Latch equivalent" in m for m in messages)


def test_driver_calls_tasks_with_keywords():
    source = export_notebook(notebook("a = 1", "%%task\nb, c = a, a", "print(b + c)"), "latch")
    assert "b, c = compute_b(a=a)" in source


@pytest.mark.skipif(importlib.util.find_spec("latch") is None, reason="latch is not installed")
def test_module_imports_with_latch(tmp_path, monkeypatch):
    cells = [f"%%task {line} --name {name}\n{name}_out = 1" for name, (line, _) in CASES.items()]
    (tmp_path / "latch_workflow.py").write_text(export_notebook(notebook(*cells), "latch"))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("latch_workflow")
    try:
        limits = module.fields.task_config.pod_spec.containers[0].resources.limits
        assert limits == {"cpu": "4", "memory": "16Gi", "ephemeral-storage": "100Gi"}
    finally:
        sys.modules.pop("latch_workflow", None)
