"""The records of a kernel's pools, defined once: what its provisioner publishes, what the
occupancy snapshot carries and what the notebook panel and the sidebar show.

A kernel's provisioner (:mod:`taskcell.cluster.provision`) logs its pools, each a
:class:`PoolInfo`, on the scheduler's :data:`POOLS_TOPIC` whenever they change, as
``{"kernel": id, "client": its client's id, "pools": [PoolInfo, ...]}``; the occupancy plugin
keeps each kernel's latest while that client is connected, and the snapshot
(:mod:`taskcell.planner.schema`, which re-exports these records) carries them as they are.

The sidebar asks a kernel for one more worker of a pool by logging
``{"kernel": id, "pool": name}`` on :data:`START_TOPIC`, to which every provisioner subscribes
before it publishes its pools.

Times are the scheduler's (Unix seconds on its clock), as every time in a snapshot: the
provisioner measures its own clock's offset to the scheduler's when it connects.
"""

from __future__ import annotations

from typing import Literal, TypedDict

# The Dask event topic a kernel's pools are published on (see the module docstring).
POOLS_TOPIC = "taskcell-pools"
# The Dask event topic a request to start one worker of a kernel's pool is logged on.
START_TOPIC = "taskcell-pool-start"

#: A pool's worker: starting: asked for, not connected yet; running: connected; retiring:
#: being retired; retired: retired and stopped; failed: it did not connect, or not with its
#: pool's shape.
PoolWorkerState = Literal["starting", "running", "retiring", "retired", "failed"]
# The states of the workers that hold a place in their pool's ``max_workers``.
UP: tuple[PoolWorkerState, ...] = ("starting", "running", "retiring")


class PoolWorker(TypedDict):
    """A worker a pool started, as its kernel last published it.

    ``started`` says what was started (``pid 4242``, ``SLURM job 17``; empty until it is);
    ``since`` (Unix time, the scheduler's clock) when it entered its state; ``idle_since``
    since when a running worker has had nothing to run (None while it runs something, and in
    other states); ``error`` why it failed or retired, else None.
    """

    name: str
    state: PoolWorkerState
    started: str
    address: str | None
    since: float
    idle_since: float | None
    error: str | None


class PoolInfo(TypedDict):
    """A pool of one kernel: its shape, its limit, what waits for it, the workers it started.

    ``kernel`` is the id of the kernel that started them (its provisioner's client id outside a
    kernel): a pool of the same name in two kernels is listed twice. ``resources`` is what its
    workers advertise; ``waiting`` counts the tasks claimed for it and not on a worker yet;
    ``launched`` the workers the kernel asked it for so far; ``workers`` holds its live workers
    and the last of those that ended.
    """

    kernel: str
    name: str
    backend: str
    resources: dict[str, float]
    max_workers: int
    waiting: int
    launched: int
    workers: list[PoolWorker]


def workers_up(pool: PoolInfo) -> int:
    """How many of ``pool``'s workers hold a place in its ``max_workers``."""
    return sum(1 for w in pool["workers"] if w["state"] in UP)
