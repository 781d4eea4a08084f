"""Seed 003's example end to end through the decorator API, on real worker processes."""

from __future__ import annotations

import time

import pytest
from conftest import most_at_once
from distributed import Client, get_worker

from taskcell import Resources, task
from taskcell.errors import InfeasibleError

pytestmark = pytest.mark.slow


@task
def load(fn):
    return fn


@task(resources=Resources(gpu=1))
def process(data):
    started = time.time()
    time.sleep(0.3)
    return {"worker": get_worker().name, "start": started, "end": time.time(), "data": data}


@task(resources=Resources(memory=70e9))
def aggregate(processed):
    return {"worker": get_worker().name, "count": len(processed)}


def run_seed_computation(address, n_files=12):
    with Client(address) as client:
        client.wait_for_workers(3, timeout=60)
        data = [load(f"file-{i}.csv") for i in range(n_files)]
        processed = [process(d) for d in data]
        final = aggregate(processed).result(timeout=120)
        return final, client.gather(processed)


def test_seed_scenario_places_gpu_and_memory_tasks(dask_processes):
    dask_processes.worker("--nthreads", "4", "--resources", "GPU=2", name="gpu-a")
    dask_processes.worker("--nthreads", "4", "--resources", "GPU=2", name="gpu-b")
    dask_processes.worker("--nthreads", "2", "--resources", "MEMORY=100e9", name="mem")
    final, processed = run_seed_computation(dask_processes.address)
    assert final == {"worker": "mem", "count": 12}
    assert {p["worker"] for p in processed} <= {"gpu-a", "gpu-b"}
    for name in ("gpu-a", "gpu-b"):
        intervals = [(p["start"], p["end"]) for p in processed if p["worker"] == name]
        assert most_at_once(intervals) <= 2


def test_worker_configured_through_environment_variable(dask_processes):
    env = {"DASK_DISTRIBUTED__WORKER__RESOURCES__GPU": "2"}
    dask_processes.worker("--nthreads", "4", env=env, name="gpu-env")
    dask_processes.worker("--nthreads", "2", name="plain")
    dask_processes.worker("--nthreads", "2", "--resources", "MEMORY=100e9", name="mem")
    final, processed = run_seed_computation(dask_processes.address, n_files=6)
    assert final["worker"] == "mem"
    assert {p["worker"] for p in processed} == {"gpu-env"}
    intervals = [(p["start"], p["end"]) for p in processed]
    assert most_at_once(intervals) <= 2


def test_infeasible_request_is_refused_before_anything_is_submitted(dask_processes):
    dask_processes.worker("--resources", "GPU=1", name="one-gpu")
    with Client(dask_processes.address) as client:
        client.wait_for_workers(1, timeout=60)
        two_a100 = task(resources=Resources(gpu="A100:2"))(lambda: None)
        with pytest.raises(InfeasibleError, match="asks GPU-A100=2; the most any worker has is 0"):
            two_a100()
        assert not client.who_has()
        # Refused before submission: no task waits on the scheduler for a worker that never comes.
        assert client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.tasks)) == []
