"""Round trips: a notebook run in a real kernel and its exported module give the same values.

The notebook runs top to bottom with nbclient in a ``python3`` kernel, its ``%%task`` cells on
the kernel's embedded cluster; the exported ``dask`` module runs in a fresh interpreter on its
own embedded cluster (or on scheduler and worker processes started here). Values are compared
name by name.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from processes import run_session

from taskcell.export import ExportWarning, export_file

from .conftest import notebook, run_module, run_notebook, write_notebook

pytestmark = pytest.mark.slow

DEMO = Path(__file__).resolve().parents[2] / "demo_notebooks" / "04-export.ipynb"

TRICKY = [
    "md:# Tricky flows",
    "%load_ext taskcell",
    "import math\nimport numpy as np",
    "x = 1\nscale = 3\nitems = [1, 2, 3]\n\ndef helper(v):\n    return v * scale",
    '%%task --cpu 1\ny = helper(x) + 1\nunused = "never read"\nfor i in range(3):\n    pass',
    "x = 10",  # rebound after y's task was called with x = 1
    "%%task\nz = x + y\ny = y * 2",  # reads and rebinds y
    "%%task --name left\na = z + 1",
    "%%task --name right\nb = z + 2",
    "%%task\nd = a + b\nroot = math.sqrt(d)\nd",  # the diamond closes
    "total = d + y\ntotal",
    "items.append(total)",  # the driver changes a value a later task reads
    "%%task\ncounts = [v * 2 for v in items]\ndel scale",
    "%task_env etl --cpu 1 --memory 1Gi",
    "%%task --env etl --memory 2Gi\nsizes = [len(str(v)) for v in counts]",
    '%%task --cpu "min(2, len(items))"\nn_items = len(items)',
    "%%task small_task\nimport json\ntext = json.dumps(sizes)",
    "parsed = json.loads(text)\narr = np.arange(n_items) * root",
    "!echo hi\n%time w = 5",
]

PLAIN = (int, float, str, bool, list, tuple, dict, set, type(None), np.ndarray)


def assert_same_values(notebook_values: dict, module_values: dict, notebook_only: set[str]):
    assert set(notebook_values) - set(module_values) == notebook_only
    assert set(module_values) - set(notebook_values) == set()
    for name, value in module_values.items():
        if not isinstance(value, PLAIN):
            continue
        expected = notebook_values[name]
        if isinstance(value, np.ndarray):
            assert np.array_equal(value, expected), name
        else:
            assert value == expected, name


def export(path: Path, output: Path, warnings: int = 0) -> Path:
    if not warnings:
        return export_file(path, output)
    with pytest.warns(ExportWarning) as caught:
        export_file(path, output)
    assert len(caught) == warnings, [str(w.message) for w in caught]
    return output


def test_tricky_flows(tmp_path):
    nb = notebook(*TRICKY)
    path = tmp_path / "tricky.ipynb"
    write_notebook(path, *TRICKY)
    module = export(path, tmp_path / "tricky.py")
    values = run_module(module, tmp_path)["values"]
    assert values["x"] == 10 and values["y"] == 8 and values["total"] == 39
    assert "scale" not in values  # deleted by a task, as in the notebook
    # `i` is a loop variable no later cell reads; the module's task does not return it.
    assert_same_values(run_notebook(nb, tmp_path), values, notebook_only={"i"})


def test_demo_notebook(tmp_path):
    import nbformat

    nb = nbformat.read(DEMO, as_version=4)
    module = export(DEMO, tmp_path / "demo.py")
    done = run_module(module, tmp_path)
    assert_same_values(run_notebook(nb, tmp_path), done["values"], notebook_only=set())
    assert done["values"]["report"].startswith("1610 hot and 1567 cold readings")


def test_demo_runs_as_a_script(tmp_path):
    module = export(DEMO, tmp_path / "demo.py")
    done = run_session([sys.executable, str(module)], text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == "1610 hot and 1567 cold readings, median 19.954\n"


#: A task that says it started, then waits for the other three to start too: run one after
#: another, none would see all four (and the first would wait out its patience). The folder is
#: named through f-strings: passed to a call, it would count as changed there, and the export
#: would run each task after the one before.
TOGETHER = """%%task
import os, pathlib, time
pathlib.Path(f"{{folder}}/{name}").touch()
patience_{name} = time.monotonic() + 60
while len(os.listdir(f"{{folder}}")) < 4 and time.monotonic() < patience_{name}:
    time.sleep(0.05)
met_{name} = len(os.listdir(f"{{folder}}"))"""


@pytest.fixture(scope="module")
def four_tasks(tmp_path_factory) -> Path:
    """A module whose four tasks read nothing of each other's; it prints how many of them each
    saw running at once (the fewest)."""
    folder = tmp_path_factory.mktemp("four")
    cells = ["import tempfile\nfolder = tempfile.mkdtemp()"]
    cells += [TOGETHER.format(name=name) for name in "abcd"]
    cells.append('print(f"met {min(met_a, met_b, met_c, met_d)}")')
    return export(write_notebook(folder / "four.ipynb", *cells), folder / "four.py")


def met(module: Path, *args: str, env: dict[str, str] | None = None) -> int:
    done = run_session(
        [sys.executable, str(module), *args],
        env={**os.environ, "TMPDIR": str(module.parent), **(env or {})},  # its mkdtemp()
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return int(re.fullmatch(r"met (\d+)\n", done.stdout).group(1))


def test_independent_tasks_run_at_the_same_time(four_tasks):
    """On the embedded cluster, given four threads by Dask config: all four at once."""
    threads = {"DASK_TASKCELL__EMBEDDED_CLUSTER__THREADS_PER_WORKER": "4"}
    assert met(four_tasks, env=threads) == 4


def test_scheduler_option(four_tasks):
    """``--scheduler ADDRESS`` runs the tasks there (here a scheduler with one 4-thread worker)."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=1, threads_per_worker=4, processes=False, protocol="tcp", dashboard_address=":0"
    ) as cluster:
        assert met(four_tasks, "--scheduler", cluster.scheduler_address) == 4
