"""Exporting a 500-cell notebook (target: under 1 s), against reading it with nbformat.

The notebook is generated: a fifth markdown, the rest alternating driver cells and ``%%task``
cells with presets, fields, environments and dynamic requests, chained through their names so
the plan has real edges. ``taskcell_s`` is :func:`taskcell.export.export_notebook` on the file
(read, analyse, plan, render; with and without ``ruff`` formatting); ``baseline_s`` is
``nbformat.read`` of the same file, the least any exporter must do. Best of a few runs each.
"""

from __future__ import annotations

import tempfile
import time
import warnings
from pathlib import Path

CELLS = 500
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


def _best(fn, repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


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
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
