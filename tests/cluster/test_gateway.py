"""Dask Gateway (issues 28, 29): a real ``dask-gateway-server`` with its local backend on
127.0.0.1, started here. A notebook that makes a cluster with ``dask_gateway`` runs ``%%task``
cells on it, their requests checked against its workers; the panel shows its workers, and the
Jupyter server's watch (the sidebar's) reaches it with the cluster's own credentials, asked of
the gateway that Dask's ``gateway.*`` config names. A ``gateway`` pool scales the notebook's
cluster up by one for a cell no live worker meets, and down again once the worker idles."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import dask.config
import psutil
import pytest
from conftest import KernelSession, free_port
from waiting import eventually

pytestmark = pytest.mark.slow

pytest.importorskip("dask_gateway_server")

CONFIG = """\
import sys
c.DaskGateway.address = "127.0.0.1:{api}"
c.Proxy.address = "127.0.0.1:{proxy}"
c.DaskGateway.backend_class = "dask_gateway_server.backends.local.UnsafeLocalBackend"
c.LocalClusterConfig.scheduler_cmd = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
c.LocalClusterConfig.worker_cmd = [sys.executable, "-m", "distributed.cli.dask_worker"]
c.LocalClusterConfig.worker_cores = 1
c.LocalClusterConfig.worker_memory = "1 G"
c.LocalClusterConfig.clusters_directory = {clusters!r}
# As a Hub's gateway may offer it: a cluster option that sets its processes' environment.
from dask_gateway_server.options import Mapping, Options
c.Backend.cluster_options = Options(
    Mapping("environment", {{}}), handler=lambda options: {{"environment": options.environment}}
)
"""


def healthy(address: str) -> bool:
    try:
        with urllib.request.urlopen(f"{address}/api/health", timeout=5) as page:
            return json.load(page).get("status") == "pass"
    except (OSError, ValueError, urllib.error.URLError):
        return False


def end_tree(proc: subprocess.Popen) -> None:
    """Stop the gateway (it stops its clusters), then kill whatever of its tree is left."""
    try:
        tree = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        tree = []
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for child in tree:
        if child.is_running():
            child.kill()
    psutil.wait_procs(tree, timeout=30)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A dask-gateway-server on 127.0.0.1 running each cluster as processes of this machine;
    its public address."""
    folder = tmp_path_factory.mktemp("gateway")
    api, proxy = free_port(), free_port()
    config = folder / "gateway_config.py"
    config.write_text(CONFIG.format(api=api, proxy=proxy, clusters=str(folder / "clusters")))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    log = (folder / "gateway.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "dask_gateway_server", "-f", str(config)],
        cwd=folder,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    address = f"http://127.0.0.1:{proxy}"
    try:
        eventually(lambda: proc.poll() is not None or healthy(address), "the gateway to serve")
        assert proc.poll() is None, Path(log.name).read_text()
        yield address
    finally:
        end_tree(proc)
        log.close()


@pytest.fixture(scope="module")
def notebook(gateway: str) -> Iterator[KernelSession]:
    """A kernel with taskcell loaded whose notebook made a Gateway cluster of one worker."""
    kernel = KernelSession(env={"DASK_TASKCELL__EMBEDDED_CLUSTER__START_EARLY": "False"})
    try:
        out = kernel.run("%load_ext taskcell")
        assert out.status == "ok", out.error_text
        out = kernel.run(
            "from dask_gateway import Gateway\n"
            f"gateway = Gateway({gateway!r})\n"
            "cluster = gateway.new_cluster()\n"
            "cluster.scale(1)\n"
            "client = cluster.get_client()\n"
            "client.wait_for_workers(1, timeout=180)\n",
            timeout=300,
        )
        assert out.status == "ok", out.error_text
        yield kernel
    finally:
        kernel.run("cluster.shutdown()", timeout=120)
        kernel.stop()


CLIENT = "__import__('taskcell.cluster.connect').cluster.connect.existing_client()"


def test_task_cells_run_on_the_notebooks_gateway_cluster(notebook):
    out = notebook.run("%%task --cpu 1 --memory 256Mi\nanswer = 6 * 7", timeout=180)
    assert out.status == "ok", out.error_text
    assert notebook.value("answer") == 42
    assert notebook.value(f"{CLIENT}.scheduler.address").startswith("gateway://127.0.0.1:")
    assert notebook.value(f"{CLIENT} is client")  # the notebook's own Client, as it is


def test_a_request_its_workers_cannot_meet_fails_at_once(notebook):
    out = notebook.run("%%task --cpu 4\nnever = 1", timeout=120)
    assert out.status == "error"
    assert "InfeasibleError" in out.error_text, out.error_text
    assert "asks threads=4; the most any worker has is 1" in out.error_text
    assert notebook.value("'never' in dir()") is False


def test_the_panel_shows_the_gateway_workers(notebook):
    code = "import taskcell\npanel = taskcell.panel()\n"
    out = notebook.run(code + "worker = client.scheduler_info()['workers'].popitem()[1]['name']")
    assert out.status == "ok", out.error_text
    name = notebook.value("worker")
    notebook.eventual_value("panel.workers.value", f"the panel to list {name}", lambda v: name in v)
    rows = notebook.value("sorted(set(taskcell.occupancy()['name']))")
    assert rows == [name]
    notebook.run("panel.close()")


def test_the_servers_watch_reaches_it_with_the_gateways_credentials(notebook, gateway):
    from taskcell.extension.snapshots import planner_feed
    from taskcell.extension.watch import ClusterWatch

    address = notebook.value(f"{CLIENT}.scheduler.address")
    name = notebook.value("client.scheduler_info()['workers'].popitem()[1]['name']")

    async def watch() -> dict:
        w = ClusterWatch(address, planner_feed, connect_timeout=60)
        w.start()
        try:
            state = w.state()
            while not (state["snapshot"] and state["snapshot"]["workers"]):
                assert state["status"] in ("connecting", "connected"), state["message"]
                state = await w.changed(state["version"], 60)
            return state
        finally:
            await w.close()

    with dask.config.set({"gateway.address": gateway}):
        state = asyncio.run(asyncio.wait_for(watch(), 180))
    assert state["status"] == "connected"
    assert [w["name"] for w in state["snapshot"]["workers"]] == [name]


#: A gateway pool of the cluster's own workers: one core and 1 GiB (the gateway's
#: worker_cores and worker_memory), retiring after a second of idleness.
POOL = {"shape": {"cpu": 1, "memory": "1Gi"}, "backend": "gateway", "idle-timeout": "1s"}


@contextlib.contextmanager
def pool_kernel(gateway: str, advertise: bool) -> Iterator[KernelSession]:
    """A kernel with taskcell loaded and the gateway pool ``gw`` configured, connected to a
    Gateway cluster of no workers, whose workers advertise the pool's shape if ``advertise``."""
    kernel = KernelSession(env={"DASK_TASKCELL__EMBEDDED_CLUSTER__START_EARLY": "False"})
    pools = {"gw": {**POOL, "options": {"address": gateway}}}
    environment = "launch.gateway_environment(pool)" if advertise else "{}"
    try:
        out = kernel.run(
            "%load_ext taskcell\n"
            "import dask\n"
            "from dask_gateway import Gateway\n"
            "from taskcell.cluster import connect, launch, provision\n"
            "from taskcell.cluster.pools import configured_pools\n"
            f"dask.config.set({{'taskcell.pools': {pools!r}}})\n"
            "(pool,) = configured_pools()\n"
            f"gateway = Gateway({gateway!r})\n"
            f"cluster = gateway.new_cluster(environment={environment})\n"
            "client = cluster.get_client()\n"
            "def pools():\n"
            "    return {p['name']: p for p in provision.pool_state(connect.current_client())}\n"
            "def count():\n"
            "    return client.run_on_scheduler(\n"
            "        lambda dask_scheduler: dask_scheduler.services['gateway'].count\n"
            "    )\n",
            timeout=300,
        )
        assert out.status == "ok", out.error_text
        yield kernel
    finally:
        kernel.run("provision.close_all()", timeout=120)
        kernel.run("cluster.shutdown()", timeout=120)
        kernel.stop()


def scaled_back(kernel: KernelSession) -> None:
    """Wait until the cluster is scaled to no workers and its scheduler lists none."""
    kernel.eventual_value("count()", "the cluster scaled back down", lambda v: v == 0)
    kernel.eventual_value(
        "sorted(w['name'] for w in client.scheduler_info(n_workers=-1)['workers'].values())",
        "the worker to leave the scheduler",
        lambda v: v == [],
    )


def decisions(kernel: KernelSession) -> list[tuple[str, str | None, str]]:
    """The kernel's decisions about its pools' workers: (action, worker, why)."""
    return kernel.value(
        "[(d.action, d.worker, d.why) for d in provision.decisions(connect.current_client())]"
    )


def test_a_gateway_pool_scales_the_cluster_for_an_unmet_cell_and_back_when_idle(gateway):
    with pool_kernel(gateway, advertise=True) as kernel:
        assert kernel.value("len(client.scheduler_info(n_workers=-1)['workers'])") == 0
        out = kernel.run(
            "%%task --cpu 1\n"
            "import os\n"
            "where = os.environ['TASKCELL_WORKER_NAME']\n"
            "advertised = os.environ['DASK_DISTRIBUTED__WORKER__RESOURCES']  # its worker's\n",
            timeout=300,
        )
        assert out.status == "ok", out.error_text
        shown = [d["text/plain"] for d in out.displays if "text/plain" in d]
        starting = "taskcell: starting a worker of pool gw (Gateway cluster "
        assert any(s.startswith(starting) for s in shown), shown
        kernel.eventual_value(
            "pools()['gw']['workers'][0]['state']", "its retirement", lambda v: v == "retired"
        )
        where = kernel.value("where")
        (worker,) = kernel.value("pools()['gw']['workers']")
        cluster = kernel.value("cluster.name")
        assert worker["started"] == f"Gateway cluster {cluster}, worker {where}"
        assert ast.literal_eval(kernel.value("advertised")) == {"CPU": 1, "MEMORY": 2**30}
        assert kernel.value("pools()['gw']['launched']") == 1
        assert [d for d in decisions(kernel) if d[0] != "start"] == [
            ("connect", worker["name"], f"connected as {worker['address']}"),
            ("retire", worker["name"], "idle for 1 s (idle-timeout)"),
        ]
        scaled_back(kernel)


def test_a_gateway_worker_without_the_pools_shape_fails_the_cell_and_is_given_back(gateway):
    with pool_kernel(gateway, advertise=False) as kernel:
        out = kernel.run("%%task --cpu 1\nnever = 1", timeout=300)
        assert out.status == "error"
        assert "ClusterError: the worker of pool gw (Gateway cluster " in out.error_text
        lacks = "it advertises CPU=0, MEMORY=0 B, its pool's shape CPU=1, MEMORY=1 GiB"
        assert f"failed to start: {lacks}" in out.error_text
        assert kernel.value("'never' in dir()") is False
        scaled_back(kernel)
