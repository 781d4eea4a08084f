"""The flyte and latch modules, checked by the real SDKs: flyte 2.12.1 and latch 2.77.2 from PyPI.

Each SDK lives in a venv of its own (:mod:`.sdks`). A harness (``tests/export/sdk/``) loads the
exported module there, in a subprocess, reads what each task object carries from the SDK's own
objects, and runs the workflow on this machine (``flyte.run``; Latch's local execution). Its
answers are compared here with what the notebook asked for and with the values the notebook
computed in a real kernel.
"""

from __future__ import annotations

import ast
import json
import os
import pickle
import subprocess
import warnings
from pathlib import Path
from typing import Any

import nbformat
import pytest
from processes import run_session

from taskcell.export import ExportWarning, export_notebook
from taskcell.export.flow import plan_workflow
from taskcell.export.flyte_target import FLYTE_ACCELERATORS, FLYTE_MIG, flyte_resources
from taskcell.export.notebook import read_notebook
from taskcell.spec import (
    BUILTIN_PRESETS,
    FIELDS,
    TPU_TOPOLOGIES,
    Device,
    Expression,
    Resources,
)

from .conftest import notebook, run_notebook
from .sdks import ROOT, sdk_python

pytestmark = pytest.mark.slow

HARNESS = Path(__file__).resolve().parent / "sdk"
DEMO = ROOT / "demo_notebooks" / "04-export.ipynb"

#: Presets, MIG, TPU, another accelerator, shm auto, ranges, an environment, a file parameter,
#: dynamic resources, a tuple between tasks. Cells marked FLYTE_ONLY ask for what Latch has not.
FLYTE_ONLY = "# flyte only\n"
FEATURES = [
    "md:# Every kind of request\n\nExported to Flyte and Latch.",
    "%load_ext taskcell",
    "import math\nfrom pathlib import Path",
    'data = [3, 1, 4, 1, 5, 9, 2, 6]\nscale = 2.5\nlabel = "run"\nsource = Path({numbers!r})',
    "%task_env train --cpu 2 --memory 4Gi,8Gi --shm auto",
    "%%task small_task\ntotal = sum(data)",
    "%%task --env train --memory 8Gi,16Gi\nscaled = [x * scale for x in data]\n"
    "pair = (min(data), max(data))",
    "%%task --env train\nlines = source.read_text().split()",
    '%%task --cpu "min(4, len(data))" --memory "f\'{len(data)}Gi\'" --disk 20Gi\n'
    'stats = {"n": len(data), "mean": total / len(data)}',
    "%%task --cpu 500m,2 --memory 1Gi,2Gi --shm 1Gi --name spread_task\n"
    "low, high = pair\nspread = high - low",
    f'%%task --gpu "A100/1g.5gb:1" --cpu 1\n{FLYTE_ONLY}mig = max(data)',
    f"%%task --gpu V5P/2x2x1\n{FLYTE_ONLY}tpu = min(data)",
    f'%%task --gpu "Trn1:4" --memory 2Gi\n{FLYTE_ONLY}neuron = math.prod(data)',
    "summary = (\n"
    "    f\"{label}: {stats['n']} items, mean {stats['mean']}, total {total}, \"\n"
    '    f"spread {spread}, {len(lines)} lines, scaled {scaled[0]}, pair {pair}"\n'
    ")\nprint(summary)",
]
NUMBERS = "10 20 30\n40\n"

SMALL = {"cpu": "2", "memory": "4Gi", "ephemeral-storage": "100Gi"}


def custom(cpu: int, memory: int, storage: int = 500) -> dict[str, str]:
    """The limits of Latch's ``custom_task(cpu, memory, storage_gib=500)`` pod."""
    return {"cpu": str(cpu), "memory": f"{memory}Gi", "ephemeral-storage": f"{storage}Gi"}


#: notebook -> the pod limits Latch builds for each task, and the workflow's outputs.
LATCH_EXPECTED = {
    "demo": (
        {
            "cell_5": SMALL,
            "compute_hot": custom(1, 1),
            "compute_cold": custom(1, 2),
            "compute_summary": custom(1, 4),  # min(2, 1 + 1610 // 5000) cores
            "compute_median": SMALL,
            "cell_16": SMALL,
        },
        {"report"},
    ),
    "features": (
        {
            "compute_total": SMALL,
            "compute_scaled": custom(2, 16),
            "compute_lines": custom(2, 8),
            "compute_stats": custom(4, 8, 20),  # min(4, 8) cores, 8 GiB
            "spread_task": custom(2, 2),
            "cell_11": SMALL,
        },
        {"summary"},
    ),
}


@pytest.fixture(scope="module")
def flyte_python() -> Path:
    return sdk_python("flyte")


@pytest.fixture(scope="module")
def latch_python() -> Path:
    return sdk_python("latch")


def features(target: str, folder: Path) -> nbformat.NotebookNode:
    """The features notebook for a target, reading numbers.txt in ``folder`` (by its full
    path: the cells run on a worker, in a folder of its own)."""
    cells = [c for c in FEATURES if target == "flyte" or FLYTE_ONLY not in c]
    numbers = str(folder / "numbers.txt")
    return notebook(*(c.replace("{numbers!r}", repr(numbers)) for c in cells))


#: What the worker the notebooks run on advertises: more than this machine has, and the
#: accelerators the features notebook asks for, under the names taskcell requests them by.
WORKER = "CPU=4,MEMORY=64e9,DISK=200e9,SHM=16e9,MIG-A100-1g.5gb=1,TPU-V5P-2x2x1=1,DEVICE-Trn1=4"


def on_cluster(nb: nbformat.NotebookNode, address: str) -> nbformat.NotebookNode:
    """The notebook with ``%task_cluster ADDRESS`` after its ``%load_ext taskcell``."""
    nb = nbformat.from_dict(nb)
    at = next(i for i, c in enumerate(nb.cells) if "%load_ext taskcell" in c.source) + 1
    nb.cells.insert(at, nbformat.v4.new_code_cell(f"%task_cluster {address}"))
    return nb


@pytest.fixture(scope="module")
def notebooks(tmp_path_factory, module_dask) -> dict[str, tuple[Path, dict[str, Any]]]:
    """Each notebook, written to a folder of its own, with the values it computed in a kernel
    on a worker started by hand (one that advertises GPUs, MIG slices, TPUs, Trainium)."""
    module_dask.worker("--nthreads", "2", "--resources", WORKER, name="everything")
    module_dask.wait_for_workers(1)
    found = {}
    for name in ("demo", "features"):
        folder = tmp_path_factory.mktemp(name)
        (folder / "numbers.txt").write_text(NUMBERS)
        nb = on_cluster(source_notebook(name, "flyte", folder), module_dask.address)
        found[name] = (folder, run_notebook(nb, folder))
    return found


def source_notebook(name: str, target: str, folder: Path) -> nbformat.NotebookNode:
    return nbformat.read(DEMO, as_version=4) if name == "demo" else features(target, folder)


def export(nb: nbformat.NotebookNode, target: str, path: Path) -> str:
    """Export quietly: the warnings (shm left out, ...) are the unit tests' business."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExportWarning)
        source = export_notebook(nb, target)
    path.write_text(source)
    return source


def run_harness(python: Path, kind: str, folder: Path, *args: str) -> subprocess.CompletedProcess:
    """Run ``sdk/KIND_harness.py ARGS`` with the SDK venv's ``python``, in ``folder``."""
    done = run_session(
        [str(python), str(HARNESS / f"{kind}_harness.py"), *args],
        cwd=folder,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": "", "TMPDIR": str(folder)},  # the SDKs leave temp dirs
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done


# -- flyte ----------------------------------------------------------------------------------


def from_flyte(spelled: dict | None) -> Resources:
    """A ``flyte.Resources`` (as the harness spells it) read back as a taskcell request."""
    fields = {}
    for field, value in (spelled or {}).items():
        if isinstance(value, dict):
            value = Device(**value["device"])
        elif isinstance(value, list):
            value = tuple(value)
        if value is not None:
            fields[field] = value
    return Resources(**fields)


def gpu_checks() -> list[tuple[str, str]]:
    """(what Flyte documents, what the exporter writes for it): every accelerator string,
    every MIG partition and TPU slice Flyte lists, and devices it does not name."""
    documented = [
        repr(f"{name}:{count}") for name, counts in FLYTE_ACCELERATORS.items() for count in counts
    ]
    documented += [
        f"flyte.GPU({device.replace(' ', '_')!r}, 1, {part!r})"
        for device, parts in FLYTE_MIG.items()
        for part in parts
    ]
    documented += [
        f"flyte.TPU({tpu!r}, {part!r})" for tpu, parts in TPU_TOPOLOGIES.items() for part in parts
    ]
    documented += [
        "flyte.Device(quantity=3, device_class='NEURON', device='Trn1')",
        "flyte.Device(quantity=16, device_class='NEURON', device='Trn3')",
        "flyte.Device(quantity=2, device_class='GPU', device='custom_accelerator', partition='x')",
        "flyte.GPU('A2', 4)",
    ]
    pairs = []
    for text in documented:
        request = Resources(gpu=_as_taskcell(text))
        pairs.append((text, flyte_resources(request, "flyte", "check", [])["gpu"]))
    return pairs


def _as_taskcell(text: str) -> Any:
    """A Flyte ``gpu=`` expression as the same request in taskcell's own records."""
    from taskcell import spec

    names = {"flyte": type("flyte", (), {"GPU": spec.GPU, "TPU": spec.TPU, "Device": Device})}
    return eval(text, names)


def expected_flyte(nb: nbformat.NotebookNode, values: dict[str, Any]) -> tuple[dict, dict]:
    """Each task's request as the notebook asked for it: the fixed part its environment
    carries, and, for a task with dynamic resources, the whole request for the notebook's
    values."""
    workflow = plan_workflow(read_notebook(nb, BUILTIN_PRESETS), BUILTIN_PRESETS, "flyte")
    fixed, computed = {}, {}
    for step in workflow.tasks:
        request = step.request
        kept = {f: getattr(request.resources, f) for f in FIELDS if f not in request.dynamic}
        fixed[step.function] = Resources(**kept)
        if request.dynamic:
            results = {f: Expression(text).evaluate(values) for f, text in request.dynamic.items()}
            computed[step.function] = Resources(**kept, **results)
    return fixed, computed


@pytest.mark.parametrize("name", ["demo", "features"])
def test_flyte_module_in_the_flyte_sdk(name, flyte_python, notebooks):
    folder, values = notebooks[name]
    nb = source_notebook(name, "flyte", folder)
    export(nb, "flyte", folder / "flyte_workflow.py")
    checks = folder / "checks.json"
    table = {k: sorted(v) for k, v in FLYTE_ACCELERATORS.items()}
    checks.write_text(json.dumps({"table": table, "gpus": gpu_checks()}))
    args = ("flyte_workflow.py", "found.json", str(checks))
    done = run_harness(flyte_python, "flyte", folder, *args)
    found = json.loads((folder / "found.json").read_text())

    assert found["checks"]["table_agrees"], "FLYTE_ACCELERATORS differs from flyte's own table"
    for (documented, written), (want, got) in zip(
        gpu_checks(), found["checks"]["devices"], strict=True
    ):
        assert got == want, (documented, written)
    assert found["checks"]["override_replaces_whole"]

    fixed, computed = expected_flyte(nb, values)
    carried = {task: from_flyte(r) for task, r in found["resources"].items() if task != "main"}
    assert carried == fixed
    overrides = {task: from_flyte(r) for task, r in found["overrides"]}
    assert overrides == computed
    printed = values["report" if name == "demo" else "summary"]
    assert printed in done.stdout


# -- latch ----------------------------------------------------------------------------------


def _imported_modules(source: str) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module.partition(".")[0])
    return modules


@pytest.mark.parametrize("name", ["demo", "features"])
def test_latch_workflow_in_the_latch_sdk(name, latch_python, notebooks):
    folder, values = notebooks[name]
    nb = source_notebook(name, "latch", folder)
    source = export(nb, "latch", folder / "latch_workflow.py")
    assert "taskcell" not in _imported_modules(source)
    paths = {"source": str(folder / "numbers.txt")} if name == "features" else {}
    run_harness(
        latch_python, "latch", folder, "latch_workflow.py", "found.pickle", json.dumps(paths)
    )
    with open(folder / "found.pickle", "rb") as f:
        found = pickle.load(f)

    limits, outputs = LATCH_EXPECTED[name]
    assert found["limits"] == limits
    assert found["serialized"] > len(limits)  # the workflow and every task, as registered
    assert "__metadata__:" in found["docstring"]  # the metadata `latch register` reads
    assert set(found["outputs"]) == outputs
    for output in outputs:
        assert found["outputs"][output] == values[output]
