"""The embedded cluster's process: one worker beside its scheduler, or a process per worker,
all ended with it; started without a spec, it reads its own config (issue 21); it scales and
stops through its scheduler, as the sidebar asks it to (issue 22)."""

from __future__ import annotations

import urllib.error
import urllib.request

import dask.config
import psutil
import pytest
from distributed import Client
from waiting import eventually

from taskcell.cluster.embedded import EmbeddedCluster, worker_specs
from taskcell.errors import ClusterError

pytestmark = pytest.mark.slow


def worker_processes(cluster: EmbeddedCluster) -> list[psutil.Process]:
    children = psutil.Process(cluster.proc.pid).children(recursive=True)
    return [p for p in children if "taskcell.cluster.embedded_worker" in " ".join(p.cmdline())]


def client_port(address: str) -> int:
    """The port of the scheduler's dashboard."""
    with Client(address, set_as_default=False) as client:
        return int(client.scheduler_info()["services"]["dashboard"])


def dashboard_status(port: int) -> int:
    """The HTTP status of the dashboard's status page (404 until it is added, once the cluster
    is up)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as page:
            return page.status
    except urllib.error.HTTPError as e:
        assert e.code == 404, e
        return e.code


@pytest.mark.parametrize("n", [1, 2], ids=["one-worker", "two-workers"])
def test_workers_share_the_machine_and_end_with_the_cluster(n: int) -> None:
    with dask.config.set({"taskcell.embedded-cluster.n-workers": n}):
        specs = worker_specs()
    cluster = EmbeddedCluster(specs)
    try:
        with Client(cluster.address(), set_as_default=False) as client:
            client.wait_for_workers(n, timeout=60)
            workers = client.scheduler_info()["workers"].values()
            advertised = {w["name"]: w["resources"] for w in workers}
        assert advertised == {name: spec["resources"] for name, spec in specs.items()}
        assert cluster.n_workers == n
        # One worker runs in the cluster's own process; several get a process each.
        processes = worker_processes(cluster)
        assert len(processes) == (0 if n == 1 else n)
        port = client_port(cluster.address())
        eventually(lambda: dashboard_status(port), "the dashboard", holds=lambda s: s == 200)
    finally:
        cluster.close()
    assert not cluster.alive()
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in processes)


def test_started_without_a_spec_it_declines_where_a_scheduler_is_configured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://127.0.0.1:1")
    cluster = EmbeddedCluster()
    with pytest.raises(ClusterError, match=r"did not start \(Dask's scheduler-address is tcp://"):
        cluster.address()
    cluster.close()


def test_started_without_a_spec_it_reads_its_own_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DASK_TASKCELL__EMBEDDED_CLUSTER__THREADS_PER_WORKER", "1")
    cluster = EmbeddedCluster()
    try:
        with Client(cluster.address(), set_as_default=False) as client:
            client.wait_for_workers(1, timeout=60)
            [worker] = client.scheduler_info()["workers"].values()
        assert (worker["name"], worker["nthreads"]) == ("taskcell-0", 1)
    finally:
        cluster.close()


async def call(address: str, op: str, **kwargs: object) -> dict:
    """One of the embedded cluster's scheduler handlers, as the Jupyter server calls it."""
    from distributed.core import rpc

    async with rpc(address) as scheduler:
        return await getattr(scheduler, op)(**kwargs)


def worker_names(address: str) -> list[str]:
    with Client(address, set_as_default=False) as client:
        return sorted(w["name"] for w in client.scheduler_info(n_workers=-1)["workers"].values())


def wait_for_names(address: str, names: list[str]) -> None:
    eventually(lambda: worker_names(address), f"workers {names}", holds=lambda now: now == names)


def test_it_scales_and_stops_through_its_scheduler() -> None:
    import asyncio

    from taskcell.cluster.embedded_control import SCALE, STOP

    with dask.config.set({"taskcell.embedded-cluster.threads-per-worker": 1}):
        specs = worker_specs()
    cluster = EmbeddedCluster(specs)
    try:
        address = cluster.address()
        wait_for_names(address, ["taskcell-0"])
        assert asyncio.run(call(address, SCALE, n=3)) == {"workers": 3}
        wait_for_names(address, ["taskcell-0", "taskcell-1", "taskcell-2"])
        # New workers are like the first, each a process of its own.
        with Client(address, set_as_default=False) as client:
            advertised = {
                w["name"]: w["resources"]
                for w in client.scheduler_info(n_workers=-1)["workers"].values()
            }
        assert advertised == dict.fromkeys(advertised, specs["taskcell-0"]["resources"])
        processes = worker_processes(cluster)
        assert len(processes) == 2

        assert asyncio.run(call(address, SCALE, n=1)) == {"workers": 1}
        wait_for_names(address, ["taskcell-0"])  # the newest retire first
        _, alive = psutil.wait_procs(processes, timeout=60)
        assert alive == []  # their processes end, and none is started again
        assert asyncio.run(call(address, SCALE, n=1)) == {"workers": 1}  # a round trip after
        assert worker_processes(cluster) == []
        assert worker_names(address) == ["taskcell-0"]

        for bad in (-1, 65, 1.5, True, "2"):
            reply = asyncio.run(call(address, SCALE, n=bad))
            assert reply == {
                "error": f"the embedded cluster has 0 to 64 workers, not {bad!r}: give n as "
                "a whole number"
            }
        assert worker_names(address) == ["taskcell-0"]

        assert asyncio.run(call(address, STOP)) == {}
        assert cluster.proc.wait(timeout=60) == 0  # the cluster and its process end
    finally:
        cluster.close()
