"""Notebooks as people write them give the same results with and without their ``%%task`` lines.

Each corpus notebook (``notebooks/``, written here in the shapes of public example notebooks of
Python, NumPy, pandas, scikit-learn, matplotlib and Dask) runs twice in real kernels against
one real cluster: as it is, and with every taskcell line taken out. Cell by cell, the two runs
must show the same printed text, displays, ``Out[]`` and errors, and end with the same values
in the notebook's names. The one difference allowed is taskcell naming a value that could not
come back from a worker (a generator): that name is left out of the comparison.
"""

from __future__ import annotations

import nbformat
import pytest

from .runs import NOTEBOOKS, run, without_taskcell

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(module_dask):
    """Two workers of one thread each: a task cell and the graphs it submits must share them."""
    module_dask.worker()
    module_dask.worker()
    module_dask.wait_for_workers(2)
    return module_dask


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_a_notebook_means_the_same_with_task_cells(path, cluster, monkeypatch, tmp_path):
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", cluster.address)
    book = nbformat.read(path, as_version=4)
    plain = run(without_taskcell(book), tmp_path)
    tasks = run(book, tmp_path)
    assert len(tasks.cells) == len(plain.cells)
    for number, (got, expected) in enumerate(zip(tasks.cells, plain.cells, strict=True)):
        assert got == expected, f"code cell {number} of {path.name} shows something else"
    assert {n: v for n, v in tasks.names.items()} == {
        n: v for n, v in plain.names.items() if n not in tasks.lost
    }
    assert not any(o[0] == "error" for cell in plain.cells for o in cell), "the notebook errs"
