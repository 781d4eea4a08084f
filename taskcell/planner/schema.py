"""The one occupancy snapshot schema, shared by the notebook panel, the sidebar and the REST API.

A snapshot is plain JSON (these are ``TypedDict``s): what every worker has, what its running
tasks hold, what its assigned-but-waiting tasks hold, and why each queued task waits.
Amounts are numbers in the resource's own unit (bytes for ``MEMORY``/``DISK``/``SHM``).
"""

from __future__ import annotations

from typing import Literal, TypedDict

#: running: executing on a worker; assigned: placed on a worker, waiting there for resources
#: or a thread; queued: on the scheduler, no worker chosen yet (``no-worker`` or queued).
TaskState = Literal["running", "assigned", "queued"]


class ResourceUse(TypedDict):
    """One resource on one worker (or summed over the cluster). Never negative."""

    resource: str
    total: float
    running: float
    assigned: float


class TaskInfo(TypedDict):
    """A task that holds, or waits for, resources."""

    key: str
    name: str
    request: dict[str, float]
    state: TaskState
    since: float
    worker: str | None
    waiting_for: str | None


class WorkerSnapshot(TypedDict):
    """One live worker: its resources and the tasks on it."""

    address: str
    name: str
    nthreads: int
    resources: list[ResourceUse]
    tasks: list[TaskInfo]


class Snapshot(TypedDict):
    """The whole cluster at one moment."""

    scheduler: str
    time: float
    workers: list[WorkerSnapshot]
    totals: list[ResourceUse]
    queue: list[TaskInfo]
