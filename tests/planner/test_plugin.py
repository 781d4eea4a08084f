"""The occupancy plugin in-process (``gen_cluster``), with an asynchronous client."""

from __future__ import annotations

import asyncio

from distributed import Event
from distributed.utils_test import gen_cluster

from taskcell.planner import OccupancyFeed, occupancy, plugin, snapshot, wire
from taskcell.planner.feed import install
from taskcell.planner.schema import QUEUE_LIMIT, TASKS_PER_WORKER

GPU_WORKER = [("127.0.0.1", 2, {"resources": {"GPU": 2}})]
LONG = 60


def hold(event: str, i: int = 0) -> int:
    Event(event).wait(30)
    return i


async def until(check, timeout=20.0):
    for _ in range(int(timeout / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition never held")


def gpu(snap):
    (w,) = snap["workers"]
    return next(
        (u["total"], u["running"], u["assigned"]) for u in w["resources"] if u["resource"] == "GPU"
    )


@gen_cluster(client=True, nthreads=GPU_WORKER, timeout=LONG)
async def test_tasks_running_before_the_plugin_are_seen_through_heartbeats(c, s, a):
    futures = [c.submit(hold, "late", i, resources={"GPU": 1}, pure=False) for i in range(3)]
    await until(lambda: len(a.state.executing) == 2)
    await until(lambda: all(ws.executing for ws in s.workers.values()), timeout=5)
    snap = await snapshot(c)  # installs the plugin only now
    assert gpu(snap) == (2, 2, 1)
    await Event("late").set()
    await c.gather(futures)


@gen_cluster(client=True, nthreads=GPU_WORKER, timeout=LONG)
async def test_updates_are_bounded_whatever_the_queue(c, s, a):
    feed = await OccupancyFeed(c).start()
    stuck = [c.submit(hold, "many", i, resources={"GPU": 1}, pure=False) for i in range(60)]
    never = [c.submit(hold, "many", i, resources={"GPU": 3}, pure=False) for i in range(150)]
    await until(lambda: feed.snapshot()["queued"] == 150 and gpu(feed.snapshot())[2] == 58)
    snap = feed.snapshot()
    (w,) = snap["workers"]
    assert (w["running_tasks"], w["assigned_tasks"]) == (2, 58)
    assert len(w["tasks"]) == 2 + TASKS_PER_WORKER == 7
    assert len(snap["queue"]) == QUEUE_LIMIT
    oldest = [t["since"] for t in w["tasks"] if t["state"] == "assigned"]
    assert oldest == sorted(oldest)
    frame = await occupancy(c)
    assert list(frame.columns) == [
        "worker",
        "name",
        "resource",
        "total",
        "running",
        "assigned",
        "free",
    ]
    await c.cancel(never)
    await Event("many").set()
    await c.gather(stuck)
    await until(lambda: gpu(feed.snapshot()) == (2, 0, 0) and feed.snapshot()["queued"] == 0)
    await feed.close()


def state(s):
    """The plugin's whole state now, decoded (straight from the scheduler, in-process)."""
    return wire.decode(s.plugins[plugin.PLUGIN_NAME].handle_snapshot())


def threads(snap):
    (w,) = snap["workers"]
    return next(
        (u["total"], u["running"], u["assigned"])
        for u in w["resources"]
        if u["resource"] == "threads"
    )


@gen_cluster(client=True, nthreads=GPU_WORKER, timeout=LONG)
async def test_a_missed_update_is_recovered_from_the_whole_state(c, s, a):
    feed = await OccupancyFeed(c).start()
    occupancy_plugin = s.plugins[plugin.PLUGIN_NAME]
    subscribers, occupancy_plugin.subscribers = occupancy_plugin.subscribers, set()
    f = c.submit(hold, "gap", resources={"GPU": 1}, pure=False)
    await until(lambda: gpu(state(s)) == (2, 1, 0))  # published to nobody
    occupancy_plugin.subscribers = subscribers  # so the feed missed an update
    await Event("gap").set()
    await f
    await until(lambda: gpu(feed.snapshot()) == (2, 0, 0) and feed.seq == occupancy_plugin.seq)
    await feed.close()


@gen_cluster(client=True, nthreads=GPU_WORKER, timeout=LONG)
async def test_tuple_keys_and_plain_tasks_count_as_threads(c, s, a):
    await install(c)
    futures = c.map(hold, ["tuple"] * 3, key=[("chunk", 0, i) for i in range(3)])
    await until(lambda: threads(state(s)) == (2, 2, 1))
    names = {t["name"] for t in state(s)["workers"][0]["tasks"]}
    assert names == {"chunk"}
    await Event("tuple").set()
    await c.gather(futures)


@gen_cluster(client=True, nthreads=GPU_WORKER, timeout=LONG)
async def test_a_scheduler_without_the_plugin_gets_it_again(c, s, a):
    await snapshot(c)
    s.remove_plugin(plugin.PLUGIN_NAME)
    del s.handlers["taskcell_occupancy"]
    snap = await snapshot(c)  # answered None: installed again, asked again
    assert gpu(snap) == (2, 0, 0)
    assert plugin.PLUGIN_NAME in s.plugins


def test_large_updates_travel_compressed_and_decode_the_same():
    workers = [
        [f"tcp://10.0.0.{i}:1", f"w{i}", 2, 0, {"threads": [2, 1, 0], "GPU": [2, 1, 0]},
         [[f"cell-{i}-{'a' * 32}", None, {"GPU": 1}, "r", 1.5]], 1, 0]
        for i in range(wire.COMPRESS_FROM)
    ]  # fmt: skip
    full = {
        "v": wire.WIRE_VERSION, "epoch": "e1", "seq": 3, "time": 2.0, "scheduler": "tcp://s:1",
        "workers": workers, "removed": [], "queue": [], "queued": 0,
        "totals": {"GPU": [128, 64, 0]}, "full": True,
    }  # fmt: skip
    packed = wire.pack(full)
    assert set(packed) == {"v", "epoch", "seq", "zlib"} and len(packed["zlib"]) < 4000
    assert wire.decode(packed) == wire.decode(full)
    assert wire.decode(full)["workers"][0]["tasks"][0]["name"] == "cell-0"
    small = {**full, "workers": workers[:3]}
    assert wire.pack(small) is small


@gen_cluster(client=True, nthreads=GPU_WORKER, timeout=LONG)
async def test_a_scheduler_restart_keeps_subscribers_and_numbering(c, s, a):
    feed = await OccupancyFeed(c).start()
    scheduler_plugin = s.plugins[plugin.PLUGIN_NAME]
    seq, epoch = scheduler_plugin.seq, scheduler_plugin.epoch
    scheduler_plugin.restart(s)  # what Client.restart() triggers on the scheduler
    assert (scheduler_plugin.seq, scheduler_plugin.epoch) == (seq, epoch)
    assert scheduler_plugin.subscribers == {c.id}
    f = c.submit(hold, "after-restart", resources={"GPU": 1}, pure=False)
    await until(lambda: gpu(feed.snapshot()) == (2, 1, 0))
    await Event("after-restart").set()
    await f
    await until(lambda: gpu(feed.snapshot()) == (2, 0, 0))
    await feed.close()
