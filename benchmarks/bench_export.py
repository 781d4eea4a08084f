"""Exporting notebooks: a 500-cell one (target: under 1 s) and a 20,000-cell chain (targets:
under 10 s and 300 MB, its memory returned afterwards), against reading them with nbformat.

The 500-cell notebook is generated: a fifth markdown, the rest alternating driver cells and
``%%task`` cells with presets, fields, environments and dynamic requests, chained through their
names so the plan has real edges. The 20,000-cell notebook is a chain: each cell reads the name
the one before it bound, every other one a ``%%task`` cell; memory and time must grow with its
length, never with its square. ``taskcell_s`` is :func:`taskcell.export.export_notebook` on the
file (read, analyse, plan, render); ``baseline_s`` is ``nbformat.read`` of the same file, the
least any exporter must do. The chain is exported in a fresh interpreter per target, which
reports the peak of its resident memory during the export (``VmHWM``, reset first) and what it
still holds after it, each over what it held before.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

CELLS = 500
CHAIN = 20_000
REPEATS = 3


def make_notebook(path: Path, cells: int = CELLS) -> Path:
    """Write a notebook of ``cells`` cells with a realistic mix of kinds."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    nb = new_notebook()
    nb.cells.append(new_markdown_cell("# Benchmark\n\nA long notebook."))
    nb.cells.append(new_code_cell("%load_ext taskcell\nimport math\nimport statistics"))
    nb.cells.append(new_code_cell("%task_env etl --cpu 1 --memory 2Gi"))
    nb.cells.append(new_code_cell("values_0 = list(range(100))"))
    lines = ["", "small_task", "--env etl --memory 4Gi", '--cpu "min(4, len(values_{p}))"']
    i, last = 1, 0  # last: the step that bound the newest values_N
    while len(nb.cells) < cells:
        if i % 5 == 0:
            nb.cells.append(new_markdown_cell(f"## Step {i}\n\nWhat happens next."))
        elif i % 2:
            line = lines[i % len(lines)].format(p=last)
            nb.cells.append(
                new_code_cell(
                    f"%%task {line}\n"
                    f"values_{i} = [v * 2 for v in values_{last}]\n"
                    f"total_{i} = sum(values_{i})\n"
                    f"for j in range(3):\n    total_{i} += j\n"
                    f"root_{i} = math.sqrt(total_{i})"
                )
            )
        else:
            nb.cells.append(
                new_code_cell(
                    f"def scale_{i}(v):\n    return v * {i}\n\n"
                    f"values_{i} = [scale_{i}(v) for v in values_{last}]\n"
                    f"mean_{i} = statistics.mean(values_{i})\nmean_{i}"
                )
            )
        if i % 5:
            last = i
        i += 1
    nbformat.write(nb, path)
    return path


def make_chain(path: Path, cells: int = CHAIN) -> Path:
    """Write a notebook of ``cells`` cells, each reading the name the one before bound."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    nb = new_notebook()
    nb.cells.append(new_code_cell("%load_ext taskcell\nx_0 = 0"))
    for i in range(1, cells):
        if i % 2:
            nb.cells.append(new_code_cell(f"%%task --cpu 1\nx_{i} = x_{i - 1} + 1"))
        else:
            nb.cells.append(new_code_cell(f"x_{i} = x_{i - 1} * 2\nprint(x_{i})"))
    nbformat.write(nb, path)
    return path


#: Run in a fresh interpreter: export the chain once, report time and memory (in KiB).
_MEASURE = """
import gc, json, sys, time, warnings
from taskcell.export import export_notebook

def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))

path, target = sys.argv[1], sys.argv[2]
warnings.simplefilter("ignore")
export_notebook({"cells": [{"cell_type": "code", "source": "%%task\\nx = 1"}]}, target)
gc.collect()
before = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
started = time.perf_counter()
export_notebook(path, target, format=False)
seconds = time.perf_counter() - started
peak = status("VmHWM")
gc.collect()
print(json.dumps({"seconds": seconds, "peak": peak - before, "after": status("VmRSS") - before}))
"""


def _best(fn, repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def _chain_row(path: Path, target: str, baseline: float) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path), target],
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "benchmark": f"export {CHAIN}-cell chain, {target} target, unformatted",
        "taskcell_s": round(found["seconds"], 3),
        "baseline_s": round(baseline, 4),
        "ratio": round(found["seconds"] / baseline, 1),
        "note": (
            f"peak memory {found['peak'] / 1024:.0f} MB over the interpreter's own, "
            f"{found['after'] / 1024:.0f} MB still held after; targets 10 s and 300 MB"
        ),
    }


def run() -> list[dict]:
    """Rows ``{"benchmark", "taskcell_s", "baseline_s", "ratio", "note"}``."""
    import nbformat

    from taskcell.export import export_notebook

    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = make_notebook(Path(folder) / "long.ipynb")
        export_notebook(path)  # warm imports (IPython's transformer, ruff's first start)
        baseline = _best(lambda: nbformat.read(path, as_version=4))
        rows = []
        for name, kwargs in (
            (f"export {CELLS}-cell notebook, dask target, formatted", {}),
            (f"export {CELLS}-cell notebook, dask target, unformatted", {"format": False}),
            (
                f"export {CELLS}-cell notebook, flyte target, unformatted",
                {"target": "flyte", "format": False},
            ),
        ):
            seconds = _best(lambda kwargs=kwargs: export_notebook(path, **kwargs))
            rows.append(
                {
                    "benchmark": name,
                    "taskcell_s": round(seconds, 4),
                    "baseline_s": round(baseline, 4),
                    "ratio": round(seconds / baseline, 1),
                    "note": "baseline: nbformat.read of the same file; target under 1 s",
                }
            )
        chain = make_chain(Path(folder) / "chain.ipynb")
        chain_baseline = _best(lambda: nbformat.read(chain, as_version=4), 1)
        rows += [_chain_row(chain, target, chain_baseline) for target in ("dask", "flyte", "latch")]
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
