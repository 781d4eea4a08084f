"""The one occupancy snapshot schema, shared by the notebook panel, the sidebar and the REST API.

A snapshot is plain JSON (these are ``TypedDict``s): what every worker has, what its running
tasks hold, what its assigned-but-waiting tasks hold, and why each queued task waits.
Amounts are numbers in the resource's own unit (bytes for ``MEMORY``/``DISK``/``SHM``).

Resources are Dask's abstract resources as the workers advertise them (``GPU``, ``MEMORY``,
``gpu``, ``GPU-A100``...; see :mod:`taskcell.cluster.names`), plus ``threads``, which every
worker has: its Dask threads, each running task holding one. ``running`` is what the tasks
that run hold; ``assigned`` is what the tasks placed on the worker but not yet started there
ask for (Dask's ``used_resources`` is their sum). ``assigned`` may exceed what is free: those
tasks wait on the worker until running ones finish. No amount is ever negative.

Lists are bounded so an update stays small whatever the queue: a worker's ``tasks`` holds
every running task and its :data:`TASKS_PER_WORKER` oldest assigned ones
(``running_tasks``/``assigned_tasks`` count them all); ``queue`` holds at most
:data:`QUEUE_LIMIT` tasks (``queued`` counts them all); ``recent`` holds the
:data:`RECENT_LIMIT` tasks that ended last.

Besides the moment, a snapshot carries the recent past: per resource, the share of the total
running tasks held in each of the last :data:`STRIP_STEPS` steps of :data:`STRIP_SECONDS`
seconds (``strips``), from the scheduler's occupancy history.

It also carries the pools of :mod:`taskcell.cluster.provision` a kernel configured or started
workers for, as each kernel last published them, for as long as that kernel's client is
connected: :class:`PoolInfo` and :class:`PoolWorker`, defined where they are written
(:mod:`taskcell.cluster.pool_records`) and re-exported here. What a task waits for is a
:class:`Wait`, a code and its numbers, likewise defined where it is produced
(:mod:`taskcell.cluster.waits`) and re-exported here.

The planner's answers travel as JSON too: :class:`SuggestionInfo` (``suggest(...).to_dict()``)
and :class:`HintInfo` (``review(...)[i].to_dict()``).

This module is the one definition: :mod:`taskcell.planner.codec` encodes and decodes it, and
the sidebar's ``labextension/src/generated.ts`` is generated from it
(:mod:`taskcell.planner.typescript`).
"""

from __future__ import annotations

from typing import Literal, TypedDict

from taskcell.cluster.pool_records import START_TOPIC as START_TOPIC
from taskcell.cluster.pool_records import PoolInfo as PoolInfo
from taskcell.cluster.pool_records import PoolWorker as PoolWorker
from taskcell.cluster.pool_records import PoolWorkerState as PoolWorkerState
from taskcell.cluster.pool_records import workers_up as workers_up
from taskcell.cluster.waits import Lack as Lack
from taskcell.cluster.waits import Wait as Wait
from taskcell.cluster.waits import WaitCode as WaitCode

#: The pseudo-resource every worker has: its Dask threads, one held by each running task.
THREADS = "threads"
#: Most assigned-but-waiting tasks a worker's ``tasks`` lists (the oldest); the rest are counted.
TASKS_PER_WORKER = 5
#: Most tasks ``queue`` lists (the oldest in each state); the rest are counted.
QUEUE_LIMIT = 100
#: Most ended tasks ``recent`` lists (the latest).
RECENT_LIMIT = 20
#: Seconds of one step of a resource's occupancy strip.
STRIP_SECONDS = 5
#: Steps in an occupancy strip: five minutes of them.
STRIP_STEPS = 60

#: running: executing on a worker; assigned: placed on a worker, waiting there for resources
#: or a thread; queued: on the scheduler, no worker chosen yet (``no-worker``, queued, or a
#: resource-annotated task still waiting for its inputs).
TaskState = Literal["running", "assigned", "queued"]

#: finished: it returned; failed: it raised (or its worker died under it too often);
#: cancelled: it was cancelled before it ended, or interrupted on its worker.
EndState = Literal["finished", "failed", "cancelled"]


class ResourceUse(TypedDict):
    """One resource on one worker (or summed over the cluster). Never negative."""

    resource: str
    total: float
    running: float
    assigned: float


class TaskInfo(TypedDict):
    """A task that holds, or waits for, resources.

    ``name`` is the cell's task name (``cell-3``, or ``--name``) for taskcell tasks and Dask's
    key prefix otherwise; ``request`` its Dask resources; ``since`` (Unix time) when it started
    running, was assigned, or was queued; ``wait`` says, for assigned and queued tasks, what
    it waits for, as a code and numbers (:class:`~taskcell.cluster.waits.Wait`; its words are
    :func:`~taskcell.cluster.waits.wait_words`).
    """

    key: str
    name: str
    request: dict[str, float]
    state: TaskState
    since: float
    worker: str | None
    wait: Wait | None


class WorkerSnapshot(TypedDict):
    """One live worker: its resources and the tasks on it."""

    address: str
    name: str
    nthreads: int
    #: Dask's memory limit of the worker in bytes (0: none).
    memory_limit: int
    resources: list[ResourceUse]
    tasks: list[TaskInfo]
    #: How many tasks run on it (all of them).
    running_tasks: int
    #: How many tasks are assigned to it and wait (all of them, whereas ``tasks`` lists at most
    #: ``TASKS_PER_WORKER`` waiting ones).
    assigned_tasks: int


class EndedTask(TypedDict):
    """A taskcell task (a cell, or a task with resources) that ended: how, where, what it used.

    ``wall`` is the seconds it ran and ``peak_memory`` its peak in bytes, as its cell measured
    them (else from when it started running, and None); ``error`` is one line: the exception
    (``ValueError: bad batch``) of a failed task.
    """

    key: str
    name: str
    request: dict[str, float]
    state: EndState
    worker: str | None
    ended: float
    wall: float | None
    peak_memory: int | None
    error: str | None


class UsageStrip(TypedDict):
    """One resource's recent past: the share of its total held by running tasks, step by step.

    ``shares[i]`` is the highest share in the step that starts ``start + i * STRIP_SECONDS``
    (from 0 to 1; None before the history begins); the last step holds the snapshot's time.
    """

    resource: str
    start: float
    shares: list[float | None]


class Snapshot(TypedDict):
    """The whole cluster at one moment.

    ``seq`` increases by one with every change the scheduler publishes; two snapshots with the
    same ``scheduler`` and ``seq`` are the same. ``dashboard`` is the link to the scheduler's
    Dask dashboard, None when it serves none.
    """

    scheduler: str
    time: float
    seq: int
    workers: list[WorkerSnapshot]
    totals: list[ResourceUse]
    queue: list[TaskInfo]
    #: How many tasks are queued in all (``queue`` lists at most ``QUEUE_LIMIT``).
    queued: int
    #: The tasks that ended last, latest first (at most ``RECENT_LIMIT``).
    recent: list[EndedTask]
    #: One per resource, from the scheduler's occupancy history (empty without one).
    strips: list[UsageStrip]
    dashboard: str | None
    #: The pools connected kernels configured or started workers for, kernel by kernel.
    pools: list[PoolInfo]


class WorkerVerdict(TypedDict):
    """Whether one live worker can run a suggested request, and if not, what it lacks."""

    address: str
    name: str
    able: bool
    reason: str


class SuggestionInfo(TypedDict):
    """The planner's answer for an input size and a workload profile.

    ``preset`` is None when no preset fits; ``line`` is then a custom ``%%task`` line when the
    need can be asked for directly, else None. ``request`` is :meth:`Resources.to_dict` output.
    """

    size: int
    profile: str
    memory: int
    disk: int
    gpu: str | None
    preset: str | None
    request: dict | None
    line: str | None
    fits: bool
    message: str
    workers: list[WorkerVerdict]


class HintInfo(TypedDict):
    """A right-sizing hint from a finished task's measured use.

    ``kind``: over-requested (used under a quarter of what it asked) or near-limit (used over
    90% of its limit); ``resource``: memory (bytes) or cpu (cores); ``preset`` and ``line``:
    what would have fit, or None.
    """

    key: str
    cell: str
    kind: Literal["over-requested", "near-limit"]
    resource: Literal["memory", "cpu"]
    requested: float
    used: float
    message: str
    preset: str | None
    line: str | None
