"""The scheduler side of the live occupancy view: a plugin that keeps it and pushes changes.

:class:`OccupancyPlugin` runs inside the Dask scheduler. It follows every task transition
(``SchedulerPlugin.transition``), every worker that joins or leaves, and the task starts that
:class:`StartReporter` reports from each worker, and keeps, per worker, which of its processing
tasks are running and which are assigned there but still waiting. Four times a second, and only
when something changed, it publishes the workers that changed on the ``taskcell-occupancy``
topic (``scheduler.log_event``), which subscribed clients receive without asking
(``client.subscribe_topic``). A client that joins asks once for the whole state through the
``taskcell_occupancy_subscribe`` handler; nothing ever calls ``run_on_scheduler``.

It also keeps the taskcell tasks that ended last (:mod:`taskcell.planner.ended`), from the task
transitions and from what the cells' workers report on their kernels' topics, which this
plugin's ``log_event`` hook sees as the scheduler receives them, and publishes them with the
occupancy.

And it keeps the pools each kernel configured or started workers for
(:mod:`taskcell.cluster.provision`), from the ``taskcell-pools`` events their provisioners log
(those logged before it started included), and publishes them too, until the client that
logged them leaves the scheduler: a kernel that exited stopped its pools' workers, and a killed
one left them as plain workers.

Why a worker plugin: the scheduler learns which tasks run only from heartbeats (every 0.5 s to
several seconds, and not at all in ``transition``). Dask's ``WorkerState.used_resources`` counts
every task *assigned* to a worker, running or waiting there, and work stealing moves tasks without
updating it. So amounts here are summed from ``WorkerState.processing`` itself, split by the starts
the workers report, and never go below zero.

Its messages are dicts with named keys, built and read by :mod:`taskcell.planner.codec`, the one
codec; :mod:`taskcell.planner.feed` turns them into :mod:`taskcell.planner.schema` records.

This module is shipped to the scheduler by value (cloudpickle), with :mod:`taskcell.planner.ended`,
:mod:`taskcell.planner.codec` and :mod:`taskcell.spec.amounts`, so a scheduler without taskcell
installed can run it: what it uses at run time is the standard library, dask, distributed, the
codec's encoding functions, the one amount formatter, the schema's constants and the pools'
event topic.
"""

from __future__ import annotations

import heapq
import itertools
import uuid
from collections import deque
from typing import TYPE_CHECKING, Any

from distributed.diagnostics.plugin import SchedulerPlugin, WorkerPlugin
from distributed.metrics import time

from taskcell.cluster.pool_records import POOLS_TOPIC
from taskcell.cluster.submit import CELL_ANNOTATION
from taskcell.cluster.waits import Wait, lack, wait
from taskcell.planner.codec import (
    WIRE_VERSION,
    Update,
    WireEnded,
    WireSample,
    WireTask,
    WireUse,
    WireWorker,
    history_message,
    pack,
    pool_record,
    request_record,
    sample_record,
    sum_totals,
    task_record,
    update_message,
    use_record,
    worker_record,
)
from taskcell.planner.ended import EndedTasks
from taskcell.planner.schema import QUEUE_LIMIT, TASKS_PER_WORKER, THREADS, PoolInfo, TaskState

if TYPE_CHECKING:
    from distributed import Scheduler, Worker

PLUGIN_NAME = "taskcell-occupancy"
WORKER_PLUGIN_NAME = "taskcell-occupancy-starts"
#: Updates pushed to subscribed clients.
TOPIC = "taskcell-occupancy"
#: Task starts reported by the workers.
STARTED_TOPIC = "taskcell-task-started"

# Scheduler states of tasks that wait with no worker chosen, most urgent first. "waiting" (for
# inputs) is followed only for tasks that carry resource restrictions, so a large ordinary graph
# costs nothing here.
_QUEUE_STATES = ("no-worker", "waiting", "queued")


def _hashable(key: Any) -> Any:
    """A key as the scheduler holds it (msgpack may turn a tuple key into a list)."""
    if isinstance(key, list):
        return tuple(_hashable(k) for k in key)
    return key


def _task(
    ts: Any, state: TaskState, since: float, request: dict | None = None, why: Wait | None = None
) -> WireTask:
    """A task on the wire, its request read from the task unless given."""
    if request is None:
        request = request_record(ts.resource_restrictions)
    cell = (ts.annotations or {}).get(CELL_ANNOTATION)  # a task of a %%task --graph cell
    return task_record(
        key=ts.key,
        prefix=ts.prefix.name,
        request=request,
        state=state,
        since=since,
        wait=why,
        name=f"{cell}: {ts.prefix.name}" if cell else None,
    )


class StartReporter(WorkerPlugin):
    """Tell the scheduler when this worker starts a task (``executing``), batched per 50 ms."""

    name = WORKER_PLUGIN_NAME
    idempotent = True

    def __init__(self, delay: float = 0.05) -> None:
        self.delay = delay
        self.worker: Worker | None = None
        self._pending: list[tuple[Any, float]] = []

    def setup(self, worker: Worker) -> None:
        self.worker = worker
        self._pending = []

    def transition(self, key: Any, start: str, finish: str, **kwargs: Any) -> None:
        if finish != "executing" or start in ("executing", "long-running"):
            return
        if not self._pending and self.worker is not None:
            self.worker.loop.call_later(self.delay, self._flush)
        self._pending.append((key, time()))

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        if pending and self.worker is not None:
            keys, times = zip(*pending, strict=True)
            self.worker.log_event(STARTED_TOPIC, {"keys": list(keys), "times": list(times)})


class OccupancyPlugin(SchedulerPlugin):
    """Keep what every worker holds and waits for, and push changes to subscribed clients.

    Parameters
    ----------
    interval : float
        Seconds between checks for changes while a client is subscribed.
    idle_interval : float
        Seconds between checks while none is (the history still records changes).
    history : int
        Samples of the cluster totals kept for :func:`taskcell.occupancy_history`: one per
        published change (at most four a second), so 3600 cover a quarter of an hour at the
        busiest and far longer on a quiet cluster.
    """

    name = PLUGIN_NAME
    idempotent = True
    version = WIRE_VERSION

    def __init__(self, interval: float = 0.25, idle_interval: float = 1.0, history: int = 3600):
        self.interval = interval
        self.idle_interval = idle_interval
        self.history_length = history
        self.scheduler: Scheduler | None = None
        self._reset()

    # -- lifecycle -------------------------------------------------------------------------

    def _reset(self) -> None:
        """Start afresh, on a scheduler this plugin was added to."""
        # What a scheduler restart keeps: its subscribers, their numbering, the tasks that
        # ended and the kernels' pools (their clients stay connected).
        self.subscribers: set[str] = set()
        self.seq = 0
        #: Tells this plugin's sequence numbers from another's (a restarted scheduler's).
        self.epoch = uuid.uuid4().hex[:12]
        self.dashboard: int | None = None
        self.ended = EndedTasks()
        self.published_recent: list[WireEnded] = []
        #: provisioner's client id -> its kernel's pools on the wire
        self.pools: dict[str, list[PoolInfo]] = {}
        self.published_pools: list[PoolInfo] = []
        self._reset_tasks()

    def _reset_tasks(self) -> None:
        """Forget the workers and the tasks: a restarted scheduler holds no task, and its
        workers come back."""
        #: worker address -> {key: time it started}
        self.running: dict[str, dict[Any, float]] = {}
        #: key -> address of the worker it was assigned to, since when, and its request
        self.where: dict[Any, str] = {}
        self.since: dict[Any, float] = {}
        self.requests: dict[Any, dict] = {}
        self.queue: dict[str, dict[Any, float]] = {state: {} for state in _QUEUE_STATES}
        self.dirty: set[str] = set()
        self.removed: set[str] = set()
        self.queue_dirty = True
        self.published: dict[str, WireWorker] = {}
        self.published_queue: list[WireTask] = []
        self.published_queued = 0
        self.totals: dict[str, WireUse] = {}
        self.history: deque[WireSample] = deque(maxlen=getattr(self, "history_length", 3600))
        self.ended.forget_following()
        self.pools_changed = False
        self._last_check = 0.0
        self._last_sweep = 0.0
        self._lengths: dict[str, int] = {}

    async def start(self, scheduler: Scheduler) -> None:
        from tornado.ioloop import PeriodicCallback

        self.scheduler = scheduler
        self._reset()
        scheduler.handlers.update(
            {
                "taskcell_occupancy": self.handle_snapshot,
                "taskcell_occupancy_subscribe": self.handle_subscribe,
                "taskcell_occupancy_unsubscribe": self.handle_unsubscribe,
                "taskcell_occupancy_history": self.handle_history,
            }
        )
        self._seed()
        self.dashboard = self._dashboard_port()
        callback = PeriodicCallback(self._tick, self.interval * 1000)
        old = scheduler.periodic_callbacks.get(PLUGIN_NAME)
        if old is not None:
            old.stop()
        scheduler.periodic_callbacks[PLUGIN_NAME] = callback
        callback.start()

    async def close(self) -> None:
        if self.scheduler is not None:
            callback = self.scheduler.periodic_callbacks.pop(PLUGIN_NAME, None)
            if callback is not None:
                callback.stop()

    def restart(self, scheduler: Scheduler) -> None:
        self._reset_tasks()
        self.dirty.update(scheduler.workers)

    def _dashboard_port(self) -> int | None:
        """The port of the scheduler's Dask dashboard; None when it serves none (started with
        ``--no-dashboard``, or without bokeh installed)."""
        server = self.scheduler.services.get("dashboard") if self.scheduler else None
        application = getattr(self.scheduler, "http_application", None)
        if server is None or not getattr(application, "applications", None):
            return None
        return server.port

    def _seed(self) -> None:
        """Take over the state of a scheduler that ran tasks before this plugin was added."""
        assert self.scheduler is not None
        now = time()
        for ws in self.scheduler.workers.values():
            self.dirty.add(ws.address)
            # The heartbeats' view of what runs: the best there is for tasks started earlier.
            started = {ts.key: now for ts in ws.executing if ts in ws.processing}
            if started:
                self.running[ws.address] = started
            for ts in ws.processing:
                self.where[ts.key] = ws.address
                self.since[ts.key] = now
                self.ended.follow(ts)
        for ts in self.scheduler.tasks.values():
            if ts.state in ("no-worker", "queued") or (
                ts.state == "waiting" and ts.resource_restrictions
            ):
                self.queue[ts.state][ts.key] = now
                self.ended.follow(ts)
        self.ended.seed(self.scheduler.get_events(), self.scheduler.tasks)
        for _, msg in self.scheduler.get_events(POOLS_TOPIC):
            if isinstance(msg, dict) and msg.get("client") in self.scheduler.clients:
                self._pools_event(msg)

    # -- what the scheduler tells us ---------------------------------------------------------

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        address, started, assigned = None, None, None
        if start == "processing":
            address = self.where.pop(key, None)
            assigned = self.since.pop(key, None)
            self.requests.pop(key, None)
            if address is not None:
                self.dirty.add(address)
                running = self.running.get(address)
                if running:
                    started = running.pop(key, None)
        elif start in self.queue and self.queue[start].pop(key, None) is not None:
            self.queue_dirty = True
        if key in self.ended.following:
            ts = self.scheduler.tasks.get(key) if self.scheduler else None
            self.ended.transition(key, finish, ts, address, started, assigned)
        elif finish in ("processing", "no-worker", "queued", "waiting") and self.scheduler:
            ts = self.scheduler.tasks.get(key)
            if ts is not None:
                self.ended.follow(ts)
        if finish == "processing":
            ts = self.scheduler.tasks.get(key) if self.scheduler else None
            ws = ts.processing_on if ts is not None else None
            if ts is not None and ws is not None:
                self.where[key] = ws.address
                self.since[key] = time()
                self.requests[key] = request_record(ts.resource_restrictions)
                self.dirty.add(ws.address)
        elif finish in ("no-worker", "queued"):
            self.queue[finish][key] = time()
            self.queue_dirty = True
        elif finish == "waiting":
            ts = self.scheduler.tasks.get(key) if self.scheduler else None
            if ts is not None and ts.resource_restrictions:
                self.queue[finish][key] = time()
                self.queue_dirty = True

    def add_worker(self, scheduler: Scheduler, worker: str) -> None:
        self.dirty.add(worker)
        self.removed.discard(worker)
        self.queue_dirty = True  # a task with no worker may now have one

    def remove_worker(self, scheduler: Scheduler, worker: str, **kwargs: Any) -> None:
        self.running.pop(worker, None)
        self.dirty.discard(worker)
        self._lengths.pop(worker, None)
        self.removed.add(worker)
        self.queue_dirty = True

    def remove_client(self, scheduler: Scheduler, client: str) -> None:
        self.subscribers.discard(client)
        if self.pools.pop(client, None) is not None:
            self.pools_changed = True

    def log_event(self, topic: str, msg: Any) -> None:
        if not isinstance(msg, dict) or self.scheduler is None:
            return
        if topic == POOLS_TOPIC:
            if msg.get("client") in self.scheduler.clients:  # not one sent as its client left
                self._pools_event(msg)
            return
        if self.ended.event(msg) or topic != STARTED_TOPIC:
            return
        address = msg.get("worker")
        for key, started in zip(msg.get("keys", ()), msg.get("times", ()), strict=False):
            ts = self.scheduler.tasks.get(_hashable(key))
            ws = ts.processing_on if ts is not None else None
            if ts is None or ws is None or ws.address != address or ts.state != "processing":
                continue  # finished, released or moved before the report arrived
            self.running.setdefault(address, {})[ts.key] = started
            self.where[ts.key] = address  # work stealing may have moved it here unannounced
            self.dirty.add(address)

    def _pools_event(self, msg: dict) -> None:
        """Take the pools a kernel's provisioner published; ignore a malformed event."""
        client = msg.get("client")
        if not isinstance(client, str):
            return
        try:
            records = [pool_record(p) for p in msg["pools"]]
        except (KeyError, TypeError, ValueError):
            return
        if records != self.pools.get(client):
            self.pools[client] = records
            self.pools_changed = True

    # -- handlers clients call ---------------------------------------------------------------

    def handle_snapshot(self) -> Update | dict[str, Any]:
        """The whole state now (``taskcell_occupancy``), packed when large."""
        self.tick(force=True)
        return pack(self.full())

    def handle_subscribe(self, client: str) -> Update | dict[str, Any]:
        """Start pushing updates to ``client``; the whole state to start from."""
        self.subscribers.add(client)
        return self.handle_snapshot()

    def handle_unsubscribe(self, client: str) -> None:
        self.subscribers.discard(client)

    def handle_history(self) -> dict:
        """The samples of the cluster totals kept (``{"samples": [sample, ...]}``, oldest
        first; see :mod:`taskcell.planner.codec`)."""
        self.tick(force=True)
        return history_message(list(self.history))

    # -- building updates --------------------------------------------------------------------

    def full(self) -> Update:
        """The whole state as last published."""
        return update_message(
            epoch=self.epoch,
            seq=self.seq,
            time=time(),
            scheduler=self.scheduler.address if self.scheduler else "",
            workers=list(self.published.values()),
            removed=[],
            queue=self.published_queue,
            queued=sum(len(q) for q in self.queue.values()),
            totals=self.totals,
            recent=self.published_recent,
            dashboard=self.dashboard,
            pools=self.published_pools,
            full=True,
        )

    @property
    def _scheduler(self) -> Scheduler:
        """``scheduler``, never None: for what runs only once the plugin has started on one."""
        assert self.scheduler is not None
        return self.scheduler

    def _tick(self) -> None:
        self.tick()

    def tick(self, force: bool = False) -> Update | None:
        """Publish what changed since the last tick, if anything; the update, or None."""
        if self.scheduler is None:
            return None
        now = time()
        if not force and not self.subscribers and now - self._last_check < self.idle_interval:
            return None
        self._last_check = now
        if force or now - self._last_sweep > 2:
            self._sweep(now)
        changed = []
        for address in self.dirty:
            ws = self.scheduler.workers.get(address)
            if ws is None:
                continue
            record = self.worker_record(ws)
            if record != self.published.get(address):
                self.published[address] = record
                changed.append(record)
        self.dirty.clear()
        removed = [a for a in self.removed if self.published.pop(a, None) is not None]
        self.removed.clear()
        queue = None
        if self.queue_dirty:
            self.queue_dirty = False
            queue = self.queue_records()
            if queue == self.published_queue:
                queue = None
            else:
                self.published_queue = queue
        recent = None
        if self.ended.changed:
            self.ended.changed = False
            recent = self.published_recent = self.ended.records()
        pools = None
        if self.pools_changed:
            self.pools_changed = False
            pools = self.published_pools = [p for ps in self.pools.values() for p in ps]
        # The count of waiting tasks changes where the first QUEUE_LIMIT records do not.
        queued = sum(len(q) for q in self.queue.values())
        recount = queued != self.published_queued
        news = changed or removed or recount
        if not news and queue is None and recent is None and pools is None:
            return None
        self.published_queued = queued
        self.seq += 1
        self.totals = sum_totals(self.published.values())
        self.history.append(sample_record(time=now, queued=queued, totals=self.totals))
        update = update_message(
            epoch=self.epoch,
            seq=self.seq,
            time=now,
            scheduler=self.scheduler.address,
            workers=changed,
            removed=removed,
            queue=queue,
            queued=queued,
            totals=self.totals,
            recent=recent,
            dashboard=self.dashboard,
            pools=pools,
            full=False,
        )
        if self.subscribers:
            self.scheduler.log_event(TOPIC, pack(update))
        return update

    def _sweep(self, now: float) -> None:
        """Catch what no transition announces: work stealing, tasks seen only by heartbeats."""
        self._last_sweep = now
        for address, ws in self._scheduler.workers.items():
            n = len(ws.processing)
            if self._lengths.get(address) != n:
                self._lengths[address] = n
                self.dirty.add(address)
            if ws.executing and address not in self.running:
                started = {ts.key: now for ts in ws.executing if ts in ws.processing}
                if started:
                    self.running[address] = started
                    self.dirty.add(address)

    def worker_record(self, ws: Any) -> WireWorker:
        """One worker on the wire: its resources split into running and assigned, its tasks."""
        started = self.running.get(ws.address, {})
        totals = ws.resources
        running = dict.fromkeys(totals, 0.0)
        assigned = dict.fromkeys(totals, 0.0)
        run_tasks, waiting = [], []
        busy_threads = 0
        for ts in ws.processing:
            if ts.key in started:
                sums = running
                run_tasks.append(ts)
                if ts not in ws.long_running:
                    busy_threads += 1
            else:
                sums = assigned
                waiting.append(ts)
            if ts.resource_restrictions:
                for resource, asked in ts.resource_restrictions.items():
                    sums[resource] = sums.get(resource, 0.0) + asked
        resources = {THREADS: use_record(ws.nthreads, busy_threads, len(waiting))}
        for resource, total in totals.items():
            resources[resource] = use_record(total, running[resource], assigned[resource])
        since, requests = self.since, self.requests
        tasks = [_task(ts, "running", started[ts.key], requests.get(ts.key)) for ts in run_tasks]
        if len(waiting) > TASKS_PER_WORKER:
            waiting = heapq.nsmallest(TASKS_PER_WORKER, waiting, key=lambda t: since.get(t.key, 0))
        else:
            waiting.sort(key=lambda t: since.get(t.key, 0.0))
        tasks += [
            _task(ts, "assigned", since.get(ts.key, 0.0), requests.get(ts.key)) for ts in waiting
        ]
        return worker_record(
            address=ws.address,
            name=str(ws.name),
            nthreads=ws.nthreads,
            memory_limit=int(ws.memory_limit or 0),
            resources=resources,
            tasks=tasks,
            running_tasks=len(run_tasks),
            assigned_tasks=len(ws.processing) - len(run_tasks),
        )

    def queue_records(self) -> list[WireTask]:
        """The tasks no worker holds yet, oldest first within each state, at most QUEUE_LIMIT."""
        out: list[WireTask] = []
        reasons: dict[Any, Wait] = {}
        for state in _QUEUE_STATES:
            room = QUEUE_LIMIT - len(out)
            for key, since in itertools.islice(self.queue[state].items(), room):
                ts = self._scheduler.tasks.get(key)
                if ts is None:
                    continue
                out.append(_task(ts, "queued", since, why=self._queued_reason(ts, reasons)))
        return out

    def _queued_reason(self, ts: Any, cache: dict[Any, Wait]) -> Wait:
        if ts.state == "waiting":
            return wait("inputs", count=len(ts.waiting_on or ()))
        if ts.state == "queued":
            return wait("free-thread")
        signature = (
            tuple(sorted((ts.resource_restrictions or {}).items())),
            tuple(sorted(map(str, ts.worker_restrictions or ()))),
            tuple(sorted(map(str, ts.host_restrictions or ()))),
        )
        if signature not in cache:
            cache[signature] = self._no_worker_reason(ts)
        return cache[signature]

    def _no_worker_reason(self, ts: Any) -> Wait:
        workers = list(self._scheduler.workers.values())
        if not workers:
            return wait("no-worker")
        if ts.worker_restrictions or ts.host_restrictions:
            return wait("restricted")
        restrictions = ts.resource_restrictions or {}
        lacking = []
        for resource, asked in restrictions.items():
            best = max(workers, key=lambda ws: ws.resources.get(resource, 0.0))
            most = best.resources.get(resource, 0.0)
            if most < asked:
                lacking.append(lack(resource, asked, most, on=best.address))
        if lacking:
            return wait("no-capable-worker", lacking=lacking)
        return wait("not-together", request=restrictions)
