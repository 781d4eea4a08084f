"""A request no worker can meet names the workers that left since the kernel saw them: real
scheduler and worker processes."""

from __future__ import annotations

import pytest
from waiting import eventually

from taskcell.cluster.connect import live_workers
from taskcell.cluster.submit import plan
from taskcell.errors import InfeasibleError
from taskcell.spec import Resources


@pytest.fixture
def client(dask_processes):
    from distributed import Client

    with Client(dask_processes.address, timeout=60) as c:
        yield c


def test_a_refusal_names_the_worker_that_left(dask_processes, client):
    gpu_proc = dask_processes.worker("--no-nanny", "--resources", "GPU=1", name="gpu-box")
    dask_processes.worker(name="plain")
    dask_processes.wait_for_workers(2)
    gpu = next(w for w in live_workers(client, refresh=True) if w.name == "gpu-box")
    assert plan(Resources(gpu=1), client).workers[0].address == gpu.address
    gpu_proc.kill()
    gpu_proc.wait()
    eventually(
        lambda: all(w.name != "gpu-box" for w in live_workers(client, refresh=True)),
        "the scheduler to see the GPU worker gone",
    )
    with pytest.raises(InfeasibleError) as refused:
        plan(Resources(gpu=1), client)
    assert f"have left: {gpu.address}" in str(refused.value)
    assert "start it again" in str(refused.value)


def test_a_refusal_with_no_worker_gone_says_nothing_of_leaving(dask_processes, client):
    dask_processes.worker(name="plain")
    dask_processes.wait_for_workers(1)
    with pytest.raises(InfeasibleError) as refused:
        plan(Resources(gpu=1), client)
    assert "left" not in str(refused.value)
