"""``%%task auto`` in a real kernel: sized from the file a cell opens, then from its own runs."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.slow

MiB = 1 << 20
LADDER = {f"m{q}": {"memory": q} for q in ("256Mi", "512Mi", "1Gi", "2Gi", "4Gi", "8Gi")}
RUNGS = {f"m{q}": int(q[:-2]) * (MiB if q.endswith("Mi") else 1024 * MiB) for q in
         ("256Mi", "512Mi", "1Gi", "2Gi", "4Gi", "8Gi")}  # fmt: skip
CELL = "%%task auto\nn = len(open(path).read().split())"


@pytest.fixture(scope="module")
def notebook(kernel, module_dask, tmp_path_factory):
    """A kernel on one worker process, with a ladder of memory presets and three texts."""
    module_dask.worker("--nthreads", "1", name="auto")
    folder = tmp_path_factory.mktemp("texts")
    for name, megabytes in (("small", 4), ("medium", 8), ("large", 32)):
        line = "lorem ipsum dolor sit amet consectetur adipiscing elit\n"
        (folder / f"{name}.txt").write_text(line * (megabytes * MiB // len(line)))
    out = kernel.run(
        f"import dask, distributed\ndask.config.set({{'taskcell.presets': {LADDER!r}}})\n"
        f"distributed.Client({module_dask.address!r}).wait_for_workers(1)\n"
        f"%task_cluster {module_dask.address}\n"
        f"folder = {str(folder)!r}"
    )
    assert out.status == "ok", out.error_text
    return kernel


def auto(kernel, text: str) -> tuple[str, str, int]:
    """Run the cell on ``text``; the preset auto chose, why, and the run's measured peak."""
    out = kernel.run(f"path = folder + '/{text}.txt'")
    assert out.status == "ok", out.error_text
    out = kernel.run(CELL)
    assert out.status == "ok", out.error_text
    chosen = re.search(r"--preset auto chose (\S+): (.*)", out.stdout)
    assert chosen, out.stdout
    peak = kernel.value("taskcell.planner.kernel_history()[-1].usage.peak_memory")
    return chosen[1], chosen[2], peak


def test_auto_sizes_a_new_cell_by_the_file_it_opens_then_learns_from_its_runs(notebook):
    notebook.run("import taskcell.planner")
    first, why, peak = auto(notebook, "medium")
    # No past run: the planner sized the 8 MiB file the cell opens (the path string is 60 bytes).
    assert "no past run of this cell" in why and "medium.txt (8 MiB, split into words)" in why
    assert RUNGS[first] >= peak

    larger, why, larger_peak = auto(notebook, "large")  # four times the text
    assert "1 past run of this cell" in why and "32 MiB of input now" in why
    assert RUNGS[larger] >= larger_peak
    assert RUNGS[larger] > RUNGS[first]
    assert RUNGS[larger] <= 4 * larger_peak  # scaled to the input, not a guess far above it

    smaller, why, smaller_peak = auto(notebook, "small")  # an eighth of the last one
    assert RUNGS[smaller] >= smaller_peak
    assert RUNGS[smaller] < RUNGS[larger]


def test_a_run_with_an_explicit_request_teaches_auto(notebook):
    """A cell run first with its own request (``%%task m2Gi``), then switched to ``auto``,
    scales from that run: its input was noted whatever it asked for."""
    explicit = "%%task m2Gi --name taught\ntext = open(path).read()"
    out = notebook.run("path = folder + '/small.txt'")
    assert out.status == "ok", out.error_text
    out = notebook.run(explicit)
    assert out.status == "ok", out.error_text
    notebook.run("path = folder + '/large.txt'")
    out = notebook.run(explicit.replace("m2Gi", "auto"))
    assert out.status == "ok", out.error_text
    chosen = re.search(r"--preset auto chose (\S+): (.*)", out.stdout)
    assert chosen, out.stdout
    assert "1 past run of this cell" in chosen[2] and "32 MiB of input now" in chosen[2]
