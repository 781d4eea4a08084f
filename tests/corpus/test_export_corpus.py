"""The corpus notebooks, exported to each target, run and print what the notebook showed.

Each corpus notebook (``notebooks/``) is exported to the ``dask``, ``flyte`` and ``latch`` targets
and each module runs as its user would run it: ``python module.py --scheduler ADDRESS`` on one
real cluster, ``python module.py --local`` in the Flyte SDK's venv, ``python module.py`` (Latch's
local execution) in the Latch SDK's venv. What a module prints must be what the notebook showed
when it ran in a real kernel without its ``%%task`` lines, cell after cell: printed text,
``Out[]`` and displays as text. Left out on both sides: timings, figures (a module draws them
but shows no picture), and what went to stderr (warnings, the SDKs' logs).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import warnings
from pathlib import Path

import nbformat
import pytest
from export.sdks import sdk_python
from processes import session

from taskcell.export import ExportWarning, export_notebook

from .runs import NOTEBOOKS, _masked, run, without_taskcell

pytestmark = pytest.mark.slow

TARGETS = ("dask", "flyte", "latch")


def shown_text(cells: list[list[tuple]]) -> str:
    """What a run of a notebook showed as text, in order: stdout, and each ``Out[]`` and
    display's ``text/plain`` (figures aside)."""
    parts = []
    for outputs in cells:
        for output in outputs:
            if output[0] == "stream" and output[1] == "stdout":
                parts.append(output[2])
            elif output[0] in ("execute_result", "display_data"):
                data = dict(output[1])
                if not any(kind.startswith("image/") for kind in data):
                    parts.append(f"{data.get('text/plain', '')}\n")
            elif output[0] == "error":
                parts.append(f"{output[1]}: {output[2]}\n")
    return comparable("".join(parts))


def comparable(text: str) -> str:
    """``text`` with timings, object addresses and line endings as :mod:`.runs` masks them,
    and the masked timing lines gone (a module does not print timings)."""
    text = _masked(text.replace("\r\n", "\n"))
    return "".join(line for line in text.splitlines(True) if line.strip() != "<timing>")


@pytest.fixture(scope="module")
def cluster(module_dask):
    """Two workers of one thread each, shared by the notebooks and the dask modules."""
    module_dask.worker()
    module_dask.worker()
    module_dask.wait_for_workers(2)
    return module_dask


@pytest.fixture(scope="module")
def runs(cluster, tmp_path_factory):
    """``runs(path) -> (shown, {target: finished process})``, once per notebook: its modules
    run while the notebook runs in a kernel."""
    done: dict[Path, tuple[str, dict[str, subprocess.CompletedProcess]]] = {}
    pythons = {"dask": Path(sys.executable)}

    def get(path: Path):
        if path not in done:
            for target in ("flyte", "latch"):
                pythons.setdefault(target, sdk_python(target))
            folder = tmp_path_factory.mktemp(path.stem)
            with contextlib.ExitStack() as stack:  # each module's processes end with the run
                started = {
                    target: stack.enter_context(
                        _start(path, target, pythons[target], folder, cluster.address)
                    )
                    for target in TARGETS
                }
                book = nbformat.read(path, as_version=4)
                previous = os.environ.get("DASK_SCHEDULER_ADDRESS")
                os.environ["DASK_SCHEDULER_ADDRESS"] = cluster.address  # the notebook's Client()
                try:
                    shown = shown_text(run(without_taskcell(book), folder).cells)
                finally:
                    if previous is None:
                        del os.environ["DASK_SCHEDULER_ADDRESS"]
                    else:
                        os.environ["DASK_SCHEDULER_ADDRESS"] = previous
                finished = {}
                for target, process in started.items():
                    stdout, stderr = process.communicate(timeout=300)
                    finished[target] = subprocess.CompletedProcess(
                        process.args, process.returncode, stdout, stderr
                    )
            done[path] = (shown, finished)
        return done[path]

    return get


def _start(
    path: Path, target: str, python: Path, folder: Path, address: str
) -> contextlib.AbstractContextManager[subprocess.Popen]:
    """Export the notebook for ``target`` and start its module, as its user runs it, in a
    session ended whole (:func:`processes.session`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExportWarning)
        source = export_notebook(path, target)
    module = folder / f"{path.stem.replace('-', '_')}_{target}.py"
    module.write_text(source)
    options = {"dask": ["--scheduler", address], "flyte": ["--local"], "latch": []}[target]
    env = {**os.environ, "PYTHONPATH": "", "LOG_LEVEL": "error", "TMPDIR": str(folder)}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return session(
        [str(python), str(module), *options],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_an_exported_module_prints_what_the_notebook_showed(path, target, runs):
    shown, finished = runs(path)
    done = finished[target]
    assert done.returncode == 0, done.stderr[-4000:]
    assert comparable(done.stdout) == shown


def test_the_comparison_sees_a_difference():
    """The text compared is the notebook's own: a value shown differently is not equal."""
    cells = [
        [("stream", "stdout", "Wall time: 3 s\n1\n")],
        [("execute_result", [("text/plain", "2")])],
        [("display_data", [("image/png", "iVBOR..."), ("text/plain", "<Figure size 640x480>")])],
    ]
    assert shown_text(cells) == "1\n2\n"
    assert comparable("1\n3\n") != shown_text(cells)
