"""Local pools end to end: a ``%%task`` no live worker meets starts a pool's worker in a real
kernel, says so while it waits, runs there, and the worker retires when idle."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import DaskProcesses, KernelSession
from waiting import eventually

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster() -> Iterator[DaskProcesses]:
    """A scheduler with one small worker: no GPU, one thread."""
    processes = DaskProcesses()
    processes.worker(name="small")
    processes.wait_for_workers(1)
    try:
        yield processes
    finally:
        processes.stop()


@pytest.fixture(scope="module")
def session(cluster: DaskProcesses) -> Iterator[KernelSession]:
    kernel = KernelSession(env={"DASK_SCHEDULER_ADDRESS": cluster.address})
    try:
        out = kernel.run(
            "%load_ext taskcell\nimport dask\nfrom taskcell.cluster import connect, provision\n"
            "def pools():\n"
            "    return {p['name']: p for p in provision.pool_state(connect.current_client())}\n"
        )
        assert out.status == "ok", out.error_text
        yield kernel
    finally:
        kernel.run("provision.close_all()")  # a killed kernel's workers wait for the scheduler
        kernel.stop()


def configure(session: KernelSession, **pools: dict) -> None:
    """Set ``taskcell.pools`` in the kernel."""
    out = session.run(f"dask.config.set({{'taskcell.pools': {pools!r}}})")
    assert out.status == "ok", out.error_text


def statuses(out) -> list[str]:
    return [d["text/plain"] for d in out.displays if "text/plain" in d]


def logged_states(cluster: DaskProcesses) -> list[tuple[str, str]]:
    """The workers of the first pool the kernel logged, as the Jupyter server reads them."""
    from distributed import Client

    from taskcell.cluster.provision import published_pools

    with Client(cluster.address, timeout=30) as client:
        (pools,) = published_pools(client).values()  # one kernel
    return [(w["name"], w["state"]) for w in pools[0]["workers"]]


def worker_names(cluster: DaskProcesses) -> set[str]:
    from distributed import Client

    with Client(cluster.address, timeout=30) as client:
        return {str(w["name"]) for w in client.scheduler_info(n_workers=-1)["workers"].values()}


def shape(gpu: str) -> dict:
    """One thread, 1 GiB and two GPUs of a type no other test's pool has, so that a worker
    another test left running never meets this test's requests."""
    return {"cpu": 1, "memory": "1Gi", "gpu": f"{gpu}:2"}


def test_an_unmet_cell_starts_a_worker_of_a_pool_that_retires_when_idle(session, cluster):
    configure(session, a100x2={"shape": shape("A100"), "idle-timeout": "1s"})
    out = session.run(
        "%%task --gpu A100:1\nimport os\nwhere = os.environ['TASKCELL_WORKER_NAME']", timeout=120
    )
    assert out.status == "ok", out.error_text
    assert any(s.startswith("taskcell: starting a worker of pool a100x2") for s in statuses(out))
    where = session.value("where")
    assert where.startswith("a100x2-")
    session.eventual_value(
        "pools()['a100x2']['workers'][0]['state']", "retirement", lambda v: v == "retired"
    )
    assert where not in worker_names(cluster)
    assert session.value("pools()['a100x2']['launched']") == 1
    eventually(  # logged on the next look, after
        lambda: logged_states(cluster),
        "the retirement logged",
        holds=lambda logged: logged == [(where, "retired")],
    )
    again = session.run(
        "%%task --gpu A100:1\nimport os\nagain = os.environ['TASKCELL_WORKER_NAME']", timeout=120
    )
    assert again.status == "ok", again.error_text  # on a new worker, not the retired one
    assert session.value("again") not in (where, "small")
    assert session.value("pools()['a100x2']['launched']") == 2


def test_cells_waiting_together_share_the_worker_they_start(session):
    configure(
        session, shared={"shape": shape("L4"), "max-workers": 3, "idle-timeout": "10 minutes"}
    )
    for i in range(2):
        out = session.run(
            f"%%task --gpu L4:1 --bg\nimport os\nshared_{i} = os.environ['TASKCELL_WORKER_NAME']"
        )
        assert out.status == "ok", out.error_text
    session.eventual_value("'shared_0' in globals() and 'shared_1' in globals()", "both cells")
    assert session.value("shared_0") == session.value("shared_1")
    assert session.value("pools()['shared']['launched']") == 1


def test_a_pool_starts_no_more_than_max_workers(session):
    configure(session, whole={"shape": shape("T4"), "max-workers": 2, "idle-timeout": "10 minutes"})
    out = session.run(
        "from taskcell.tasks import Task\nfrom taskcell.spec import Resources\n"
        "def where():\n    import distributed\n    return distributed.get_worker().name\n"
        "task = Task(where, Resources(gpu='T4:2'))\n"
        "whole = [task() for _ in range(3)]\n"
        "ran_on = sorted({f.result(timeout=120) for f in whole})",
        timeout=180,
    )
    assert out.status == "ok", out.error_text
    ran_on = session.value("ran_on")
    assert all(name.startswith("whole-") for name in ran_on)
    assert session.value("pools()['whole']['launched']") == 2
    assert len(ran_on) <= 2


def test_a_request_no_pool_meets_fails_at_once_naming_each_pool(session):
    configure(
        session,
        cpu4={"shape": {"cpu": 4, "memory": "2Gi"}},
        a100x2={"shape": shape("A100")},
    )
    out = session.run("%%task --gpu H100:1\nx = 1")
    assert out.status == "error"
    assert "pool cpu4 (local): asks GPU=1, its workers have 0" in out.error_text
    assert "pool a100x2 (local): asks GPU-H100=1, its workers have 0" in out.error_text
    assert session.value("'x' in globals()") is False
    assert session.value("pools()['cpu4']['launched']") == 0


def test_a_worker_that_fails_to_start_fails_the_cell_naming_its_pool(session):
    configure(session, broken={"shape": shape("L40s"), "options": {"args": ["--no-such-flag"]}})
    out = session.run("%%task --gpu L40s:1\nbroken_ran = True", timeout=120)
    assert out.status == "error"
    assert "the worker of pool broken (pid " in out.error_text
    assert "failed to start: its process exited with status" in out.error_text
    assert "--no-such-flag" in out.error_text
    assert session.value("'broken_ran' in globals()") is False


def test_results_left_on_a_retiring_worker_move_to_another(session, cluster):
    configure(session, big={"shape": shape("V100"), "idle-timeout": "1s"})
    out = session.run("dask.config.set({'taskcell.result-threshold': '1KiB'})")
    assert out.status == "ok", out.error_text
    out = session.run("%%task --gpu V100:1\nblob = b'x' * 100_000", timeout=120)
    assert out.status == "ok", out.error_text
    assert session.value("type(blob).__name__") == "RemoteValue"
    session.eventual_value(
        "pools()['big']['workers'][0]['state']", "retirement", lambda v: v == "retired"
    )
    out = session.run("%%task\nsize = len(blob)")
    assert out.status == "ok", out.error_text
    assert session.value("size") == 100_000


def test_a_task_outside_a_cell_is_cancelled_with_the_reason_its_worker_failed(session):
    configure(session, broken2={"shape": shape("H200"), "options": {"args": ["--no-such-flag"]}})
    out = session.run(
        "from taskcell.tasks import Task\nfrom taskcell.spec import Resources\n"
        "future = Task(print, Resources(gpu='H200:1'))()\n"
        "try:\n    future.result(timeout=120)\nexcept Exception as e:\n    why = str(e)",
        timeout=180,
    )
    assert out.status == "ok", out.error_text
    assert "the worker of pool broken2 (pid " in session.value("why")
    assert "--no-such-flag" in session.value("why")


def gated_python(tmp_path: Path) -> tuple[Path, dict]:
    """A local pool's ``options`` whose workers start only once the returned gate file exists."""
    gate = tmp_path / "open"
    python = tmp_path / "gated-python"
    python.write_text(
        f'#!/bin/sh\nwhile [ ! -e {gate} ]; do sleep 0.05; done\nexec {sys.executable} "$@"\n'
    )
    python.chmod(0o755)
    return gate, {"python": str(python)}


def test_an_interrupt_while_the_worker_starts_stops_the_cell_and_the_worker_retires(
    session, tmp_path: Path
):
    gate, options = gated_python(tmp_path)
    configure(session, gated={"shape": shape("A10G"), "idle-timeout": "1s", "options": options})
    msg_id = session.start("%%task --gpu A10G:1\ngated = 'ran'")
    session.read_until(
        lambda: session.shown(msg_id),
        "the cell to say the worker starts",
        lambda shown: any(
            s.startswith("taskcell: starting a worker of pool gated (pid ") for s in shown
        ),
    )
    session.manager.interrupt_kernel()
    out = session.wait(msg_id)
    assert out.of_type("error")[0]["content"]["ename"] == "KeyboardInterrupt"
    assert session.value("'gated' in globals()") is False
    gate.touch()  # now the worker connects, finds nothing to run, and retires
    session.eventual_value(
        "pools()['gated']['workers'][0]['state']", "retirement", lambda v: v == "retired"
    )
    assert session.value("pools()['gated']['launched']") == 1


def spec_pool(gpus: int) -> dict:
    """A ``spec`` pool of ``distributed.Nanny`` workers advertising ``gpus`` H100s."""
    resources = {"CPU": 1, "MEMORY": 2**30, "GPU": gpus, "GPU-H100": gpus}
    options = {"nthreads": 1, "memory_limit": 2**30, "resources": resources}
    return {
        "shape": shape("H100"),
        "backend": "spec",
        "idle-timeout": "1s",
        "options": {"cls": "distributed.Nanny", "options": options},
    }


def test_a_spec_pool_starts_any_speccluster_worker_class(session):
    configure(session, nanny=spec_pool(2))
    out = session.run(
        "%%task --gpu H100:2\nimport os\nnanny = os.environ['TASKCELL_WORKER_NAME']", timeout=120
    )
    assert out.status == "ok", out.error_text
    assert any(s.startswith("taskcell: starting a worker of pool nanny") for s in statuses(out))
    assert session.value("nanny").startswith("nanny-")
    session.eventual_value(
        "pools()['nanny']['workers'][0]['state']", "retirement", lambda v: v == "retired"
    )


def test_a_worker_that_does_not_advertise_its_shape_fails_the_cell(session):
    configure(session, liar=spec_pool(1))
    out = session.run("%%task --gpu H100:2\nlied = True", timeout=120)
    assert out.status == "error"
    assert (
        "the worker of pool liar (Nanny) failed to start: it advertises GPU=1, GPU-H100=1, "
        "its pool's shape GPU=2, GPU-H100=2"
    ) in out.error_text
    assert session.value("'lied' in globals()") is False
    session.eventual_value(
        "pools()['liar']['workers'][0]['address'] not in "
        "connect.current_client().scheduler_info(n_workers=-1)['workers']",
        "its retirement",
    )


#: A panel in the kernel, and ``shown(pool)``: its snapshot's workers of ``pool``, as
#: ``(state, idle)`` pairs.
PANEL = (
    "import taskcell.widgets\np = taskcell.widgets.panel()\n"
    "def shown(name):\n"
    "    pools = [q for q in p.feed.snapshot()['pools'] if q['name'] == name]\n"
    "    return [(w['state'], w['idle_since'] is not None) for q in pools for w in q['workers']]\n"
)


def held(release: Path, gpu: str) -> str:
    """A ``--bg`` cell that asks for ``gpu`` and runs until ``release`` exists."""
    return (
        f"%%task --gpu {gpu} --bg --name held\nimport os, time\n"
        f"while not os.path.exists({str(release)!r}):\n    time.sleep(0.05)"
    )


def test_the_panel_shows_a_pools_worker_starting_then_running_then_retired(session, tmp_path):
    gate, options = gated_python(tmp_path)
    release = tmp_path / "release"
    configure(session, shown={"shape": shape("B200"), "idle-timeout": "1s", "options": options})
    for code in (PANEL, held(release, "B200:1")):
        out = session.run(code)
        assert out.status == "ok", out.error_text
    session.eventual_value(
        "shown('shown')", "a worker starting", lambda v: v == [("starting", False)]
    )
    session.eventual_value(
        "p.pools.value", "the panel drawing it starting", lambda v: ">starting for " in v
    )
    assert "shown · local" in session.value("p.pools.value")
    gate.touch()
    session.eventual_value(
        "shown('shown')", "its worker running the cell", lambda v: v == [("running", False)]
    )
    session.eventual_value(
        "p.pools.value", "the panel drawing it running", lambda v: ">running<" in v
    )
    release.touch()
    session.eventual_value(
        "shown('shown')", "its worker retired once idle", lambda v: v == [("retired", False)]
    )
    session.eventual_value(
        "p.pools.value", "the panel drawing it retired", lambda v: ">retired<" in v
    )
    session.run("p.close()")


def test_the_panel_tells_a_pools_worker_busy_from_idle(session, tmp_path):
    release = tmp_path / "release"
    configure(session, reused={"shape": shape("A2"), "idle-timeout": "10 minutes"})
    for code in (PANEL, "%%task --gpu A2:1\nfirst = 1"):
        out = session.run(code, timeout=120)
        assert out.status == "ok", out.error_text
    session.eventual_value("shown('reused')", "its worker idle", lambda v: v == [("running", True)])
    session.eventual_value("p.pools.value", "the panel drawing it idle", lambda v: ">idle " in v)
    # A cell the live worker meets claims nothing: the worker itself is seen busy.
    out = session.run(held(release, "A2:1"))
    assert out.status == "ok", out.error_text
    session.eventual_value(
        "shown('reused')", "its worker busy again", lambda v: v == [("running", False)]
    )
    session.eventual_value(
        "p.pools.value", "the panel drawing it running", lambda v: ">running<" in v
    )
    release.touch()
    session.eventual_value(
        "shown('reused')", "its worker idle again", lambda v: v == [("running", True)]
    )
    session.run("p.close()")


def test_pools_configured_before_the_kernel_connects_are_listed_before_any_cell_needs_one():
    pools = {"spare": {"shape": shape("H100"), "max-workers": 2}}
    scheduler = DaskProcesses()  # its own: the other tests read one kernel's pools from theirs
    kernel = KernelSession(
        env={"DASK_SCHEDULER_ADDRESS": scheduler.address, "DASK_TASKCELL__POOLS": repr(pools)}
    )
    try:
        out = kernel.run(
            "%load_ext taskcell\nfrom taskcell.planner.view import snapshot_view\n" + PANEL
        )
        assert out.status == "ok", out.error_text
        detail = (
            "[v['detail'] for v in snapshot_view(p.feed.snapshot(), 0)['pools'] "
            "if v['name'] == 'spare']"
        )
        kernel.eventual_value(
            detail, "it listed", lambda v: v == ["0 of 2 workers · 0 tasks waiting"]
        )
        kernel.eventual_value(
            "p.pools.value", "the panel drawing it", lambda v: "spare · local" in v
        )
        assert kernel.value("shown('spare')") == []
    finally:
        kernel.stop()
        scheduler.stop()


def test_pools_configured_wrong_do_not_stop_the_kernel_connecting(cluster):
    kernel = KernelSession()
    try:
        out = kernel.run(
            "%load_ext taskcell\nimport dask\n"
            # not a duration: reading the pool fails with AttributeError, not a SpecError
            "dask.config.set({'taskcell.pools': {'p': {'shape': 'small_task',\n"
            "                                          'idle-timeout': [1]}}})\n"
            f"%task_cluster {cluster.address}"
        )
        assert out.status == "ok", out.error_text
    finally:
        kernel.stop()
