"""Which cluster ``%%task`` uses, seed 003 written as cells, and workers dying under a cell."""

from __future__ import annotations

import signal

import pytest
from conftest import KernelSession, most_at_once
from waiting import eventually

pytestmark = pytest.mark.slow


def connected_kernel(address: str) -> KernelSession:
    kernel = KernelSession()
    out = kernel.run(
        "%load_ext taskcell\nimport distributed\n"
        f"distributed.Client({address!r}).wait_for_workers(1)\n%task_cluster {address}"
    )
    assert out.status == "ok", out.error_text
    return kernel


def test_seed_scenario_as_task_cells(dask_processes):
    dask_processes.worker("--nthreads", "4", "--resources", "GPU=2", name="gpu-a")
    env = {"DASK_DISTRIBUTED__WORKER__RESOURCES__GPU": "2"}
    dask_processes.worker("--nthreads", "4", env=env, name="gpu-env")
    dask_processes.worker("--nthreads", "2", "--resources", "MEMORY=100e9", name="mem")
    kernel = KernelSession()
    try:
        out = kernel.run(
            "%load_ext taskcell\nimport distributed\n"
            f"distributed.Client({dask_processes.address!r}).wait_for_workers(3)"
        )
        assert out.status == "ok", out.error_text
        for i in range(8):
            out = kernel.run(
                f"%%task --gpu 1 --bg\nimport os, time\nt0 = time.time()\ntime.sleep(0.5)\n"
                f"part_{i} = (os.environ['TASKCELL_WORKER_NAME'], t0, time.time())"
            )
            assert out.status == "ok", out.error_text
        names = ", ".join(f"'part_{i}'" for i in range(8))
        waited = kernel.run(
            f"import time\nwhile any(n not in globals() for n in [{names}]):\n    time.sleep(0.1)",
            timeout=120,
        )
        assert waited.status == "ok", waited.error_text
        out = kernel.run(
            "%%task --memory 70e9\nimport os\n"
            "aggregated_on = os.environ['TASKCELL_WORKER_NAME']\n"
            f"parts = [{names.replace(chr(39), '')}]"
        )
        assert out.status == "ok", out.error_text
        assert kernel.value("aggregated_on") == "mem"
        parts = kernel.value("parts")
        assert {worker for worker, _, _ in parts} <= {"gpu-a", "gpu-env"}
        for name in ("gpu-a", "gpu-env"):
            assert most_at_once([(s, e) for w, s, e in parts if w == name]) <= 2
    finally:
        kernel.stop()


def test_dask_scheduler_address_points_task_at_a_cluster(dask_processes):
    dask_processes.worker(name="by-env")
    dask_processes.wait_for_workers(1)
    kernel = KernelSession(env={"DASK_SCHEDULER_ADDRESS": dask_processes.address})
    try:
        kernel.run("%load_ext taskcell")
        out = kernel.run("%%task\nimport os\nwhere = os.environ['TASKCELL_WORKER_NAME']")
        assert out.status == "ok", out.error_text
        assert kernel.value("where") == "by-env"
    finally:
        kernel.stop()


def test_a_client_the_user_made_is_used(dask_processes):
    dask_processes.worker(name="user-made")
    kernel = KernelSession()
    try:
        kernel.run(
            "%load_ext taskcell\nimport distributed\n"
            f"client = distributed.Client({dask_processes.address!r})\nclient.wait_for_workers(1)"
        )
        out = kernel.run("%%task\nimport os\nwhere = os.environ['TASKCELL_WORKER_NAME']")
        assert out.status == "ok", out.error_text
        assert kernel.value("where") == "user-made"
    finally:
        kernel.stop()


def test_closing_the_users_cluster_after_task_cells_logs_nothing():
    """Task cells back to back share one subscription to their events; the next plain cell
    ends it first, so closing the client there is quiet (the scheduler runs in the kernel, and
    would log a critical error for a client that left while subscribed)."""
    kernel = KernelSession()
    try:
        out = kernel.run(
            "%load_ext taskcell\nimport distributed\n"
            "cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, "
            "dashboard_address=None)\nclient = distributed.Client(cluster)\n"
            "import logging\nlogged = []\nhandler = logging.Handler(logging.ERROR)\n"
            "handler.emit = lambda record: logged.append(record.getMessage())\n"
            "logging.getLogger('distributed').addHandler(handler)"
        )
        assert out.status == "ok", out.error_text
        for value in (1, 2):
            out = kernel.run(f"%%task\ny = {value}")
            assert out.status == "ok", out.error_text
        closed = kernel.run("client.close()\ncluster.close()\nprint(y)")
        assert closed.status == "ok", closed.error_text
        assert closed.stdout == "2\n"
        assert kernel.value("logged") == []
    finally:
        kernel.stop()


def test_a_kernel_shut_down_after_a_task_cell_leaves_its_scheduler_quiet():
    import logging

    import distributed

    logged: list[str] = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = lambda record: logged.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("distributed").addHandler(handler)
    try:
        # The scheduler in this process, its log in ``logged``; the worker in a process apart.
        with distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, dashboard_address=None
        ) as cluster:
            kernel = KernelSession()
            try:
                out = kernel.run(f"%load_ext taskcell\n%task_cluster {cluster.scheduler_address}")
                assert out.status == "ok", out.error_text
                out = kernel.run("%%task\ny = 1")
                assert out.status == "ok", out.error_text
            finally:
                kernel.client.stop_channels()
                kernel.manager.shutdown_kernel()  # as JupyterLab does: asked, not killed
            eventually(
                lambda: not cluster.scheduler.clients.keys() - {"fire-and-forget"},
                "the kernel's client to leave",
            )
    finally:
        logging.getLogger("distributed").removeHandler(handler)
    assert logged == []


def cell_keys(client) -> list[str]:
    """The keys of task cells the scheduler holds."""
    keys = client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.tasks))
    return [k for k in keys if isinstance(k, str) and k.startswith("cell-")]


def test_task_cells_let_earlier_results_go_a_second_on_or_before_other_code(dask_processes):
    import time

    import distributed

    from taskcell.runner.events import KEEP_SECONDS

    dask_processes.worker(name="w")
    dask_processes.wait_for_workers(1)
    kernel = connected_kernel(dask_processes.address)
    try:
        with distributed.Client(dask_processes.address) as client:
            for value in range(3):
                assert kernel.run(f"%%task\ny = {value}").status == "ok"
            assert cell_keys(client)  # held while task cells follow one another
            time.sleep(KEEP_SECONDS + 0.1)
            assert kernel.run("%%task\ny = 3").status == "ok"
            eventually(lambda: len(cell_keys(client)) == 1, "only the last cell's result held")
            assert kernel.run("z = y").status == "ok"
            eventually(lambda: cell_keys(client) == [], "no cell's result held")
        assert kernel.value("z") == 3
    finally:
        kernel.stop()


def _kill_worker_running_the_cell(kernel, workers, msg_id):
    """Wait for the cell to print its worker's name, then SIGKILL that worker process."""
    printed = kernel.read_until(
        lambda: kernel.printed(msg_id),
        "the cell to say where it runs",
        lambda out: any(f"on {name}" in out for name in workers),
    )
    name = next(name for name in workers if f"on {name}" in printed)
    workers[name].send_signal(signal.SIGKILL)
    return name


@pytest.mark.parametrize("retries", [0, 1], ids=["no-retries", "one-retry"])
def test_worker_killed_mid_task(dask_processes, retries, tmp_path):
    workers = {
        name: dask_processes.worker("--resources", "GPU=1", name=name) for name in ("w1", "w2")
    }
    starts = tmp_path / "starts"
    kernel = KernelSession()
    try:
        out = kernel.run(
            "%load_ext taskcell\nimport distributed\n"
            f"client = distributed.Client({dask_processes.address!r})\nclient.wait_for_workers(2)\n"
            "addresses = {w['name']: a for a, w in client.scheduler_info()['workers'].items()}\n"
            "outcome = 'unchanged'"
        )
        assert out.status == "ok", out.error_text
        msg_id = kernel.start(
            f"%%task --gpu 1 --retries {retries} --name killed\nimport os, time\n"
            "where = os.environ['TASKCELL_WORKER_NAME']\n"
            f"open({str(starts)!r}, 'a').write(where + '\\n')\n"
            "print('on', where, flush=True)\n"
            "time.sleep(8)\noutcome = 'ran on ' + where"
        )
        killed = _kill_worker_running_the_cell(kernel, workers, msg_id)
        out = kernel.wait(msg_id, timeout=90)
        survivor = ({"w1", "w2"} - {killed}).pop()
        if retries == 0:
            assert out.status == "error"
            assert out.of_type("error")[0]["content"]["ename"] == "ClusterError"
            assert "died while running this cell" in out.error_text
            assert "tcp://127.0.0.1" in out.error_text
            assert kernel.value("outcome") == "unchanged"
            kernel.run("tasks = %tasks")
            row = "tuple(tasks[tasks.cell == 'killed'][['worker', 'state']].iloc[0])"
            assert kernel.value(row) == (kernel.value(f"addresses[{killed!r}]"), "lost")
            # Dask gives a task whose worker died to another worker; taskcell never starts it.
            kernel.run("%%task --gpu 1\nimport os\nnext_on = os.environ['TASKCELL_WORKER_NAME']")
            assert kernel.value("next_on") == survivor
            assert starts.read_text() == f"{killed}\n"
        else:
            assert out.status == "ok", out.error_text
            assert kernel.value("outcome") == f"ran on {survivor}"
            assert starts.read_text() == f"{killed}\n{survivor}\n"
    finally:
        kernel.stop()


def test_task_help_is_the_option_manual(kernel):
    out = kernel.run("print(get_ipython().find_cell_magic('task').__doc__)")
    for option in ("--gpu", "--memory", "--shm", "--env", "--bg", "--retries", "--resources"):
        assert option in out.stdout
