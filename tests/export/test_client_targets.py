"""The notebook's Dask ``Client`` in the ``flyte`` and ``latch`` targets (issue 30).

Inside each task the notebook's ``Client(...)``/``LocalCluster(...)`` is a real
``distributed.Client`` on a cluster of the task's own, of the notebook's size, listening on
127.0.0.1 only and closed when the task ends: ``.cluster``, ``status``, ``exception()``,
``traceback()`` and ``retry()`` are Dask's. A client travels to another task as its arguments
and is made again there; a Future travels as it ended (its key, and its value or exception) and
is made again on the next task's cluster under its key; a collection holding Futures travels
with their data.

The proof is differential: the modules, run as their users run them (``--local`` in the Flyte
SDK's venv, plainly in the Latch SDK's), print what the same notebook prints in a real kernel.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import warnings
from pathlib import Path

import cloudpickle
import psutil
import pytest
from processes import run_session

from export.sdks import sdk_python
from taskcell.export import ExportWarning, export_notebook
from taskcell.export.carriers import local_dask
from taskcell.export.standalone import portable

from .conftest import notebook

#: A notebook that makes a cluster and a client, and uses them and their Futures (a failed one,
#: retried, included) in later cells and in a task cell: in latch every cell is a task of its
#: own, in flyte the task cell is.
CELLS = (
    "from dask.distributed import Client, LocalCluster, wait\nimport distributed\n"
    "cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False)\n"
    "client = Client(cluster)",
    "f = client.submit(lambda x: x + 1, 41)\nbad = client.submit(lambda: 1 / 0)\n"
    "wait([f, bad])\nprint(f.result(), client.gather(f), f.status, f.done())\n"
    "print(repr(bad.exception()), bad.status, type(bad.traceback()).__name__)\nbad.retry()\n"
    "wait(bad)\n"
    "print(bad.status, type(bad.exception()).__name__)",
    "print(isinstance(client, distributed.Client), type(client.cluster).__name__, "
    "len(client.cluster.workers), client.status)\n"
    "print(f.status, client.gather(f), bad.status, repr(bad.exception()), "
    "type(bad.traceback()).__name__)",
    "%%task\nfs = client.map(lambda v: v * v, range(4))\n"
    "print(client.gather(fs), isinstance(fs[0], distributed.Future), "
    "len(client.cluster.workers), client.status, f.result() + 1, bad.status)",
    "total = client.submit(sum, [1, 2, 3]).result()\n"
    "print(total, client.gather(fs), isinstance(fs[0], distributed.Future), fs[0].status)",
)


def _kernel_prints(cells: tuple[str, ...], folder: Path) -> str:
    """What the notebook prints in a real kernel (a ``%%task`` cell run as the cell it is)."""
    from nbclient import NotebookClient

    plain = [cell.removeprefix("%%task\n") for cell in cells]
    nb = notebook(*plain)
    NotebookClient(
        nb, kernel_name="python3", timeout=120, resources={"metadata": {"path": str(folder)}}
    ).execute()
    return "".join(
        output.get("text", "")
        for cell in nb.cells
        for output in cell.get("outputs", [])
        if output.get("name") == "stdout"
    )


def _run(module: Path, target: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": "", "LOG_LEVEL": "error", "TMPDIR": str(module.parent)}
    return run_session(
        [str(sdk_python(target)), str(module), *(["--local"] if target == "flyte" else [])],
        cwd=module.parent,
        env=env,
        text=True,
        timeout=300,
    )


def _export(cells: tuple[str, ...], target: str, path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExportWarning)
        path.write_text(export_notebook(notebook(*cells), target))


@pytest.fixture(scope="module")
def kernel_printed(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _kernel_prints(CELLS, tmp_path_factory.mktemp("kernel"))


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("target", ["flyte", "latch"])
def test_the_notebooks_client_is_a_real_client_in_every_task(target, kernel_printed, tmp_path):
    assert kernel_printed.startswith("42 42 finished True\n")  # the notebook ran
    module = tmp_path / "workflow.py"
    _export(CELLS, target, module)
    finished = _run(module, target)
    assert finished.returncode == 0, finished.stderr[-4000:]
    assert finished.stdout == kernel_printed


def _listening(pid: int) -> set[str]:
    return {
        c.laddr.ip
        for c in psutil.Process(pid).net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    }


def test_a_tasks_clients_are_its_own_on_loopback_and_closed_when_it_ends():
    import distributed

    task = local_dask("task")
    seen = {}

    @task
    def first() -> object:
        client = local_dask("Client", n_workers=1, threads_per_worker=1, processes=False)
        seen["first"] = client
        ok, bad = client.submit(abs, -3, key="ok"), client.submit(lambda: 1 / 0, key="bad")
        assert ok.result() == 3
        assert _listening(os.getpid()) <= {"127.0.0.1"}
        # as a target carries a value out of its task
        return pickle.loads(cloudpickle.dumps(portable((client, [ok, bad]))))

    client, (ok, bad) = first()
    assert seen["first"].status == "closed"
    assert not isinstance(client, distributed.Client)  # made again only where it is used

    @task
    def second(client: distributed.Client, futures: list) -> object:
        seen["second"] = client
        assert isinstance(client, distributed.Client) and client is not seen["first"]
        assert len(client.cluster.workers) == 1
        ok, bad = futures
        assert isinstance(ok, distributed.Future) and ok.client is client
        assert (ok.key, ok.status, ok.result()) == ("ok", "finished", 3)
        assert (bad.key, bad.status) == ("bad", "error")
        assert isinstance(bad.exception(), ZeroDivisionError)
        return client.submit(abs, -4).result()

    assert second(client, [ok, bad]) == 4
    assert seen["second"].status == "closed"


def test_dasks_own_client_api_in_a_task_and_its_futures_results_in_the_next():
    import dask
    import distributed

    task = local_dask("task")

    @task
    def first() -> object:
        client = local_dask("Client", n_workers=1, threads_per_worker=2, processes=False)
        future = client.submit(lambda a, b: a + b, 1, b=2)
        squares = client.map(lambda v: v * v, range(3))
        assert future.result() == 3 and future.done()
        assert client.gather(squares) == [0, 1, 4]
        assert client.gather({"a": future}) == {"a": 3}
        assert client.compute(dask.delayed(sum)([1, 2])).result() == 3
        assert distributed.wait(squares).not_done == set()
        done = distributed.as_completed(squares, with_results=True)
        assert sorted(r for _, r in done) == [0, 1, 4]
        return pickle.loads(cloudpickle.dumps(portable(squares)))

    @task
    def second(squares: list) -> list:
        return [f.result() for f in squares]

    assert second(first()) == [0, 1, 4]
