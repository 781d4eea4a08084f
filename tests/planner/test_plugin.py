"""The occupancy plugin in-process (``gen_cluster``), with an asynchronous client."""

from __future__ import annotations

import uuid

from distributed import Client, Event
from distributed.utils_test import gen_cluster
from waiting import eventually_async

from taskcell.cluster.pool_records import POOLS_TOPIC
from taskcell.planner import OccupancyFeed, codec, occupancy, plugin, snapshot
from taskcell.planner.feed import install
from taskcell.planner.schema import QUEUE_LIMIT, RECENT_LIMIT, TASKS_PER_WORKER

GPU_WORKER = [("127.0.0.1", 2, {"resources": {"GPU": 2}})]
LONG = 60
WAIT = LONG / 2  # how long a state may take to come, leaving the test time to say what it saw


def hold(event: str, i: int = 0) -> int:
    Event(event).wait(LONG)  # as long as the test may take: a task must not end on its own
    return i


def gpu(snap):
    (w,) = snap["workers"]
    return next(
        (u["total"], u["running"], u["assigned"]) for u in w["resources"] if u["resource"] == "GPU"
    )


@gen_cluster(client=True, nthreads=GPU_WORKER, timeout=LONG)
async def test_tasks_running_before_the_plugin_are_seen_through_heartbeats(c, s, a):
    futures = [c.submit(hold, "late", i, resources={"GPU": 1}, pure=False) for i in range(3)]
    await eventually_async(
        lambda: len(a.state.executing), "two tasks executing", WAIT, holds=lambda n: n == 2
    )
    await eventually_async(
        lambda: [ws.executing for ws in s.workers.values()],
        "the scheduler to hear of them",
        WAIT,
        holds=all,
    )
    snap = await snapshot(c)  # installs the plugin only now
    assert gpu(snap) == (2, 2, 1)
    await Event("late").set()
    await c.gather(futures)


@gen_cluster(client=True, nthreads=GPU_WORKER, timeout=LONG)
async def test_updates_are_bounded_whatever_the_queue(c, s, a):
    feed = await OccupancyFeed(c).start()
    stuck = [c.submit(hold, "many", i, resources={"GPU": 1}, pure=False) for i in range(60)]
    never = [c.submit(hold, "many", i, resources={"GPU": 3}, pure=False) for i in range(150)]
    await eventually_async(
        lambda: feed.snapshot()["queued"] == 150 and gpu(feed.snapshot())[2] == 58,
        "150 queued and 58 assigned",
        WAIT,
        seen=lambda: (feed.snapshot()["queued"], gpu(feed.snapshot())),
    )
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
    await eventually_async(
        lambda: (gpu(feed.snapshot()), feed.snapshot()["queued"]),
        "the GPUs free and nothing queued",
        WAIT,
        holds=lambda seen: seen == ((2, 0, 0), 0),
    )
    await feed.close()


@gen_cluster(client=True, nthreads=GPU_WORKER, timeout=LONG)
async def test_the_count_of_waiting_tasks_grows_past_the_tasks_listed(c, s, a):
    feed = await OccupancyFeed(c).start()
    full, more = QUEUE_LIMIT + 10, QUEUE_LIMIT + 20

    def never(i):
        return c.submit(hold, "never", i, resources={"GPU": 3}, pure=False)

    def queued():
        return feed.snapshot()["queued"]

    waiting = [never(i) for i in range(full)]
    await eventually_async(queued, f"{full} waiting", WAIT, holds=full.__eq__)
    listed = feed.snapshot()["queue"]
    waiting += [never(i) for i in range(full, more)]
    await eventually_async(queued, f"{more} waiting", WAIT, holds=more.__eq__)
    assert feed.snapshot()["queue"] == listed  # the oldest QUEUE_LIMIT, unchanged
    await c.cancel(waiting)
    await feed.close()


def state(s):
    """The plugin's whole state now, decoded (straight from the scheduler, in-process)."""
    return codec.decode(s.plugins[plugin.PLUGIN_NAME].handle_snapshot())


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
    await eventually_async(  # published to nobody
        lambda: gpu(state(s)), "one GPU running", WAIT, holds=lambda g: g == (2, 1, 0)
    )
    occupancy_plugin.subscribers = subscribers  # so the feed missed an update
    await Event("gap").set()
    await f
    await eventually_async(
        lambda: (gpu(feed.snapshot()), feed.seq),
        "the feed to catch up with the GPUs free",
        WAIT,
        holds=lambda seen: seen == ((2, 0, 0), occupancy_plugin.seq),
    )
    await feed.close()


@gen_cluster(client=True, nthreads=GPU_WORKER, timeout=LONG)
async def test_tuple_keys_and_plain_tasks_count_as_threads(c, s, a):
    await install(c)
    futures = c.map(hold, ["tuple"] * 3, key=[("chunk", 0, i) for i in range(3)])
    await eventually_async(
        lambda: threads(state(s)),
        "2 threads running, 1 assigned",
        WAIT,
        holds=lambda t: t == (2, 2, 1),
    )
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
        codec.worker_record(
            address=f"tcp://10.0.0.{i}:1",
            name=f"w{i}",
            nthreads=2,
            memory_limit=0,
            resources={"threads": codec.use_record(2, 1, 0), "GPU": codec.use_record(2, 1, 0)},
            tasks=[
                codec.task_record(
                    key=f"cell-{i}-{'a' * 32}",
                    prefix="cell",
                    request={"GPU": 1},
                    state="running",
                    since=1.5,
                )
            ],
            running_tasks=1,
            assigned_tasks=0,
        )
        for i in range(codec.COMPRESS_FROM)
    ]
    full = codec.update_message(
        epoch="e1",
        seq=3,
        time=2.0,
        scheduler="tcp://s:1",
        workers=workers,
        removed=[],
        queue=[],
        queued=0,
        totals=codec.sum_totals(workers),
        recent=[],
        dashboard=None,
        pools=[],
        full=True,
    )
    packed = codec.pack(full)
    assert set(packed) == {"v", "epoch", "seq", "zlib"} and len(packed["zlib"]) < 4000
    assert codec.decode(packed) == codec.decode(full)
    assert codec.decode(full)["workers"][0]["tasks"][0]["name"] == "cell-0"
    small = {**full, "workers": workers[:3]}
    assert codec.pack(small) is small


@gen_cluster(client=True, nthreads=GPU_WORKER, timeout=LONG)
async def test_a_scheduler_restart_keeps_subscribers_and_numbering(c, s, a):
    feed = await OccupancyFeed(c).start()
    scheduler_plugin = s.plugins[plugin.PLUGIN_NAME]
    seq, epoch = scheduler_plugin.seq, scheduler_plugin.epoch
    scheduler_plugin.restart(s)  # what Client.restart() triggers on the scheduler
    assert (scheduler_plugin.seq, scheduler_plugin.epoch) == (seq, epoch)
    assert scheduler_plugin.subscribers == {c.id}
    f = c.submit(hold, "after-restart", resources={"GPU": 1}, pure=False)
    await eventually_async(
        lambda: gpu(feed.snapshot()), "one GPU running", WAIT, holds=lambda g: g == (2, 1, 0)
    )
    await Event("after-restart").set()
    await f
    await eventually_async(
        lambda: gpu(feed.snapshot()), "the GPUs free", WAIT, holds=lambda g: g == (2, 0, 0)
    )
    await feed.close()


# -- tasks that ended -----------------------------------------------------------------------


class CellInterrupted(Exception):
    """What taskcell.runner.remote raises for a cell stopped on its worker (same class name)."""


def like_a_cell(end: str, peak: int = 14 << 20) -> int:
    """Report on a kernel's topic as a cell's worker does (taskcell.runner.remote), then end."""
    from distributed import get_worker

    worker = get_worker()
    key = worker.get_current_task()
    worker.log_event("client-1", {"key": key, "kind": "started", "worker": worker.address})
    if end == "finished":
        usage = {"wall": 1.5, "cpu": 0.5, "peak_memory": peak, "gpu_memory": None}
        worker.log_event("client-1", {"key": key, "kind": "finished", "sizes": {}, "usage": usage})
        return 1
    worker.log_event("client-1", {"key": key, "kind": "failed", "error": "ValueError: bad batch"})
    raise CellInterrupted("the cell was interrupted") if end == "stopped" else ValueError("bad")


def cell_key(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex}"


@gen_cluster(client=True, nthreads=GPU_WORKER, timeout=LONG)
async def test_finished_failed_and_cancelled_tasks_are_listed_latest_first(c, s, a):
    feed = await OccupancyFeed(c).start()
    ok = c.submit(like_a_cell, "finished", key=cell_key("ok"), resources={"GPU": 1})
    await ok
    bad = c.submit(like_a_cell, "failed", key=cell_key("bad"))
    stopped = c.submit(like_a_cell, "stopped", key=cell_key("stopped"))
    never = c.submit(hold, "never", key=cell_key("never"), resources={"GPU": 3})
    await c.gather([bad, stopped], errors="skip")
    await eventually_async(
        lambda: feed.snapshot()["queued"], "one task queued", WAIT, holds=lambda n: n == 1
    )
    await c.cancel(never)
    await eventually_async(
        lambda: feed.snapshot()["recent"], "four recent tasks", WAIT, holds=lambda r: len(r) == 4
    )
    recent = feed.snapshot()["recent"]
    by_name = {t["name"]: t for t in recent}
    assert recent[0]["name"] == "never" and recent[-1]["name"] == "ok"
    assert by_name["ok"]["state"] == "finished"
    assert (by_name["ok"]["worker"], by_name["ok"]["wall"]) == (a.address, 1.5)
    assert (by_name["ok"]["peak_memory"], by_name["ok"]["request"]) == (14 << 20, {"GPU": 1})
    assert by_name["bad"]["state"] == "failed"
    assert by_name["bad"]["error"] == "ValueError: bad batch"
    assert by_name["stopped"]["state"] == "cancelled" and by_name["stopped"]["error"] is None
    # Ended before the worker's batched word of their start: the timeline still places them.
    assert by_name["bad"]["wall"] is not None and by_name["stopped"]["wall"] is not None
    assert by_name["never"]["state"] == "cancelled" and by_name["never"]["worker"] is None
    assert by_name["never"]["wall"] is None
    assert (await snapshot(c))["recent"] == recent  # a one-off snapshot holds them too
    await feed.close()


@gen_cluster(client=True, nthreads=GPU_WORKER, timeout=LONG)
async def test_recent_is_bounded_and_leaves_out_plain_tasks(c, s, a):
    await install(c)
    await c.gather(c.map(lambda i: i, range(30)))  # plain Dask tasks: not listed
    futures = [c.submit(like_a_cell, "finished", key=cell_key(f"c{i}")) for i in range(25)]
    await c.gather(futures)
    await eventually_async(
        lambda: len(state(s)["recent"]),
        "the recent list full",
        WAIT,
        holds=lambda n: n == RECENT_LIMIT,
    )
    names = [t["name"] for t in state(s)["recent"]]
    assert set(names) <= {f"c{i}" for i in range(25)}
    ended = [t["ended"] for t in state(s)["recent"]]
    assert ended == sorted(ended, reverse=True)


@gen_cluster(
    client=True,
    nthreads=GPU_WORKER,
    timeout=LONG,
    scheduler_kwargs={"dashboard": True, "dashboard_address": "127.0.0.1:0"},
)
async def test_a_scheduler_with_a_dashboard_links_it_and_serves_it(c, s, a):
    from tornado.httpclient import AsyncHTTPClient

    link = (await snapshot(c))["dashboard"]
    assert link == f"http://127.0.0.1:{s.http_server.port}/status"
    response = await AsyncHTTPClient().fetch(link, raise_error=False)
    assert response.code == 200, "the dashboard needs bokeh (a dependency of taskcell)"


@gen_cluster(client=True, nthreads=GPU_WORKER, timeout=LONG)
async def test_a_scheduler_without_a_dashboard_links_none(c, s, a):
    assert (await snapshot(c))["dashboard"] is None


@gen_cluster(client=True, nthreads=GPU_WORKER, timeout=LONG)
async def test_strips_show_what_running_tasks_held(c, s, a):
    feed = await OccupancyFeed(c).start()
    f = c.submit(hold, "strip", resources={"GPU": 2}, pure=False)
    await eventually_async(
        lambda: gpu(feed.snapshot()), "both GPUs running", WAIT, holds=lambda g: g == (2, 2, 0)
    )
    strips = {x["resource"]: x for x in feed.snapshot()["strips"]}
    assert strips["GPU"]["shares"][-1] == 1.0
    await Event("strip").set()
    await f
    await feed.close()


@gen_cluster(client=True, nthreads=GPU_WORKER, timeout=LONG)
async def test_tasks_submitted_before_the_plugin_are_followed_to_their_end(c, s, a):
    never = c.submit(hold, "before", key=cell_key("before"), resources={"GPU": 3})
    await eventually_async(
        lambda: never.key in s.tasks and s.tasks[never.key].state,
        "the task to find no worker",
        WAIT,
        holds=lambda state: state == "no-worker",
    )
    await install(c)
    await c.cancel(never)
    await eventually_async(
        lambda: [t["name"] for t in state(s)["recent"]],
        "the task listed as recent",
        WAIT,
        holds=lambda names: names == ["before"],
    )
    assert state(s)["recent"][0]["state"] == "cancelled"


@gen_cluster(client=True, nthreads=GPU_WORKER, timeout=LONG)
async def test_cells_that_ended_before_the_plugin_are_taken_over_from_their_reports(c, s, a):
    ok = c.submit(like_a_cell, "finished", key=cell_key("ok"))
    await ok
    bad = c.submit(like_a_cell, "failed", key=cell_key("bad"))
    stopped = c.submit(like_a_cell, "stopped", key=cell_key("stopped"))
    await c.gather([bad, stopped], errors="skip")
    await eventually_async(
        lambda: [e for e in s.get_events("client-1") if e[1]["kind"] != "started"],
        "three cells' ends logged",
        WAIT,
        holds=lambda ended: len(ended) == 3,
    )
    await install(c)
    recent = {t["name"]: t for t in state(s)["recent"]}
    assert set(recent) == {"ok", "bad", "stopped"}
    assert (recent["ok"]["state"], recent["ok"]["wall"], recent["ok"]["worker"]) == (
        "finished",
        1.5,
        a.address,
    )
    assert (recent["bad"]["state"], recent["bad"]["error"]) == ("failed", "ValueError: bad batch")
    assert recent["stopped"]["state"] == "cancelled"


def failing_when_told(event: str) -> None:
    """Report a start as a cell does, wait for ``event``, then fail as a cell does."""
    from distributed import get_worker

    worker = get_worker()
    key = worker.get_current_task()
    worker.log_event("client-1", {"key": key, "kind": "started", "worker": worker.address})
    Event(event).wait(LONG)
    worker.log_event("client-1", {"key": key, "kind": "failed", "error": "ValueError: bad batch"})
    raise ValueError("bad")


@gen_cluster(client=True, nthreads=GPU_WORKER, timeout=LONG)
async def test_a_cell_running_when_the_plugin_comes_keeps_its_time_when_it_fails(c, s, a):
    bad = c.submit(failing_when_told, "fail", key=cell_key("bad"))
    await eventually_async(lambda: s.get_events("client-1"), "its start logged", WAIT)
    await install(c)
    await Event("fail").set()
    await c.gather([bad], errors="skip")
    [ended] = await eventually_async(lambda: state(s)["recent"], "the cell listed as ended", WAIT)
    assert (ended["name"], ended["state"], ended["worker"]) == ("bad", "failed", a.address)
    assert ended["wall"] is not None and ended["wall"] >= 0  # the timeline places it


# -- the pools kernels started --------------------------------------------------------------


def published(client: Client, kernel: str, state: str) -> dict:
    """A kernel's pools as its provisioner logs them: one pool, one worker in ``state``."""
    worker = {
        "name": "a100x2-1", "state": state, "started": "pid 42", "address": None,
        "since": 90.0, "idle_since": None, "error": None,
    }  # fmt: skip
    pool = {
        "kernel": kernel, "name": "a100x2", "backend": "local", "resources": {"GPU": 2.0},
        "max_workers": 1, "waiting": 1, "launched": 1, "workers": [worker],
    }  # fmt: skip
    return {"kernel": kernel, "client": client.id, "pools": [pool]}


def pool_states(snap) -> dict[str, list[str]]:
    return {p["kernel"]: [w["state"] for w in p["workers"]] for p in snap["pools"]}


@gen_cluster(client=True, nthreads=GPU_WORKER, timeout=LONG)
async def test_pools_follow_their_kernels_and_go_with_their_client(c, s, a):
    gone = await Client(s.address, asynchronous=True)
    await gone.log_event(POOLS_TOPIC, published(gone, "gone", "running"))
    await gone.close()
    kernel = await Client(s.address, asynchronous=True)
    await kernel.log_event(POOLS_TOPIC, published(kernel, "k1", "starting"))
    await c.log_event(POOLS_TOPIC, {"client": c.id, "pools": [{"name": "no shape"}]})
    await eventually_async(
        lambda: s.get_events(POOLS_TOPIC), "three pool events", WAIT, holds=lambda e: len(e) == 3
    )

    feed = await OccupancyFeed(c).start()  # the plugin starts now, from the events logged
    assert pool_states(feed.snapshot()) == {"k1": ["starting"]}
    await kernel.log_event(POOLS_TOPIC, published(kernel, "k1", "running"))
    await eventually_async(
        lambda: pool_states(feed.snapshot()),
        "the pool running",
        WAIT,
        holds=lambda pools: pools == {"k1": ["running"]},
    )
    (pool,) = feed.snapshot()["pools"]
    assert (pool["name"], pool["resources"], pool["waiting"]) == ("a100x2", {"GPU": 2}, 1)
    await kernel.close()  # its kernel went away: so do its pools
    await eventually_async(
        lambda: feed.snapshot()["pools"], "its pools gone", WAIT, holds=lambda p: p == []
    )
    await feed.close()
