"""The one occupancy codec: what the plugin encodes is what every client decodes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import get_args

import pytest

from taskcell.cluster import pool_records
from taskcell.cluster.waits import lack, wait, wait_words
from taskcell.planner import codec
from taskcell.planner.feed import pickled_plugins
from taskcell.planner.schema import (
    STRIP_SECONDS,
    STRIP_STEPS,
    EndedTask,
    PoolInfo,
    PoolWorker,
    PoolWorkerState,
    ResourceUse,
    TaskInfo,
)

KEY = "cell-3-" + "0" * 32
#: What a task asking for four GPUs waits for on a cluster whose workers have two at most.
NO_GPU4 = wait("no-capable-worker", lacking=[lack("GPU", 4, 2, on="tcp://w:1")])
#: A pool as a kernel's provisioner publishes it (``taskcell.cluster.pool_records.PoolInfo``).
PUBLISHED = {
    "kernel": "kernel-1",
    "name": "a100x2",
    "backend": "local",
    "resources": {"CPU": 1.0, "MEMORY": float(1 << 30), "GPU": 2.0, "GPU-A100": 2.0},
    "max_workers": 2,
    "waiting": 1,
    "launched": 2,
    "workers": [
        {
            "name": "a100x2-1",
            "state": "running",
            "started": "pid 42",
            "address": "tcp://w:1",
            "since": 90.0,
            "idle_since": 97.5,
            "error": None,
        },
        {
            "name": "a100x2-2",
            "state": "starting",
            "started": "",
            "address": None,
            "since": 99.0,
            "idle_since": None,
            "error": None,
        },
    ],
}


def gpu_worker() -> codec.WireWorker:
    return codec.worker_record(
        address="tcp://10.0.0.1:1",
        name="gpu-box",
        nthreads=2,
        memory_limit=8 << 30,
        resources={
            "GPU": codec.use_record(2, 2, 1),
            "threads": codec.use_record(2, 2, 1),
            "MEMORY": codec.use_record(8 << 30, 0, 0),
        },
        tasks=[
            codec.task_record(
                key=KEY, prefix="cell", request={"GPU": 1}, state="running", since=10.0
            ),
            codec.task_record(
                key=("chunk", 0), prefix="chunk", request={"GPU": 1}, state="assigned", since=11.0
            ),
        ],
        running_tasks=1,
        assigned_tasks=1,
    )


def test_a_worker_decodes_into_the_schema_with_resources_in_order_and_reasons():
    w = codec.decode_worker(gpu_worker())
    assert [u["resource"] for u in w["resources"]] == ["threads", "MEMORY", "GPU"]
    running, assigned = w["tasks"]
    assert running == TaskInfo(
        key=KEY,
        name="cell-3",
        request={"GPU": 1},
        state="running",
        since=10.0,
        worker="tcp://10.0.0.1:1",
        wait=None,
    )
    assert (assigned["key"], assigned["name"]) == ("('chunk', 0)", "chunk")
    assert assigned["wait"] == wait("worker-resources", lacking=[lack("GPU", 1, 2, held=2)])
    assert wait_words(assigned["wait"]) == (
        "waiting on this worker for GPU=1 (2 of 2 held by running tasks)"
    )
    assert codec.worker_capacity(w).resources == {"GPU": 2, "MEMORY": 8 << 30}


def test_a_whole_state_and_its_samples_round_trip():
    worker = gpu_worker()
    queued = codec.task_record(
        key="big-1",
        prefix="big",
        request={"GPU": 4},
        state="queued",
        since=12.0,
        wait=NO_GPU4,
    )
    totals = codec.sum_totals([worker, worker])
    assert totals["GPU"] == {"total": 4, "running": 4, "assigned": 2}
    ended = codec.ended_record(
        codec.EndedEntry(
            key=KEY,
            prefix="cell",
            request={"GPU": 1},
            state="failed",
            ended=12.5,
            worker="tcp://10.0.0.1:1",
            wall=2.5,
            peak_memory=1 << 20,
            error="ValueError: x",
        )
    )
    pools = [codec.pool_record(PUBLISHED)]
    message = codec.update_message(
        epoch="e",
        seq=3,
        time=13.0,
        scheduler="tcp://s:1",
        workers=[worker],
        removed=[],
        queue=[queued],
        queued=1,
        totals=totals,
        recent=[ended],
        dashboard=8787,
        pools=pools,
        full=True,
    )
    snap = codec.decode(message, address="tcp://scheduler.example:8786")
    assert snap["recent"] == [
        EndedTask(
            key=KEY,
            name="cell-3",
            request={"GPU": 1},
            state="failed",
            worker="tcp://10.0.0.1:1",
            ended=12.5,
            wall=2.5,
            peak_memory=1 << 20,
            error="ValueError: x",
        )
    ]
    assert snap["dashboard"] == "http://scheduler.example:8787/status"
    assert snap["pools"] == [
        PoolInfo(
            kernel="kernel-1",
            name="a100x2",
            backend="local",
            resources={"CPU": 1, "MEMORY": 1 << 30, "GPU": 2, "GPU-A100": 2},
            max_workers=2,
            waiting=1,
            launched=2,
            workers=[
                PoolWorker(
                    name="a100x2-1",
                    state="running",
                    started="pid 42",
                    address="tcp://w:1",
                    since=90.0,
                    idle_since=97.5,
                    error=None,
                ),
                PoolWorker(
                    name="a100x2-2",
                    state="starting",
                    started="",
                    address=None,
                    since=99.0,
                    idle_since=None,
                    error=None,
                ),
            ],
        )
    ]
    assert snap["strips"] == []
    assert (snap["seq"], snap["queued"], snap["queue"][0]["wait"]) == (3, 1, NO_GPU4)
    assert snap["queue"][0]["worker"] is None
    ((t, n, uses),) = codec.decode_samples(
        [codec.sample_record(time=13.0, queued=1, totals=totals)]
    )
    assert (t, n) == (13.0, 1)
    assert uses[0] == ResourceUse(resource="threads", total=4, running=4, assigned=2)


def test_a_pool_worker_has_the_states_the_provisioner_writes():
    assert get_args(PoolWorkerState) == get_args(pool_records.PoolWorkerState)


def test_a_dashboard_link_only_where_the_scheduler_serves_one():
    assert codec.dashboard_link("tcp://10.0.0.5:8786", None) is None
    assert codec.dashboard_link("tcp://10.0.0.5:8786", 8787) == "http://10.0.0.5:8787/status"
    assert codec.dashboard_link("inproc://10.0.0.5/1/2", 1234) == "http://localhost:1234/status"


def steps(now: float) -> int:
    return int(now // STRIP_SECONDS)


def gpu(time: float, total: int, running: int) -> codec.WireSample:
    """A history sample of a cluster whose GPUs ``running`` tasks hold, of ``total``."""
    return codec.sample_record(
        time=time, queued=0, totals={"GPU": codec.use_record(total, running, 0)}
    )


@pytest.mark.parametrize(
    ("samples", "expected_tail"),
    [
        pytest.param([gpu(100.0, 2, 1)], [0.5] * 3, id="one-sample-held-to-now"),
        pytest.param(
            [gpu(100.0, 2, 0), gpu(101.0, 2, 2), gpu(102.0, 2, 0), gpu(111.0, 2, 1)],
            [1.0, 0.0, 0.5],
            id="a-short-peak-shows-in-its-step",
        ),
        pytest.param([gpu(100.0, 0, 0)], [0.0] * 3, id="no-total-no-share"),
        pytest.param([gpu(100.0, 2, 5)], [1.0] * 3, id="capped-at-the-total"),
    ],
)
def test_a_strip_holds_the_highest_share_of_each_step(samples, expected_tail):
    now = 114.0
    (strip,) = codec.strips(samples, now)
    assert strip["resource"] == "GPU"
    assert len(strip["shares"]) == STRIP_STEPS
    assert strip["start"] == (steps(now) - STRIP_STEPS + 1) * STRIP_SECONDS
    assert strip["shares"][-3:] == expected_tail
    assert strip["shares"][: STRIP_STEPS - 3] == [None] * (STRIP_STEPS - 3)


def test_a_strip_starts_from_the_sample_in_force_before_it():
    long_ago = [gpu(0.0, 2, 2), gpu(5000.0, 2, 1)]
    (strip,) = codec.strips(long_ago, 5000.0 + STRIP_SECONDS * 2)
    assert strip["shares"][0] == 1.0  # held since t=0, long before the strip begins
    assert strip["shares"][-3:] == [0.5, 0.5, 0.5]
    assert codec.strips([], 100.0) == []


def test_whole_amounts_travel_as_ints():
    assert codec.request_record({"GPU": 1.0, "CPU": 0.5}) == {"GPU": 1, "CPU": 0.5}
    assert type(codec.amount(2.0)) is int


SHIPPED = """
import json
import sys
from types import SimpleNamespace as NS

sys.modules["taskcell"] = None  # a scheduler without taskcell installed
from distributed.protocol.pickle import loads

scheduler_plugin = loads(open(sys.argv[1], "rb").read())
worker_plugin = loads(open(sys.argv[2], "rb").read())
task = NS(key="cell-1-" + "a" * 32, prefix=NS(name="cell"), state="no-worker",
          resource_restrictions={"MEMORY": 3 << 30}, worker_restrictions=None,
          host_restrictions=None, annotations=None)
ws = NS(address="tcp://w:1", name="w", nthreads=2, memory_limit=0,
        resources={"MEMORY": 1 << 30}, processing=set(), long_running=set(), executing=set())
scheduler_plugin.scheduler = NS(workers={"tcp://w:1": ws}, tasks={task.key: task}, address="s",
                                clients={"c1": None})
scheduler_plugin.queue["no-worker"][task.key] = 1.0
print(json.dumps(scheduler_plugin.worker_record(ws)))
print(json.dumps(scheduler_plugin.queue_records()))
print(json.dumps(type(worker_plugin).__name__))
scheduler_plugin.ended.follow(task)
scheduler_plugin.log_event("client-1", {"key": task.key, "kind": "failed", "error": "E: bad"})
scheduler_plugin.transition(task.key, "no-worker", "erred")
print(json.dumps(scheduler_plugin.ended.records()))
scheduler_plugin.log_event("taskcell-pools", {"kernel": "k1", "client": "c1", "pools": [
    {"kernel": "k1", "name": "p", "backend": "local", "resources": {"GPU": 2.0},
     "max_workers": 1, "waiting": 0, "launched": 1,
     "workers": [{"name": "p-1", "state": "running", "started": "pid 4", "address": "tcp://w:2",
                  "since": 5.0, "idle_since": None, "error": None}]}]})
print(json.dumps(scheduler_plugin.pools))
"""


def test_the_plugins_run_where_taskcell_is_not_installed(tmp_path):
    paths = [tmp_path / "scheduler.pickle", tmp_path / "worker.pickle"]
    for path, blob in zip(paths, pickled_plugins(), strict=True):
        path.write_bytes(blob)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SHIPPED), *map(str, paths)],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    worker, queue, reporter, ended, pools = map(json.loads, done.stdout.decode().splitlines())
    assert reporter == "StartReporter"
    ((failed),) = ended
    assert {k: v for k, v in failed.items() if k != "ended"} == {
        "key": "cell-1-" + "a" * 32,
        "request": {"MEMORY": 3 << 30},
        "state": "failed",
        "worker": None,
        "wall": None,
        "peak_memory": None,
        "error": "E: bad",
    }
    assert worker == {
        "address": "tcp://w:1",
        "name": "w",
        "nthreads": 2,
        "memory_limit": 0,
        "resources": {
            "threads": {"total": 2, "running": 0, "assigned": 0},
            "MEMORY": {"total": 1 << 30, "running": 0, "assigned": 0},
        },
        "tasks": [],
        "running_tasks": 0,
        "assigned_tasks": 0,
    }
    ((queued),) = queue
    assert queued["state"] == "queued"
    assert queued["wait"] == wait(
        "no-capable-worker", lacking=[lack("MEMORY", 3 << 30, 1 << 30, on="tcp://w:1")]
    )
    assert wait_words(queued["wait"]) == (
        "no live worker can ever run it: asks MEMORY=3 GiB; the most any worker has is 1 GiB, "
        "on tcp://w:1"
    )
    assert pools == {
        "c1": [
            {
                "kernel": "k1",
                "name": "p",
                "backend": "local",
                "resources": {"GPU": 2},
                "max_workers": 1,
                "waiting": 0,
                "launched": 1,
                "workers": [
                    {
                        "name": "p-1",
                        "state": "running",
                        "started": "pid 4",
                        "address": "tcp://w:2",
                        "since": 5.0,
                        "idle_since": None,
                        "error": None,
                    }
                ],
            }
        ]
    }
