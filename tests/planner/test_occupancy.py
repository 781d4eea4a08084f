"""Occupancy snapshots against real scheduler and worker processes, tasks held with Events."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from distributed import Client, Event
from waiting import eventually

from taskcell.cluster.waits import wait_words
from taskcell.planner import OccupancyFeed, occupancy, occupancy_history, snapshot
from taskcell.planner.schema import Snapshot

pytestmark = pytest.mark.slow


def holder(event: str) -> Callable[[int], int]:
    """A task body that holds its resources until ``event`` is set (pickled by value)."""

    def hold(i: int) -> int:
        from distributed import Event

        Event(event).wait(60)
        return i

    return hold


@pytest.fixture(scope="module")
def client(module_dask) -> Iterator[Client]:
    module_dask.worker("--nthreads", "2", "--resources", "GPU=2", name="gpu-a")
    with Client(module_dask.address) as c:
        c.wait_for_workers(1)
        yield c


@pytest.fixture
def feed(client) -> Iterator[OccupancyFeed]:
    f = OccupancyFeed(client).start()
    yield f
    f.close()


def worker(snap: Snapshot, name: str):
    return next((w for w in snap["workers"] if w["name"] == name), None)


def use(record, resource: str) -> tuple:
    u = next(u for u in record["resources"] if u["resource"] == resource)
    return u["total"], u["running"], u["assigned"]


def assert_never_negative(snap: Snapshot) -> None:
    for record in [*snap["workers"], {"resources": snap["totals"]}]:
        for u in record["resources"]:
            assert min(u["total"], u["running"], u["assigned"]) >= 0, u


def test_running_assigned_queued_and_why(client, feed):
    name = f"hold-{uuid.uuid4().hex[:6]}"
    hold = holder(name)
    held = [client.submit(hold, i, resources={"GPU": 1}, pure=False) for i in range(3)]
    never = client.submit(hold, 99, resources={"GPU": 4}, pure=False, key=f"too-big-{name}")

    snap = eventually(
        feed.snapshot,
        "two GPU tasks running, one assigned, one queued",
        holds=lambda s: use(worker(s, "gpu-a"), "GPU") == (2, 2, 1) and s["queued"] == 1,
    )
    gpu_a = worker(snap, "gpu-a")
    assert use(gpu_a, "threads") == (2, 2, 1)
    assert (gpu_a["running_tasks"], gpu_a["assigned_tasks"]) == (2, 1)
    states = sorted(t["state"] for t in gpu_a["tasks"])
    assert states == ["assigned", "running", "running"]
    waiting = next(t for t in gpu_a["tasks"] if t["state"] == "assigned")
    assert waiting["name"] == "hold" and waiting["request"] == {"GPU": 1}
    assert waiting["wait"] is not None and waiting["wait"]["code"] == "worker-resources"
    assert wait_words(waiting["wait"]) == (
        "waiting on this worker for GPU=1 (2 of 2 held by running tasks)"
    )
    (queued,) = snap["queue"]
    assert queued["key"] == f"too-big-{name}" and queued["state"] == "queued"
    assert queued["wait"] is not None and queued["wait"]["code"] == "no-capable-worker"
    assert wait_words(queued["wait"]) == (
        "no live worker can ever run it: asks GPU=4; the most any worker has is 2, "
        f"on {gpu_a['address']}"
    )
    assert {u["resource"]: (u["total"], u["running"], u["assigned"]) for u in snap["totals"]} == {
        "threads": (2, 2, 1),
        "GPU": (2, 2, 1),
    }
    assert_never_negative(snap)

    # The one-off snapshot and the DataFrame agree with the pushed one.
    once = snapshot(client)
    assert use(worker(once, "gpu-a"), "GPU") == (2, 2, 1)
    frame = occupancy(client)
    row = frame[(frame["name"] == "gpu-a") & (frame["resource"] == "GPU")].iloc[0]
    assert (row["total"], row["running"], row["assigned"], row["free"]) == (2, 2, 1, 0)

    Event(name, client=client).set()
    assert sorted(client.gather(held)) == [0, 1, 2]
    snap = eventually(
        feed.snapshot, "the GPUs free", holds=lambda s: use(worker(s, "gpu-a"), "GPU") == (2, 0, 0)
    )
    assert snap["queued"] == 1 and worker(snap, "gpu-a")["tasks"] == []
    never.cancel()
    eventually(
        feed.snapshot, "the queue empty", holds=lambda s: s["queued"] == 0 and s["queue"] == []
    )
    assert feed.updates >= 3  # pushed, not asked for

    history = occupancy_history(client)
    gpu = history[history["resource"] == "GPU"]
    assert gpu["running"].max() == 2 and gpu["assigned"].max() == 1
    assert (gpu["free"] >= 0).all()
    # Nothing polled the scheduler with run_on_scheduler.
    actions = [e.get("action") for _, e in client.get_events("all") if isinstance(e, dict)]
    assert "run-function" not in actions


def test_workers_join_and_leave(module_dask, client, feed):
    proc = module_dask.worker("--resources", "FPGA=1", name="joiner")
    snap = eventually(
        feed.snapshot, "the worker listed", holds=lambda s: worker(s, "joiner") is not None
    )
    assert use(worker(snap, "joiner"), "FPGA") == (1, 0, 0)
    assert {u["resource"]: u["total"] for u in snap["totals"]}["FPGA"] == 1
    proc.terminate()
    snap = eventually(feed.snapshot, "the worker gone", holds=lambda s: worker(s, "joiner") is None)
    assert "FPGA" not in {u["resource"] for u in snap["totals"]}


def test_killed_worker_takes_its_resources_with_it(module_dask, client, feed):
    proc = module_dask.worker("--no-nanny", "--resources", "FPGA=1", name="doomed")
    eventually(feed.snapshot, "the worker listed", holds=lambda s: worker(s, "doomed") is not None)
    name = f"hold-{uuid.uuid4().hex[:6]}"
    task = client.submit(holder(name), 1, resources={"FPGA": 1}, pure=False)
    eventually(
        feed.snapshot,
        "its FPGA running the task",
        holds=lambda s: use(worker(s, "doomed"), "FPGA") == (1, 1, 0),
    )
    proc.kill()
    snap = eventually(
        feed.snapshot,
        "the worker gone and its task queued",
        holds=lambda s: worker(s, "doomed") is None and s["queued"] == 1,
    )
    assert_never_negative(snap)
    assert "FPGA" not in {u["resource"] for u in snap["totals"]}
    (queued,) = snap["queue"]
    assert queued["wait"] is not None
    assert wait_words(queued["wait"]) == (
        "no live worker can ever run it: asks FPGA=1; the most any worker has is 0"
    )
    task.cancel()
    Event(name, client=client).set()
    eventually(feed.snapshot, "the queue empty", holds=lambda s: s["queued"] == 0)


def test_two_feeds_on_one_client_both_follow(client, feed):
    second = OccupancyFeed(client).start()
    try:
        before = (feed.seq, second.seq)
        name = f"hold-{uuid.uuid4().hex[:6]}"
        task = client.submit(holder(name), 1, resources={"GPU": 1}, pure=False)
        for f in (feed, second):
            eventually(
                f.snapshot,
                "one GPU running",
                holds=lambda s: use(worker(s, "gpu-a"), "GPU")[1] == 1,
            )
        Event(name, client=client).set()
        assert task.result() == 1
        assert feed.seq > before[0] and second.seq > before[1]
    finally:
        second.close()
    assert not second.closed or second.close() is None  # closing twice is harmless
