"""Nothing taskcell starts listens beyond 127.0.0.1 unless the user asks for it.

Each test starts the real thing as a user would (a kernel running ``%%task`` on the embedded
cluster, a local pool's worker, ``taskcell worker``, the sidebar's cluster), lists the
listening TCP sockets of every process in the trees it started, and fails on any address that
is not loopback, naming the process and the address. Each first finds the workers' (and
nannies') own ports among those sockets, so that it cannot pass having seen nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import psutil
import pytest
from conftest import KernelSession
from waiting import PATIENCE, eventually

from taskcell.cluster import launch
from taskcell.cluster.pools import parse_pools

pytestmark = pytest.mark.slow

CLEAN = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
CLIENT = "__import__('taskcell.cluster.connect').cluster.connect.existing_client()"


# --- what listens -------------------------------------------------------------------------------


def tree(root: int) -> list[psutil.Process]:
    """The process ``root`` and all its descendants alive now."""
    try:
        process = psutil.Process(root)
        return [process, *process.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def describe(process: psutil.Process) -> str:
    """The process as a failure names it: its pid and the start of its command line."""
    try:
        command = " ".join(process.cmdline())
    except psutil.Error:
        return f"pid {process.pid}"
    return f"pid {process.pid} ({command[:120]}{'...' if len(command) > 120 else ''})"


def listening(roots: Iterable[int]) -> list[tuple[str, str, int]]:
    """(process, host, port) of every listening TCP socket in the trees of ``roots``."""
    found = []
    for root in roots:
        for process in tree(root):
            try:
                sockets = process.net_connections(kind="inet")
            except psutil.NoSuchProcess:
                continue
            for s in sockets:
                if s.status == psutil.CONN_LISTEN:
                    found.append((describe(process), s.laddr.ip, s.laddr.port))
    return found


def loopback(host: str) -> bool:
    """127.0.0.0/8 or ::1 (an IPv4-mapped loopback address too)."""
    address = ipaddress.ip_address(host.split("%")[0])
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


def port(address: str) -> int:
    """The port of a Dask address such as ``tcp://127.0.0.1:40123``."""
    return int(address.rsplit(":", 1)[1])


def assert_only_loopback(roots: Iterable[int], serving: Iterable[str], what: str) -> None:
    """Wait until the ports of ``serving`` (Dask addresses) listen in the trees of ``roots``,
    then fail on any listening socket there that is not loopback."""
    roots, wanted = list(roots), {port(a) for a in serving}
    assert wanted, f"{what}: no worker address to look for"
    found = eventually(
        lambda: listening(roots),
        f"{what}: the sockets of ports {sorted(wanted)}",
        holds=lambda found: wanted <= {p for _, _, p in found},
    )
    exposed = [f"{who} listens on {host}:{p}" for who, host, p in found if not loopback(host)]
    assert not exposed, f"{what} listens beyond loopback:\n" + "\n".join(exposed)


def end_all(processes: list[psutil.Process]) -> None:
    """Kill whichever of ``processes`` still run, and reap them."""
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(processes, timeout=30)


@pytest.fixture
def reaped() -> Iterator[list[psutil.Process]]:
    """Processes the test saw started; any still running at its end are killed."""
    seen: list[psutil.Process] = []
    try:
        yield seen
    finally:
        end_all(seen)


# --- the embedded cluster -----------------------------------------------------------------------


def worker_addresses(kernel: KernelSession, n: int) -> list[str]:
    """The addresses of the kernel's cluster's workers and their nannies, once ``n`` workers
    have joined (the processes of several connect on their own)."""
    code = f"{CLIENT}.scheduler_info(n_workers=-1)['workers']"
    workers = kernel.eventual_value(
        f"{{at: w.get('nanny') for at, w in {code}.items()}}",
        f"{n} workers in the embedded cluster",
        holds=lambda workers: len(workers) >= n,
    )
    return [a for at, nanny in workers.items() for a in (at, nanny) if a]


@pytest.mark.parametrize("n_workers", [1, 2], ids=["in-process-worker", "worker-processes"])
def test_the_embedded_cluster_listens_on_loopback_only(n_workers, reaped):
    env = CLEAN | {"DASK_TASKCELL__EMBEDDED_CLUSTER__N_WORKERS": str(n_workers)}
    kernel = KernelSession(env=env)
    kernel_pid = kernel.manager.provisioner.process.pid
    try:
        out = kernel.run("%load_ext taskcell")
        assert out.status == "ok", out.error_text
        out = kernel.run("%%task\nx = 1")
        assert out.status == "ok", out.error_text
        serving = [
            *worker_addresses(kernel, n_workers),
            kernel.value(f"{CLIENT}.scheduler.address"),
        ]
        assert_only_loopback([kernel_pid], serving, "the embedded cluster")
    finally:
        reaped.extend(tree(kernel_pid)[1:])
        kernel.stop()


# --- a local pool's worker ----------------------------------------------------------------------


def test_a_local_pool_worker_and_its_nanny_listen_on_loopback_only(dask_processes, reaped):
    from distributed import Client

    (pool,) = parse_pools({"cpu1": {"shape": {"cpu": 1, "memory": "1Gi"}, "backend": "local"}})
    worker = launch.make_worker(pool, dask_processes.address, "cpu1-0")
    assert isinstance(worker, launch.LocalWorker)
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(worker.start())
        assert worker.proc is not None
        dask_processes.wait_for_workers(1)
        with Client(dask_processes.address, timeout=60) as client:
            ((at, info),) = client.scheduler_info(n_workers=-1)["workers"].items()
        serving = [at, info["nanny"]]
        assert_only_loopback([worker.proc.pid], serving, "a local pool's worker")
    finally:
        if worker.proc is not None:
            reaped.extend(tree(worker.proc.pid))
        loop.run_until_complete(worker.close())
        loop.close()


# --- taskcell worker ----------------------------------------------------------------------------


def taskcell_command() -> str:
    """The ``taskcell`` script installed beside this interpreter."""
    script = Path(sys.executable).with_name("taskcell")
    assert script.exists(), f"the taskcell command is not installed beside {sys.executable}"
    return str(script)


def test_taskcell_worker_listens_where_its_scheduler_is_and_says_so(
    dask_processes, reaped, tmp_path
):
    from distributed import Client

    log = tmp_path / "worker.log"
    with log.open("wb") as err:
        launcher = subprocess.Popen(
            [taskcell_command(), "worker", dask_processes.address, "--nthreads", "1"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        dask_processes.wait_for_workers(1)
        with Client(dask_processes.address, timeout=60) as client:
            ((at, info),) = client.scheduler_info(n_workers=-1)["workers"].items()
        serving = [at, info["nanny"]]
        assert_only_loopback([launcher.pid], serving, "taskcell worker")
        said = log.read_text()
        assert "listen on 127.0.0.1" in said, said
        assert "; plain TCP, without TLS" in said, said
    finally:
        reaped.extend(tree(launcher.pid))
        launcher.send_signal(signal.SIGTERM)
        try:
            launcher.wait(timeout=60)
        except subprocess.TimeoutExpired:
            launcher.kill()
            launcher.wait()


# --- the sidebar's cluster ----------------------------------------------------------------------


def test_a_cluster_the_sidebar_starts_listens_on_loopback_only(reaped):
    from distributed import Client

    from taskcell.extension.control import ServerClusters

    clusters = ServerClusters()
    loop = asyncio.new_event_loop()
    pids: list[int] = []
    try:
        address = loop.run_until_complete(clusters.start(1))
        cluster = clusters._clusters[address]
        pids += [cluster.scheduler.process.pid]
        pids += [w.process.pid for w in cluster.workers.values()]
        with Client(address, timeout=60) as client:
            client.wait_for_workers(1, timeout=PATIENCE)
            ((at, info),) = client.scheduler_info(n_workers=-1)["workers"].items()
        serving = [address, at, info["nanny"]]
        assert_only_loopback(pids, serving, "the sidebar's cluster")
    finally:
        reaped.extend(p for pid in pids for p in tree(pid))
        loop.run_until_complete(clusters.close())
        loop.close()
