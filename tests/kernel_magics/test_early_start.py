"""With no cluster configured, ``%load_ext taskcell`` starts the embedded cluster in the
background, so the first ``%%task`` finds it up (issue 21); never where the user has a cluster.

Real kernels and real scheduler and worker processes. Each test waits for what it needs to see:
the cluster up, or the thread that decides whether to start it gone.
"""

from __future__ import annotations

import os

import pytest
from conftest import KernelSession
from test_faults import embedded_clusters
from waiting import eventually

pytestmark = pytest.mark.slow

CLEAN = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
ONE_WORKER = {"DASK_TASKCELL__EMBEDDED_CLUSTER__N_WORKERS": "1"}
DECIDED = "not any(t.name == 'taskcell-early' for t in __import__('threading').enumerate())"
UP = "__import__('taskcell.cluster.connect').cluster.connect.existing_client() is not None"


def loaded(env: dict[str, str], code: str = "") -> KernelSession:
    kernel = KernelSession(env=env)
    out = kernel.run("%load_ext taskcell\n" + code)
    assert out.status == "ok", out.error_text
    return kernel


def test_the_first_cell_finds_the_cluster_started_on_load():
    kernel = loaded(CLEAN | ONE_WORKER)
    try:
        eventually(lambda: kernel.value(UP), "the embedded cluster to be up")
        [cluster] = embedded_clusters(kernel)
        out = kernel.run("%%task\nimport os\nwhere = os.environ['TASKCELL_WORKER_NAME']")
        assert out.status == "ok", out.error_text
        assert kernel.value("where") == "taskcell-0"
        shown = "\n".join(str(d.get("text/plain")) for d in out.displays)
        assert "waiting for the embedded cluster" not in shown
        assert embedded_clusters(kernel) == [cluster]
    finally:
        kernel.stop()


def test_the_start_can_be_left_to_the_first_cell():
    kernel = loaded(CLEAN | ONE_WORKER | {"DASK_TASKCELL__EMBEDDED_CLUSTER__START_EARLY": "False"})
    try:
        eventually(lambda: kernel.value(DECIDED), "the extension to decide")
        assert embedded_clusters(kernel) == []
        assert kernel.run("%%task\nx = 1").status == "ok"
        assert len(embedded_clusters(kernel)) == 1
    finally:
        kernel.stop()


@pytest.mark.parametrize(
    "how",
    ["environment", "yaml", "task_cluster", "client"],
    ids=["DASK_SCHEDULER_ADDRESS", "scheduler-address-in-yaml", "%task_cluster", "Client"],
)
def test_no_cluster_starts_where_the_user_has_one(dask_processes, how, tmp_path):
    dask_processes.worker(name="theirs")
    dask_processes.wait_for_workers(1)
    address = dask_processes.address
    (tmp_path / "dask.yaml").write_text(f"scheduler-address: {address}\n")
    env = CLEAN | {
        "environment": {"DASK_SCHEDULER_ADDRESS": address},
        "yaml": {"DASK_CONFIG": str(tmp_path)},
    }.get(how, {})
    code = {
        "task_cluster": f"%task_cluster {address}",
        "client": f"import distributed\nclient = distributed.Client({address!r})",
    }.get(how, "")
    kernel = loaded(env, code)
    try:
        eventually(lambda: kernel.value(DECIDED), "the extension to decide")
        out = kernel.run("%%task\nimport os\nwhere = os.environ['TASKCELL_WORKER_NAME']")
        assert out.status == "ok", out.error_text
        assert kernel.value("where") == "theirs"
        assert embedded_clusters(kernel) == []
    finally:
        kernel.stop()


@pytest.mark.parametrize("how", ["task_cluster", "client"], ids=["%task_cluster", "Client"])
def test_a_cluster_started_on_load_stops_when_the_user_picks_another(dask_processes, how):
    dask_processes.worker(name="theirs")
    dask_processes.wait_for_workers(1)
    kernel = loaded(CLEAN | ONE_WORKER)
    try:
        eventually(lambda: kernel.value(UP), "the embedded cluster to be up")
        [cluster] = embedded_clusters(kernel)
        address = dask_processes.address
        picked = kernel.run(
            f"%task_cluster {address}"
            if how == "task_cluster"
            else f"import distributed\nclient = distributed.Client({address!r})"
        )
        assert picked.status == "ok", picked.error_text
        eventually(lambda: not cluster.is_running(), "the unused embedded cluster to stop")
        out = kernel.run("%%task\nimport os\nwhere = os.environ['TASKCELL_WORKER_NAME']")
        assert out.status == "ok", out.error_text
        assert kernel.value("where") == "theirs"
        assert embedded_clusters(kernel) == []
    finally:
        kernel.stop()
