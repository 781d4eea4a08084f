"""How a snapshot is shown: grouping, order and every label, one rule set for panel and sidebar.

:func:`snapshot_view` turns a :class:`~taskcell.planner.schema.Snapshot` into a
:class:`SnapshotView` in which every word and number a person reads is already written.
The notebook panel (:mod:`taskcell.widgets.panel_html`) draws it as HTML; the Jupyter server
computes the same record for the JupyterLab sidebar (:mod:`taskcell.extension.sidebar_view`), which
only draws it, typed by the declarations generated from this module
(:mod:`taskcell.planner.typescript`).

Times are the scheduler's (Unix seconds on its clock), and so is ``now``. A label that holds a
duration growing with the clock (how long a task has run or waited, how long ago one ended, how
long a pool's worker has been starting or idle) is a :class:`Ticking`: its words as of ``now``,
and the moment they count from, so the sidebar rewrites them every second between updates.

The rules, stated once:

- Workers with identical resources (names and totals) form a group; the largest group comes
  first (on a tie, the group holding the smallest address). Its title says how many workers,
  what each has and, for more than one, how many are busy.
- In a group, busy workers (running or waiting tasks) come first, then idle ones, each ordered
  by name, then address. In a group of more than :data:`IDLE_ROWS` workers, two or more idle ones
  fold into one line naming the first :data:`FOLD_NAMES`.
- A worker shows one bar per resource (running solid, assigned hatched, capped at the total),
  its :data:`RUNNING_SHOWN` oldest running tasks, and how many more run and how many wait.
- Waiting lists the tasks queued on the scheduler (in the snapshot's order), then those assigned
  to a worker and waiting there (oldest first), at most :data:`WAITING_ROWS`, each with what it
  waits for, in :func:`~taskcell.cluster.waits.wait_words`'s words (the cell's status line
  uses the same). A queued task that no live worker can run (its wait's code, never its
  words, says so) but a listed pool's worker will (one is starting, or tasks wait for the
  pool) waits for that pool's worker to start.
- Ended lists the snapshot's recent tasks, latest first: how each ended, on which worker (by
  name where it is still connected), how long it ran, its peak memory, how long ago, its error;
  with the cells, workers and states they hold, to filter them by.
- A strip per resource of the totals shows, step by step over the last minutes, the highest
  share running tasks held; steps after the snapshot's last one hold its current share.
- The timeline shows, per worker, the tasks that ran on it in the last :data:`TIMELINE_SECONDS`
  (the running ones up to now), each coloured by its cell: one of :data:`CELL_PALETTE`,
  the same for a cell's name in every view. At most :data:`TIMELINE_ROWS` workers, by name.
- Pools are listed in the snapshot's order, each titled with its name and backend (and the
  first :data:`KERNEL_SHOWN` characters of its kernel's id where another listed pool has its
  name), its shape, how many of its ``max_workers`` are starting, running or retiring, and how
  many tasks wait for it (and whether another may start: fewer are up); then its workers as
  published, each with its state: starting for how long, running, idle for how long,
  retiring, retired or failed (with the reason).
"""

from __future__ import annotations

import functools
import math
import zlib
from collections.abc import Iterable, Sequence
from typing import TypedDict

from taskcell.cluster.waits import Wait, wait, wait_words
from taskcell.planner.schema import (
    STRIP_SECONDS,
    STRIP_STEPS,
    EndedTask,
    EndState,
    PoolInfo,
    PoolWorker,
    PoolWorkerState,
    ResourceUse,
    Snapshot,
    TaskInfo,
    TaskState,
    UsageStrip,
    WorkerSnapshot,
    workers_up,
)
from taskcell.spec.amounts import show_amount as _show_amount
from taskcell.spec.amounts import show_bytes
from taskcell.spec.resources import meets

#: An amount's words, remembered: a cluster's workers repeat the same few amounts, bar by bar.
show_amount = functools.lru_cache(maxsize=4096)(_show_amount)

#: A group with more workers than this folds its idle ones into one line.
IDLE_ROWS = 8
#: Most idle workers a folded line names.
FOLD_NAMES = 12
#: Most running tasks listed per worker; the rest are counted.
RUNNING_SHOWN = 4
#: Most waiting tasks listed; the rest are counted.
WAITING_ROWS = 50
#: Characters of a kernel's id a pool's title shows, where two kernels have a pool of its name.
KERNEL_SHOWN = 8
#: Seconds of the past the timeline shows.
TIMELINE_SECONDS = 300
#: Most workers the timeline shows (those with tasks in it, by name); the rest are counted.
TIMELINE_ROWS = 30
#: The colours that tell cells apart on the timeline (Tableau 10: they read on light and dark
#: themes alike).
CELL_PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)
#: The legend's words for the solid part of a bar.
LEGEND_RUNNING = "running"
#: The legend's words for the hatched part of a bar.
LEGEND_ASSIGNED = "assigned, waiting on the worker"


class Ticking(TypedDict):
    """Words that hold a duration growing with the clock: ``"1m15s"``, ``"12s ago"``.

    ``text`` is them as of the view's ``now``; the sidebar writes ``before``, the duration from
    ``since`` to its own (scheduler-clock) now as :func:`duration` writes it, then ``after``,
    every second. ``since`` is None for words that do not change (``text`` alone then).
    """

    text: str
    since: float | None
    before: str
    after: str


class BarView(TypedDict):
    """One resource as a bar: its amounts, the shares of the bar they fill, and their words."""

    resource: str
    total: float
    running: float
    assigned: float
    #: Share of the bar held by running tasks, from 0 to 1.
    running_share: float
    #: Share asked for by assigned tasks that wait, capped at what running ones leave.
    assigned_share: float
    #: Beside the bar: "1 of 2 GPU in use, 1 waiting".
    label: str
    #: Its tooltip: "GPU: 1 of 2 held by running tasks, 1 asked for by tasks waiting on it".
    title: str
    #: Running and waiting tasks ask for more than the total (the waiting ones queue there).
    oversubscribed: bool


class TaskView(TypedDict):
    """One task as a line: its name, what it asks, where it is and what it waits for."""

    key: str
    #: Its name, else its key.
    name: str
    state: TaskState
    #: "GPU=1, MEMORY=4 GiB", or "a thread" for a task that asks for no resources.
    request: str
    #: "on <worker address>", or "queued" for a task no worker holds yet.
    where: str
    #: How long it has run, or waited: "1m15s".
    waited: Ticking
    #: What it waits for, in the words the cell's status line uses too
    #: (:func:`~taskcell.cluster.waits.wait_words`), else None.
    waiting_for: str | None


class WorkerView(TypedDict):
    """One worker as a row."""

    address: str
    #: Its name, else its address.
    name: str
    busy: bool
    bars: list[BarView]
    #: Its oldest running tasks, at most ``RUNNING_SHOWN``.
    running: list[TaskView]
    #: "+3 more running" when not every running task is listed, else None.
    more_running: str | None
    #: "2 waiting" when tasks wait on it, else None.
    waiting: str | None


class GroupView(TypedDict):
    """Workers with identical resources."""

    #: "3 workers with threads 4, GPU 2 · 1 busy".
    title: str
    #: The resources each worker of the group has, in order: the bars' column heads.
    resources: list[str]
    #: The rows drawn: busy workers, then idle ones unless they fold.
    workers: list[WorkerView]
    #: "147 idle: w003, w004, ..." when idle workers fold into one line, else None.
    folded: str | None


class EndedView(TypedDict):
    """One task that ended, as a line."""

    key: str
    name: str
    state: EndState
    #: Where it ran: the worker's name where it is connected, else its address, else
    #: "never started".
    worker: str
    #: "gpu-box · 4.2s · peak 14.2 MiB · 12s ago": where, how long, its peak memory, when.
    detail: Ticking
    #: The failed task's error in one line, else None.
    error: str | None


class EndedFilters(TypedDict):
    """What the ended tasks can be filtered by: the values they hold, each sorted."""

    cells: list[str]
    workers: list[str]
    states: list[EndState]


class SpanView(TypedDict):
    """A task on the timeline: when it ran, from ``start`` to ``end`` (None: it runs now)."""

    key: str
    name: str
    state: str
    start: float
    end: float | None
    #: Its cell's colour, an index into ``CELL_PALETTE``.
    color: int
    #: Its tooltip: "cell-3 · finished · 4.2s".
    title: str


class TimelineRow(TypedDict):
    """One worker's tasks on the timeline, oldest first."""

    worker: str
    address: str
    spans: list[SpanView]


class CellColor(TypedDict):
    """A cell on the timeline and its colour, for the legend."""

    name: str
    color: int


class TimelineView(TypedDict):
    """Each worker's tasks over the last ``seconds``, coloured by cell."""

    seconds: int
    rows: list[TimelineRow]
    #: The cells shown, by name.
    cells: list[CellColor]
    #: "and 3 more workers" when not every worker with tasks is shown, else None.
    more: str | None
    #: "No task ran in the last 5 min." when none did, else None.
    note: str | None


class StripView(TypedDict):
    """One resource's share held by running tasks over the last ``STRIP_STEPS`` steps."""

    resource: str
    #: Oldest first, from 0 to 1; None where the history does not reach.
    shares: list[float | None]
    #: Its tooltip: "GPU over the last 5 min: at most 50% held by running tasks".
    title: str


class PoolWorkerView(TypedDict):
    """A worker a pool started, as a line."""

    name: str
    state: PoolWorkerState
    #: "starting for 12s (pid 4242)", "running", "idle 1m05s", "retiring", "retired",
    #: "retired: the kernel closed", "failed: <why>".
    label: Ticking
    #: Its worker's address once it is connected, else None.
    address: str | None
    #: Its tooltip: what was started and its address, else its name.
    title: str


class PoolView(TypedDict):
    """A pool of one kernel: its title, shape, counts and workers."""

    name: str
    #: The id of the kernel whose pool it is.
    kernel: str
    #: "a100x2 · slurm", and " · kernel 1f2e3d4c" where another kernel has an a100x2 too.
    title: str
    #: What its workers advertise: "CPU=8, MEMORY=32 GiB, GPU=2, GPU-A100=2".
    shape: str
    #: "1 of 2 workers · 3 tasks waiting": its workers starting, running or retiring.
    detail: str
    #: Whether another worker may start (fewer than its max_workers are up): the sidebar
    #: offers to start one.
    startable: bool
    workers: list[PoolWorkerView]


class SnapshotView(TypedDict):
    """A whole snapshot as it is shown."""

    #: The moment (Unix seconds, the scheduler's clock) its labels were written for.
    now: float
    #: "2 workers · 1 running · 1 waiting on workers · 0 queued".
    summary: str
    #: How many workers are connected.
    worker_count: int
    totals: list[BarView]
    groups: list[GroupView]
    #: "No worker is connected to the scheduler." when none is, else None.
    no_workers: str | None
    #: "Waiting: 3": how many tasks wait, queued or assigned.
    waiting_title: str
    #: Queued tasks, then assigned ones, at most ``WAITING_ROWS``.
    waiting: list[TaskView]
    #: "and 12 more" when not every waiting task is listed, "Nothing waits." when none does.
    waiting_note: str | None
    #: "Ended: 3".
    ended_title: str
    #: The tasks that ended last, latest first.
    ended: list[EndedView]
    #: "Nothing has ended yet." when none has, else None.
    ended_note: str | None
    ended_filters: EndedFilters
    timeline: TimelineView
    #: One per resource of the totals, in their order.
    strips: list[StripView]
    #: The link to the scheduler's Dask dashboard, or None.
    dashboard: str | None
    #: "Pools: 2".
    pools_title: str
    #: The pools kernels configured or started workers for; none: no pool section is shown.
    pools: list[PoolView]


def plural(n: int, word: str) -> str:
    """``1 worker``, ``2 workers``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def duration(seconds: float) -> str:
    """``75`` -> ``"1m15s"``; ``4000`` -> ``"1h06m"``; never negative."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def clock_offset(sent: float, remote: float, received: float) -> float:
    """Seconds to add to a local clock to read the scheduler's: ``remote`` is the scheduler's
    time read by a call sent at ``sent`` and answered at ``received`` (local times), taken as
    read halfway."""
    return remote - (sent + received) / 2


def ticking(before: str, since: float, after: str, now: float) -> Ticking:
    """``before`` + the duration since ``since`` + ``after``, as of ``now``."""
    text = f"{before}{duration(now - since)}{after}"
    return Ticking(text=text, since=since, before=before, after=after)


def fixed(text: str) -> Ticking:
    """Words that do not change with the clock."""
    return Ticking(text=text, since=None, before=text, after="")


def seconds_label(seconds: float) -> str:
    """How long a task ran: ``4.25`` -> ``"4.2s"`` (tenths, cut, under a minute), else as
    :func:`duration`."""
    if seconds >= 60:
        return duration(seconds)
    tenths = max(0, int(seconds * 10))
    return f"{tenths // 10}.{tenths % 10}s"


def percent(share: float) -> str:
    """``0.5`` -> ``"50%"``, rounded half up."""
    return f"{math.floor(share * 100 + 0.5)}%"


def request_label(request: dict[str, float]) -> str:
    """``{"GPU": 1}`` -> ``"GPU=1"``; a task that asks for nothing needs ``"a thread"``."""
    return ", ".join(f"{r}={show_amount(r, a)}" for r, a in request.items()) or "a thread"


def cell_color(name: str) -> int:
    """The colour of a cell's tasks on the timeline: the same for a name in every view."""
    return zlib.crc32(name.encode()) % len(CELL_PALETTE)


def bar_view(use: ResourceUse) -> BarView:
    """One resource's bar, shares and words."""
    name, total, running, assigned = use["resource"], use["total"], use["running"], use["assigned"]
    running_share = min(running / total, 1.0) if total > 0 else 0.0
    assigned_share = min(assigned / total, 1.0 - running_share) if total > 0 else 0.0
    label = f"{show_amount(name, running)} of {show_amount(name, total)} {name} in use"
    if assigned > 0:
        label += f", {show_amount(name, assigned)} waiting"
    title = (
        f"{name}: {show_amount(name, running)} of {show_amount(name, total)} held by running "
        f"tasks, {show_amount(name, assigned)} asked for by tasks waiting on it"
    )
    return BarView(
        resource=name,
        total=total,
        running=running,
        assigned=assigned,
        running_share=running_share,
        assigned_share=assigned_share,
        label=label,
        title=title,
        oversubscribed=running + assigned > total,
    )


def pool_waited_for(task: TaskInfo, pools: Sequence[PoolInfo]) -> Wait | None:
    """What a task no live worker can run waits for, when a listed pool's worker will run it:
    a worker of that pool starting, or tasks claimed for it. None otherwise. Decided from the
    wait's code, never its words."""
    waited = task["wait"]
    if task["state"] != "queued" or waited is None or waited["code"] != "no-capable-worker":
        return None
    for pool in pools:
        starting = [w for w in pool["workers"] if w["state"] == "starting"]
        if (starting or pool["waiting"]) and meets(pool["resources"], task["request"]):
            started = next((w["started"] for w in starting if w["started"]), "")
            return wait("pool-starting", pool=pool["name"], where=started or None)
    return None


def task_view(task: TaskInfo, now: float, pools: Sequence[PoolInfo] = ()) -> TaskView:
    """One task's line, its wait measured up to ``now``; ``pools`` say what a task no live worker
    can run waits for (see :func:`pool_waited_for`). Its words are :func:`wait_words`'s, as the
    cell's status line's are."""
    waited = pool_waited_for(task, pools) or task["wait"]
    return TaskView(
        key=task["key"],
        name=task["name"] or task["key"],
        state=task["state"],
        request=request_label(task["request"]),
        where=f"on {task['worker']}" if task["worker"] else "queued",
        waited=ticking("", task["since"], "", now),
        waiting_for=wait_words(waited) if waited is not None else None,
    )


def _label(worker: WorkerSnapshot) -> str:
    return worker["name"] or worker["address"]


def _busy(worker: WorkerSnapshot) -> bool:
    return bool(worker["running_tasks"] or worker["assigned_tasks"])


def _running(worker: WorkerSnapshot) -> list[TaskInfo]:
    """A worker's running tasks, oldest first."""
    return sorted(
        (t for t in worker["tasks"] if t["state"] == "running"),
        key=lambda t: (t["since"], t["key"]),
    )


def worker_view(worker: WorkerSnapshot, now: float) -> WorkerView:
    """One worker's row: bars, oldest running tasks, counts of the rest."""
    running = _running(worker)
    hidden = worker["running_tasks"] - min(len(running), RUNNING_SHOWN)
    waiting = worker["assigned_tasks"]
    return WorkerView(
        address=worker["address"],
        name=_label(worker),
        busy=_busy(worker),
        bars=[bar_view(u) for u in worker["resources"]],
        running=[task_view(t, now) for t in running[:RUNNING_SHOWN]],
        more_running=f"+{hidden} more running" if hidden > 0 else None,
        waiting=f"{waiting} waiting" if waiting else None,
    )


def _order(worker: WorkerSnapshot) -> tuple[str, str]:
    return _label(worker), worker["address"]


def groups(workers: Iterable[WorkerSnapshot]) -> list[list[WorkerSnapshot]]:
    """Workers with identical resources together, largest group first."""
    by: dict[tuple, list[WorkerSnapshot]] = {}
    for w in workers:
        by.setdefault(tuple((u["resource"], u["total"]) for u in w["resources"]), []).append(w)
    return sorted(by.values(), key=lambda g: (-len(g), min(w["address"] for w in g)))


def group_view(group: list[WorkerSnapshot], now: float) -> GroupView:
    """One group: its title, its rows, and its idle workers folded when there are many."""
    first = group[0]
    has = ", ".join(
        f"{u['resource']} {show_amount(u['resource'], u['total'])}" for u in first["resources"]
    )
    busy = sorted((w for w in group if _busy(w)), key=_order)
    idle = sorted((w for w in group if not _busy(w)), key=_order)
    title = f"{plural(len(group), 'worker')} with {has}"
    if len(group) > 1:
        title += f" · {len(busy)} busy"
    folded = None
    if len(group) > IDLE_ROWS and len(idle) > 1:
        names = ", ".join(_label(w) for w in idle[:FOLD_NAMES])
        folded = f"{len(idle)} idle: {names}" + (", ..." if len(idle) > FOLD_NAMES else "")
        idle = []
    return GroupView(
        title=title,
        resources=[u["resource"] for u in first["resources"]],
        workers=[worker_view(w, now) for w in busy + idle],
        folded=folded,
    )


def waiting_tasks(snap: Snapshot) -> list[TaskInfo]:
    """Tasks waiting for something: queued on the scheduler, then assigned on a worker."""
    assigned = [t for w in snap["workers"] for t in w["tasks"] if t["state"] == "assigned"]
    return list(snap["queue"]) + sorted(assigned, key=lambda t: (t["since"], t["key"]))


def _ended_worker(task: EndedTask, names: dict[str, str]) -> str:
    worker = task["worker"]
    return names.get(worker, worker) if worker else "never started"


def ended_view(task: EndedTask, names: dict[str, str], now: float) -> EndedView:
    """One ended task's line; ``names`` maps the addresses of live workers to their names."""
    worker = _ended_worker(task, names)
    parts = [worker]
    if task["wall"] is not None:
        parts.append(seconds_label(task["wall"]))
    if task["peak_memory"] is not None:
        parts.append(f"peak {show_bytes(task['peak_memory'])}")
    return EndedView(
        key=task["key"],
        name=task["name"] or task["key"],
        state=task["state"],
        worker=worker,
        detail=ticking(" · ".join(parts) + " · ", task["ended"], " ago", now),
        error=task["error"],
    )


def ended_filters(ended: Sequence[EndedView]) -> EndedFilters:
    """The cells, workers and states the ended tasks hold."""
    return EndedFilters(
        cells=sorted({t["name"] for t in ended}),
        workers=sorted({t["worker"] for t in ended}),
        states=sorted({t["state"] for t in ended}),
    )


def _span(key: str, name: str, state: str, start: float, end: float | None) -> SpanView:
    took = f" · {seconds_label(end - start)}" if end is not None else ""
    return SpanView(
        key=key,
        name=name,
        state=state,
        start=start,
        end=end,
        color=cell_color(name),
        title=f"{name} · {state}{took}",
    )


def timeline_view(snap: Snapshot, names: dict[str, str], now: float) -> TimelineView:
    """Each worker's tasks of the last :data:`TIMELINE_SECONDS`: those that ended (from when
    they started, their wall time before they ended) and those running up to ``now``."""
    start = now - TIMELINE_SECONDS
    rows: dict[str, list[SpanView]] = {}
    for ended in snap["recent"]:
        if ended["worker"] and ended["wall"] is not None and ended["ended"] >= start:
            name = ended["name"] or ended["key"]
            began = ended["ended"] - ended["wall"]
            span = _span(ended["key"], name, ended["state"], began, ended["ended"])
            rows.setdefault(ended["worker"], []).append(span)
    for worker in snap["workers"]:
        for task in _running(worker):
            span = _span(task["key"], task["name"] or task["key"], "running", task["since"], None)
            rows.setdefault(worker["address"], []).append(span)
    order = sorted(rows, key=lambda address: (names.get(address, address), address))
    shown = order[:TIMELINE_ROWS]
    cells = sorted({s["name"] for a in shown for s in rows[a]})
    minutes = TIMELINE_SECONDS // 60
    return TimelineView(
        seconds=TIMELINE_SECONDS,
        rows=[
            TimelineRow(
                worker=names.get(a, a),
                address=a,
                spans=sorted(rows[a], key=lambda s: (s["start"], s["key"])),
            )
            for a in shown
        ],
        cells=[CellColor(name=c, color=cell_color(c)) for c in cells],
        more=f"and {plural(len(order) - len(shown), 'more worker')}"
        if order[len(shown) :]
        else None,
        note=None if rows else f"No task ran in the last {minutes} min.",
    )


def strip_view(resource: str, strip: UsageStrip | None, current: float, now: float) -> StripView:
    """A resource's strip up to ``now``: its steps, then ``current`` (the share running tasks
    hold now) in the steps since the snapshot's last one."""
    last = math.floor(now / STRIP_SECONDS)
    known = strip["shares"] if strip else []
    offset = math.floor(strip["start"] / STRIP_SECONDS) if strip else last + 1
    shares: list[float | None] = []
    for step in range(last - STRIP_STEPS + 1, last + 1):
        i = step - offset
        shares.append(None if i < 0 else known[i] if i < len(known) else current)
    seen = [s for s in shares if s is not None]
    minutes = STRIP_SECONDS * STRIP_STEPS // 60
    title = f"{resource} over the last {minutes} min: "
    title += f"at most {percent(max(seen))} held by running tasks" if seen else "no history yet"
    return StripView(resource=resource, shares=shares, title=title)


def pool_worker_view(worker: PoolWorker, now: float) -> PoolWorkerView:
    """One pool worker's line, how long it has started or idled measured up to ``now``."""
    state, error = worker["state"], worker["error"]
    if state == "starting":
        started = f" ({worker['started']})" if worker["started"] else ""
        label = ticking("starting for ", worker["since"], started, now)
    elif state == "running" and worker["idle_since"] is not None:
        label = ticking("idle ", worker["idle_since"], "", now)
    elif state in ("retired", "failed") and error:
        label = fixed(f"{state}: {error}")
    else:
        label = fixed(state)
    title = " · ".join(t for t in (worker["started"], worker["address"]) if t) or worker["name"]
    return PoolWorkerView(
        name=worker["name"], state=state, label=label, title=title, address=worker["address"]
    )


def pool_view(pool: PoolInfo, shared: bool, now: float) -> PoolView:
    """One pool's lines; ``shared``: another listed pool has its name, so its kernel is named."""
    title = f"{pool['name']} · {pool['backend']}"
    if shared:
        title += f" · kernel {pool['kernel'][:KERNEL_SHOWN]}"
    active = workers_up(pool)
    detail = f"{active} of {plural(pool['max_workers'], 'worker')}"
    detail += f" · {plural(pool['waiting'], 'task')} waiting"
    return PoolView(
        name=pool["name"],
        kernel=pool["kernel"],
        title=title,
        shape=request_label(pool["resources"]),
        detail=detail,
        startable=active < pool["max_workers"],
        workers=[pool_worker_view(w, now) for w in pool["workers"]],
    )


def snapshot_view(snap: Snapshot, now: float) -> SnapshotView:
    """The whole snapshot as shown, waits measured up to ``now`` (Unix time, the scheduler's
    clock).

    Examples
    --------
    >>> view = snapshot_view(taskcell.planner.snapshot(), time.time())  # doctest: +SKIP
    >>> [g["title"] for g in view["groups"]]                            # doctest: +SKIP
    ['1 worker with threads 2, GPU 2']
    """
    workers = snap["workers"]
    running = sum(w["running_tasks"] for w in workers)
    assigned = sum(w["assigned_tasks"] for w in workers)
    summary = (
        f"{plural(len(workers), 'worker')} · {running} running · {assigned} waiting on workers"
        f" · {snap['queued']} queued"
    )
    waiting = waiting_tasks(snap)
    total_waiting = snap["queued"] + assigned
    more = total_waiting - min(len(waiting), WAITING_ROWS)
    if not waiting and not total_waiting:
        note: str | None = "Nothing waits."
    else:
        note = f"and {more} more" if more > 0 else None
    names = {w["address"]: _label(w) for w in workers}
    by_resource = {s["resource"]: s for s in snap["strips"]}
    totals = [bar_view(u) for u in snap["totals"]]
    names_of_pools = [p["name"] for p in snap["pools"]]
    ended = [ended_view(t, names, now) for t in snap["recent"]]
    return SnapshotView(
        now=now,
        summary=summary,
        worker_count=len(workers),
        totals=totals,
        groups=[group_view(g, now) for g in groups(workers)],
        no_workers=None if workers else "No worker is connected to the scheduler.",
        waiting_title=f"Waiting: {total_waiting}",
        waiting=[task_view(t, now, snap["pools"]) for t in waiting[:WAITING_ROWS]],
        waiting_note=note,
        ended_title=f"Ended: {len(snap['recent'])}",
        ended=ended,
        ended_note=None if snap["recent"] else "Nothing has ended yet.",
        ended_filters=ended_filters(ended),
        timeline=timeline_view(snap, names, now),
        strips=[
            strip_view(b["resource"], by_resource.get(b["resource"]), b["running_share"], now)
            for b in totals
        ],
        dashboard=snap["dashboard"],
        pools_title=f"Pools: {len(snap['pools'])}",
        pools=[pool_view(p, names_of_pools.count(p["name"]) > 1, now) for p in snap["pools"]],
    )
