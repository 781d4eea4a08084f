"""``%%task auto --probe`` in a real kernel on a real worker: the cell's memory measured on
samples of its input where the code gives the planner no basis, nothing of the probes
written back, and the cells a probe cannot size refused before anything runs."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.slow

MiB = 1 << 20
LADDER = {f"m{q}": {"memory": q} for q in ("256Mi", "512Mi", "1Gi", "2Gi", "4Gi", "8Gi")}
RUNGS = {f"m{q}": int(q[:-2]) * (MiB if q.endswith("Mi") else 1024 * MiB) for q in
         ("256Mi", "512Mi", "1Gi", "2Gi", "4Gi", "8Gi")}  # fmt: skip
#: Every pair of x's 2000 rows, by broadcasting: a temporary of 2000 x 2000 x 8 floats (256
#: MiB) from an input of 125 KiB. Inside a function, where the planner's shape model does not
#: look: it sees 125 KiB read and no operation on it.
PAIRWISE = (
    "def pairwise(a):\n    return ((a[:, None, :] - a[None, :, :]) ** 2).sum(-1)\nd = pairwise(x)"
)
#: What the notebook holds: its names and a checksum of x, which no probe may change.
STATE = "(sorted(n for n in globals() if not n.startswith('_')), id(x), x.shape, float(x.sum()))"


@pytest.fixture(scope="module")
def notebook(kernel, module_dask):
    """A kernel on one worker process, with a ladder of memory presets and x: 2000 rows."""
    module_dask.worker("--nthreads", "1", name="probe")
    out = kernel.run(
        f"import dask, distributed\ndask.config.set({{'taskcell.presets': {LADDER!r}}})\n"
        f"distributed.Client({module_dask.address!r}).wait_for_workers(1)\n"
        f"%task_cluster {module_dask.address}\n"
        "import numpy as np\n"
        "import taskcell.planner\n"
        "x = np.random.default_rng(0).random((2000, 8))"
    )
    assert out.status == "ok", out.error_text
    return kernel


def chosen(stdout: str) -> tuple[str, str]:
    found = re.search(r"--preset auto chose (\S+): (.*)", stdout)
    assert found, stdout
    return found[1], found[2]


def tasks(kernel) -> int:
    return kernel.value("len(taskcell.planner.kernel_history())")


def test_a_probe_sizes_a_pairwise_product_the_planner_cannot_see(notebook):
    static = notebook.value(
        "taskcell.planner.auto_preset([], source=" + repr(PAIRWISE) + ", estimate="
        "taskcell.planner.estimate_memory(taskcell.planner.cell_input(" + repr(PAIRWISE) + ", "
        "globals()))).preset"
    )
    before = tasks(notebook)
    out = notebook.run(f"%%task auto --probe\n{PAIRWISE}")
    assert out.status == "ok", out.stdout + out.error_text
    preset, why = chosen(out.stdout)
    assert why.startswith("probed on 1/8, 1/4 and 1/2 of x: growing as its square"), why
    peak = notebook.value("taskcell.planner.kernel_history()[-1].usage.peak_memory")
    assert RUNGS[preset] >= peak, (preset, peak / MiB, why)
    assert RUNGS[static] < peak  # without the probe, auto would have asked too little
    assert RUNGS[preset] <= 4 * peak  # measured, not a guess far above
    # The probes ran as tasks of their own, out of the kernel's history: one run joined it.
    assert tasks(notebook) == before + 1
    assert notebook.value("d.shape") == (2000, 2000)


def test_nothing_a_probe_binds_or_changes_comes_back(notebook):
    """The probes run on samples (under 2000 rows) and succeed; the run at full size fails, so
    whatever the notebook holds after it, a probe left there."""
    notebook.run("d = pairwise = None\ndel d, pairwise")  # the last test's
    state = notebook.value(STATE)
    cell = (
        "%%task auto --probe\n"
        "x[:] = 0\n"  # changed in place: a probe's copy of a sample only
        f"if len(x) == 2000:\n    raise ValueError('the full size fails')\n"
        f"{PAIRWISE}\nrows = len(x)"
    )
    out = notebook.run(cell)
    assert out.status == "error" and "the full size fails" in out.error_text
    assert "probed on 1/8, 1/4 and 1/2 of x" in out.stdout
    assert notebook.value(STATE) == state


def test_a_probe_that_fails_on_a_sample_falls_back_to_the_planner(notebook):
    out = notebook.run(
        "%%task auto --probe\nassert len(x) == 2000, 'needs every row'\nrows = len(x)"
    )
    assert out.status == "ok", out.error_text
    assert (
        "taskcell: --probe: the probe on 1/64 of x failed (AssertionError: needs every row); "
        "auto chooses without it\n"
    ) in out.stdout
    _, why = chosen(out.stdout)
    assert why.startswith("no past run of this cell; it reads x (125 KiB"), why
    assert notebook.value("rows") == 2000


@pytest.mark.parametrize(
    ("cell", "said"),
    [
        (
            "%%task auto --probe\nnp.save(folder + '/d.npy', x * 2)",
            "%%task auto --probe: the cell writes a file (np.save), which each probe would do "
            "again; nothing ran. Use %%task auto without --probe",
        ),
        (
            "%%task auto --probe\ny = [k * 2 for k in range(n)]",
            "%%task auto --probe: the cell has no input a probe can sample (n (int) is not a "
            "DataFrame, Series, array or list); nothing ran",
        ),
        (
            "%%task m1Gi --probe\nd = x * 2",
            "--probe measures a cell for auto to size it, and this line asks for the preset "
            "'m1Gi'; write %%task auto --probe (or %%task --preset auto --probe)",
        ),
    ],
    ids=["writes", "nothing-to-sample", "not-auto"],
)
def test_cells_a_probe_cannot_size_are_refused_before_anything_runs(notebook, cell, said):
    notebook.run("n = 10\nfolder = '.'")
    state, before = notebook.value(STATE), tasks(notebook)
    out = notebook.run(cell)
    assert out.status == "error"
    assert "UsageError" in out.stderr and said in " ".join(out.stderr.split()), out.stderr
    assert notebook.value(STATE) == state and tasks(notebook) == before
