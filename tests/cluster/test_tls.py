"""TLS end to end (issue 29): real TLS schedulers and workers on 127.0.0.1, with certificates
made in the test (``Security.temporary()``, written as PEM files for Dask's config and the
command lines). A chosen or configured ``tls://`` cluster is used with Dask's TLS config or a
``Security``; the embedded cluster speaks TLS when asked, and must where
``distributed.comm.require-encryption`` is set; a pool's local worker and ``taskcell worker``
join a TLS scheduler."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import dask.config
import psutil
import pytest
from conftest import KernelSession, free_port
from distributed import Client
from distributed.security import Security
from waiting import eventually

from taskcell.cluster import connect, launch
from taskcell.cluster.embedded import EmbeddedCluster, kept_security
from taskcell.cluster.pools import parse_pools
from taskcell.errors import ClusterError, SpecError

pytestmark = pytest.mark.slow

CLEAN = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}


@pytest.fixture(scope="module")
def pems(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A certificate, its key and its CA (itself), made for this module, as PEM files."""
    made = Security.temporary()
    folder = tmp_path_factory.mktemp("tls")
    texts = {"ca": made.tls_ca_file, "cert": made.tls_client_cert, "key": made.tls_client_key}
    paths = {}
    for name, text in texts.items():
        path = folder / f"{name}.pem"
        path.write_text(text)
        paths[name] = str(path)
    return paths


def tls_flags(pems: dict[str, str]) -> list[str]:
    return ["--tls-ca-file", pems["ca"], "--tls-cert", pems["cert"], "--tls-key", pems["key"]]


def tls_config(pems: dict[str, str]) -> dict[str, str]:
    """Dask's own TLS config for a client of the test's cluster."""
    return {
        "distributed.comm.tls.ca-file": pems["ca"],
        "distributed.comm.tls.client.cert": pems["cert"],
        "distributed.comm.tls.client.key": pems["key"],
    }


def stop(procs: list[subprocess.Popen]) -> None:
    """SIGINT (Dask closes at once), then SIGKILL for any still running."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    for proc in procs:
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def python_module(*argv: str) -> subprocess.Popen:
    """``python -m *argv``, quiet, without the test's DASK_ variables."""
    return subprocess.Popen(
        [sys.executable, "-m", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=CLEAN,
    )


@pytest.fixture(scope="module")
def tls_cluster(pems: dict[str, str]) -> Iterator[str]:
    """A ``dask scheduler`` on ``tls://127.0.0.1:PORT`` and one ``dask worker``, both with the
    test's certificates; its address."""
    port = free_port()
    address = f"tls://127.0.0.1:{port}"
    scheduler = ["--protocol", "tls", "--host", "127.0.0.1", "--port", str(port)]
    scheduler += ["--no-dashboard", *tls_flags(pems)]
    worker = [address, "--name", "tls-worker", "--nthreads", "1", "--host", "127.0.0.1"]
    worker += ["--no-dashboard", *tls_flags(pems)]
    procs = [
        python_module(
            "distributed.cli.dask_scheduler", *scheduler, "--no-dashboard", *tls_flags(pems)
        )
    ]
    try:
        procs.append(
            python_module(
                "distributed.cli.dask_worker", *worker, "--no-dashboard", *tls_flags(pems)
            )
        )
        with dask.config.set(tls_config(pems)), Client(address, timeout="60s") as client:
            client.wait_for_workers(1, timeout=90)
        yield address
    finally:
        stop(procs)


@pytest.fixture
def fresh_connect() -> Iterator[None]:
    """taskcell's cluster choice, closed after the test."""
    connect.close()
    try:
        yield
    finally:
        connect.close()


def names(client: Client) -> list[str]:
    return sorted(w.name for w in connect.live_workers(client, refresh=True))


# --- a cluster the user chose -------------------------------------------------------------------


def test_task_cluster_tls_uses_dasks_tls_config(tls_cluster, pems, fresh_connect):
    with dask.config.set(tls_config(pems)):
        client = connect.use_address(tls_cluster)
        assert names(client) == ["tls-worker"]
        assert client.submit(lambda: 6 * 7, pure=False).result(timeout=60) == 42


def test_task_cluster_tls_with_a_security_object_without_config(tls_cluster, pems, fresh_connect):
    with pytest.raises(
        ClusterError, match=rf"the scheduler at {tls_cluster} speaks TLS, and no certificate"
    ):
        connect.use_address(tls_cluster)  # no certificates: an error that changes nothing
    security = Security(
        require_encryption=True,
        tls_ca_file=pems["ca"],
        tls_client_cert=pems["cert"],
        tls_client_key=pems["key"],
    )
    client = connect.use_address(tls_cluster, security=security)
    assert names(client) == ["tls-worker"]
    client.close()  # a reconnection keeps the Security the address was chosen with
    assert connect.current_client().submit(len, "abc").result(timeout=60) == 3


def test_dask_scheduler_address_tls(tls_cluster, pems, fresh_connect):
    with dask.config.set({**tls_config(pems), "scheduler-address": tls_cluster}):
        client = connect.current_client()
        assert client.scheduler.address == tls_cluster
        assert names(client) == ["tls-worker"]


# --- the embedded cluster -----------------------------------------------------------------------


def tls_only(address: str, security: Security) -> None:
    """The cluster at ``address`` answers ``security``, and refuses a client without it."""
    with Client(address, security=security, set_as_default=False, timeout="60s") as client:
        assert client.submit(lambda: 1, pure=False).result(timeout=60) == 1
    from distributed.comm import connect as open_comm

    with pytest.raises((OSError, TypeError, TimeoutError)):  # TypeError: no TLS context
        asyncio.run(open_comm(address, timeout=5))


@pytest.mark.parametrize("n", [1, 2], ids=["one-worker", "two-workers"])
def test_embedded_cluster_with_tls_on(n):
    with dask.config.set(
        {"taskcell.embedded-cluster.n-workers": n, "taskcell.embedded-cluster.tls": True}
    ):
        cluster = connect.start_embedded()
    kept = None
    try:
        address = cluster.address()
        assert address.startswith("tls://127.0.0.1:")
        assert cluster.security is not None
        with Client(address, security=cluster.security, set_as_default=False) as client:
            client.wait_for_workers(n, timeout=60)
        tls_only(address, cluster.security)
        # The Jupyter server finds its credentials in a file only this user reads.
        from taskcell.cluster.embedded import _credentials_file

        kept = _credentials_file(address)
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
        found = kept_security(address)
        assert found is not None
        assert found.tls_ca_file == cluster.security.tls_ca_file
    finally:
        cluster.close()
    assert kept is not None
    assert not kept.exists()  # removed with the cluster
    assert kept_security(address) is None


def test_embedded_cluster_must_speak_tls_where_encryption_is_required(monkeypatch):
    monkeypatch.setenv("DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION", "True")
    cluster = EmbeddedCluster()  # its process reads its own config, as %load_ext starts it
    try:
        address = cluster.address()
        assert address.startswith("tls://")
        assert cluster.security is not None
        tls_only(address, cluster.security)
    finally:
        cluster.close()


def test_embedded_cluster_stays_plain_by_default():
    cluster = connect.start_embedded()
    try:
        assert cluster.address().startswith("tcp://")
        assert cluster.security is None
    finally:
        cluster.close()


def test_a_bad_tls_switch_names_the_option(monkeypatch):
    monkeypatch.setenv("DASK_TASKCELL__EMBEDDED_CLUSTER__TLS", "maybe")
    cluster = EmbeddedCluster()
    with pytest.raises(
        ClusterError,
        match=r"taskcell.embedded-cluster.tls \(DASK_TASKCELL__EMBEDDED_CLUSTER__TLS\) must be "
        r"true or false, got 'maybe'",
    ):
        cluster.address()
    cluster.close()
    with dask.config.set({"taskcell.embedded-cluster.tls": "maybe"}), pytest.raises(SpecError):
        connect.start_embedded()


def test_a_kernel_with_encryption_required_runs_task_cells_over_tls():
    kernel = KernelSession(env={**CLEAN, "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "True"})
    try:
        out = kernel.run("%load_ext taskcell")
        assert out.status == "ok", out.error_text
        assert "Error" not in out.stderr, out.stderr
        out = kernel.run("%%task --cpu 1\nanswer = 6 * 7", timeout=180)
        assert out.status == "ok", out.error_text
        assert kernel.value("answer") == 42
        client = "__import__('taskcell.cluster.connect').cluster.connect.existing_client()"
        assert kernel.value(f"{client}.scheduler.address").startswith("tls://127.0.0.1:")
        assert kernel.value(f"{client}.security.require_encryption") is True
        # Dask inside the cell: its process reaches the scheduler with its worker's credentials
        out = kernel.run(
            "%%task --cpu 1\nimport dask.array as da\ntotal = float(da.ones(10, chunks=5).sum()"
            ".compute())",
            timeout=180,
        )
        assert out.status == "ok", out.error_text
        assert kernel.value("total") == 10.0
        # ... which its own subprocesses, !env and %env do not see
        out = kernel.run("%%task --cpu 1\nimport os\nleft = sorted(os.environ)", timeout=180)
        assert out.status == "ok", out.error_text
        assert "TASKCELL_WORKER_TLS" not in kernel.value("left")
    finally:
        kernel.stop()


# --- workers taskcell starts for a TLS scheduler ------------------------------------------------


def run_local_worker(address: str, security: Security | None, name: str) -> dict[str, int]:
    """Start a local pool's worker for ``address``, wait until it joined, stop it; the
    ``--tls-*`` paths it was given, each with its permission bits while it ran."""
    (pool,) = parse_pools({"tls": {"shape": {"cpu": 1, "memory": "1Gi"}}})
    worker = launch.make_worker(pool, address, name, security)
    assert isinstance(worker, launch.LocalWorker)
    given = [worker.argv[worker.argv.index(flag) + 1] for flag in launch.TLS_FLAGS]

    async def start() -> None:
        await worker

    asyncio.run(start())
    try:
        with Client(address, security=security, set_as_default=False, timeout="60s") as client:

            def listed() -> list[str]:
                workers = client.scheduler_info(n_workers=-1)["workers"].values()
                return [w["name"] for w in workers]

            eventually(listed, f"the pool's worker {name} to join", holds=lambda n: name in n)
        return {path: stat.S_IMODE(os.stat(path).st_mode) for path in given}
    finally:
        asyncio.run(worker.close())


def test_a_local_pool_worker_joins_a_tls_scheduler_with_certificate_files(tls_cluster, pems):
    security = Security(
        require_encryption=True,
        tls_ca_file=pems["ca"],
        tls_client_cert=pems["cert"],
        tls_client_key=pems["key"],
    )
    given = run_local_worker(tls_cluster, security, "tls-pool-files")
    assert list(given) == [pems["ca"], pems["cert"], pems["key"]]  # its files, as they are
    assert all(Path(path).exists() for path in given)  # and they stay


def test_a_local_pool_worker_joins_a_tls_embedded_cluster_with_in_memory_certificates():
    with dask.config.set({"taskcell.embedded-cluster.tls": True}):
        cluster = connect.start_embedded()
    try:
        address = cluster.address()
        given = run_local_worker(address, cluster.security, "tls-pool-memory")
        assert set(given.values()) == {0o600}  # written for the worker, this user's alone
        folders = {Path(path).parent for path in given}
        assert len(folders) == 1
        assert not folders.pop().exists()  # removed with the worker
    finally:
        cluster.close()


def test_a_local_pool_workers_own_tls_arguments_win(pems):
    theirs = ["--tls-ca-file", "mine.pem", "--tls-cert", "mine.crt", "--tls-key", "k"]
    shape = {"cpu": 1, "memory": "1Gi"}
    (pool,) = parse_pools({"tls": {"shape": shape, "options": {"args": theirs}}})
    security = Security(tls_ca_file=pems["ca"], tls_client_cert=pems["cert"])
    worker = launch.make_worker(pool, "tls://127.0.0.1:1", "w", security)
    assert worker.argv.count("--tls-ca-file") == 1
    assert worker.argv[worker.argv.index("--tls-ca-file") + 1] == "mine.pem"
    plain = launch.make_worker(pool, "tcp://127.0.0.1:1", "w", security)
    assert plain.argv.count("--tls-cert") == 1  # theirs only: no certificates for plain TCP


def test_a_batch_pool_job_gets_the_certificates_in_its_shared_folder(tmp_path):
    made = Security.temporary()
    shared = tmp_path / "shared"
    shared.mkdir()
    options = {"shared_temp_directory": str(shared)}
    shape = {"cpu": 1, "memory": "1Gi"}
    (pool,) = parse_pools({"gpu": {"shape": shape, "backend": "slurm", "options": options}})
    job = launch.make_worker(pool, "tls://10.0.0.1:8786", "w", made)
    script = job.job_script()
    [folder] = shared.iterdir()
    for flag, name in zip(launch.TLS_FLAGS, ("ca-file", "cert", "key"), strict=True):
        assert f"{flag} {folder / name}.pem" in script
    assert (folder / "key.pem").read_text() == made.tls_client_key
    del job

    def gone() -> bool:
        gc.collect()
        return not folder.exists()

    eventually(gone, "the job's certificate files to go with its handle")


def test_taskcell_worker_joins_a_tls_scheduler(tls_cluster, pems, tmp_path):
    launcher = subprocess.Popen(
        [sys.executable, "-m", "taskcell.cluster.worker_cli", tls_cluster, "--nthreads", "1",
         "--scratch", str(tmp_path), "--name", "tls-box", "--", *tls_flags(pems)],
        env=CLEAN,
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "worker.log").open("wb"),
    )  # fmt: skip
    try:
        with dask.config.set(tls_config(pems)), Client(tls_cluster, timeout="60s") as client:

            def advertised() -> dict:
                workers = client.scheduler_info(n_workers=-1)["workers"].values()
                return {w["name"]: w["resources"] for w in workers}

            found = eventually(advertised, "tls-box to join", holds=lambda a: "tls-box" in a)
            assert found["tls-box"]["CPU"] >= 1
            future = client.submit(lambda: "ran", resources={"CPU": 1}, pure=False)
            assert future.result(timeout=60) == "ran"
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(timeout=60) == 0
        said = (tmp_path / "worker.log").read_text()
        assert "listen on 127.0.0.1" in said
        assert "over TLS" in said
    finally:
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(launcher.pid).children(recursive=True):
                child.kill()
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()


# --- the Jupyter server's watch (the sidebar's) -------------------------------------------------


def watched(address: str) -> dict:
    """The state of the server's watch of ``address`` once it lists a worker, or the first
    state that is neither connecting nor connected."""
    from taskcell.extension.snapshots import planner_feed
    from taskcell.extension.watch import ClusterWatch

    async def watch() -> dict:
        w = ClusterWatch(address, planner_feed, connect_timeout=60)
        w.start()
        try:
            state = w.state()
            while not (state["snapshot"] and state["snapshot"]["workers"]):
                if state["status"] not in ("connecting", "connected"):
                    return state
                state = await w.changed(state["version"], 60)
            return state
        finally:
            await w.close()

    return asyncio.run(asyncio.wait_for(watch(), 180))


def test_the_servers_watch_uses_dasks_tls_config(tls_cluster, pems):
    with dask.config.set(tls_config(pems)):
        state = watched(tls_cluster)
    assert state["status"] == "connected"
    assert [w["name"] for w in state["snapshot"]["workers"]] == ["tls-worker"]


def test_the_servers_watch_reaches_a_kernels_embedded_tls_cluster():
    with dask.config.set({"taskcell.embedded-cluster.tls": True}):
        cluster = connect.start_embedded()
    try:
        state = watched(cluster.address())  # with the credentials its process left this user
        assert state["status"] == "connected", state["message"]
        assert [w["name"] for w in state["snapshot"]["workers"]] == ["taskcell-0"]
    finally:
        cluster.close()


@pytest.mark.parametrize(
    ("value", "on"),
    [(True, True), (False, False), ("true", True), ("no", False), ("1", True), (0, False)],
)
def test_the_tls_switch_reads_as_dask_config_and_variables_give_it(value, on):
    from taskcell import config

    with dask.config.set({"taskcell.embedded-cluster.tls": value}):
        assert config.flag("embedded-cluster.tls") is on
