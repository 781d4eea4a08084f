"""What a kernel's pools do next, decided from plain facts: the pure half of
:mod:`taskcell.cluster.provision`, as ``AdaptiveCore`` is of distributed's adaptive scaling.

:func:`decide` takes the tasks claimed for pools, the workers the pools started, what the
scheduler says of them, the workers the sidebar asked for, the pools and the time, and returns
a :class:`Decision`: every worker moved on (connected, busy or idle, left, failed, retiring),
the workers to start, to retire and to stop, and a line for each decision with its reason. It
does no I/O and reads no clock; the provisioner gathers the facts, applies the decision and
does what it says.

The rules:

- A starting worker the scheduler lists is running if it advertises its pool's shape, else it
  has failed (and is retired). One not listed has failed once its process or job ended
  (:func:`taskcell.cluster.launch.ended`) or its pool's ``start-timeout`` passed.
- A running worker the scheduler no longer lists has retired ("it left the scheduler"). One
  with nothing processing is idle from the moment it was first seen so.
- Tasks claimed for a pool and not on a worker yet are packed into its workers (as many at
  once as :meth:`~taskcell.cluster.pools.Pool.slots` allows); workers start for what those
  tasks need beyond the pool's workers starting or idle, plus one per worker the sidebar
  asked for, never past its ``max-workers`` (starting, running and retiring ones count).
- A running worker idle for its pool's ``idle-timeout``, while no claimed task waits for the
  pool, retires.

Every time here is the kernel's ``time.monotonic()`` (:data:`Monotonic`).

:class:`Placement`, where :func:`taskcell.cluster.submit.plan` puts a request (live workers, or
a pool), lives here, below both ``submit`` and ``provision``, which pass it between them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, NewType

from taskcell.cluster.mapping import WorkerCapacity
from taskcell.cluster.pool_records import UP, PoolWorkerState
from taskcell.cluster.pools import Pool
from taskcell.spec.amounts import show_request

#: Seconds on the kernel's ``time.monotonic()`` clock.
Monotonic = NewType("Monotonic", float)

#: start: a worker is asked of the pool's backend; connect: it connected with the pool's shape;
#: leave: it left the scheduler; fail: it did not connect, or not with the pool's shape;
#: retire: it idled past the pool's idle-timeout; decline: a worker the sidebar asked for was not
#: started.
Action = Literal["start", "connect", "leave", "fail", "retire", "decline"]


@dataclass(frozen=True)
class Placement:
    """The Dask ``resources=`` of a request and the live workers able to run it, or, when none
    can, the pool whose worker will (:func:`taskcell.cluster.submit.plan` makes it,
    :func:`taskcell.cluster.provision.claim` starts the pool's worker)."""

    resources: dict[str, float]
    workers: list[WorkerCapacity]
    pool: Pool | None = None


@dataclass(frozen=True, kw_only=True)
class Claim:
    """A submitted task claimed for a pool."""

    pool: str
    resources: Mapping[str, float]  #: its Dask resources
    placed: bool = False  #: Dask gave it to a worker
    failed: bool = False  #: a worker of its pool failed to start; its cell says so

    @property
    def waiting(self) -> bool:
        """Not on a worker yet, and still to be run by one of its pool."""
        return not self.placed and not self.failed


@dataclass(frozen=True, kw_only=True)
class Worker:
    """A worker a pool started, as the provisioner knows it."""

    name: str
    pool: str
    state: PoolWorkerState = "starting"
    asked_at: Monotonic  #: when it was asked of the pool's backend
    since: Monotonic  #: when it entered its state
    started: str = ""  #: what was started: ``pid 4242``, ``SLURM job 17``
    address: str | None = None
    idle_since: Monotonic | None = None  #: while running with nothing to run
    error: str | None = None
    #: Why its process or job ended before it connected; None while it may still connect.
    ended: str | None = None

    def enter(self, state: PoolWorkerState, now: Monotonic, error: str | None = None) -> Worker:
        """This worker in ``state`` from ``now``, with ``error`` as the reason."""
        idle = self.idle_since if state == "running" else None
        return dataclasses.replace(self, state=state, since=now, error=error, idle_since=idle)

    def failure(self, why: str) -> str:
        """The sentence a cell waiting for this worker's pool fails with."""
        started = f" ({self.started})" if self.started else ""
        return f"the worker of pool {self.pool}{started} failed to start: {why}"


@dataclass(frozen=True, kw_only=True)
class Seen:
    """A worker as the scheduler lists it."""

    address: str
    resources: Mapping[str, float]  #: what it advertises
    busy: bool  #: tasks are processing on it


@dataclass(frozen=True, kw_only=True)
class Logged:
    """One decision and its reason."""

    at: Monotonic
    pool: str
    action: Action
    worker: str | None  #: None for a worker not named yet (one to start)
    why: str


@dataclass(frozen=True, kw_only=True)
class Decision:
    """What :func:`decide` decided."""

    workers: tuple[Worker, ...]  #: every worker given, moved on (same order)
    start: tuple[str, ...] = ()  #: a pool's name for each worker to start
    retire: tuple[str, ...] = ()  #: workers to retire through the scheduler, then stop
    stop: tuple[str, ...] = ()  #: workers whose process or job to stop
    failed: tuple[Worker, ...] = ()  #: workers that failed now: their pools' claims fail
    log: tuple[Logged, ...] = ()


def decide(
    *,
    claims: Sequence[Claim],
    workers: Sequence[Worker],
    seen: Mapping[str, Seen],
    pools: Mapping[str, Pool],
    asked: Mapping[str, int],
    now: Monotonic,
) -> Decision:
    """The next moves of the pools' workers (see the module docstring for the rules).

    Parameters
    ----------
    claims
        The tasks claimed for pools that have not ended.
    workers
        The workers the pools started, in the order they were asked for.
    seen
        What the scheduler says of the workers it lists, by worker name.
    pools
        The pools by name: every pool a claim or a worker names.
    asked
        Workers the sidebar asked for since the last decision, by pool name.
    now
        The time.
    """
    log: list[Logged] = []
    moved: list[Worker] = []
    retire: list[str] = []
    stop: list[str] = []
    failed: list[Worker] = []

    def note(pool: str, action: Action, worker: str | None, why: str) -> None:
        log.append(Logged(at=now, pool=pool, action=action, worker=worker, why=why))

    def fail(w: Worker, why: str) -> Worker:
        w = w.enter("failed", now, w.failure(why))
        failed.append(w)
        note(w.pool, "fail", w.name, why)
        return w

    for w in workers:
        pool, s = pools[w.pool], seen.get(w.name)
        if w.state == "starting" and s is not None:
            lacking = {n: a for n, a in pool.resources.items() if s.resources.get(n, 0) < a}
            w = dataclasses.replace(w, address=s.address)
            if lacking:
                has = show_request({n: s.resources.get(n, 0) for n in lacking})
                w = fail(w, f"it advertises {has}, its pool's shape {show_request(lacking)}")
                retire.append(w.name)
            else:
                w = w.enter("running", now)
                note(w.pool, "connect", w.name, f"connected as {s.address}")
        elif w.state == "starting" and w.ended is not None:
            w = fail(w, w.ended)
            stop.append(w.name)
        elif w.state == "starting" and now - w.asked_at > pool.start_timeout:
            w = fail(w, f"it did not connect within {pool.start_timeout:g} s (start-timeout)")
            stop.append(w.name)
        elif w.state == "running" and s is None:
            w = w.enter("retired", now, "it left the scheduler")
            stop.append(w.name)
            note(w.pool, "leave", w.name, "the scheduler no longer lists it")
        if w.state == "running" and s is not None:
            if s.busy and w.idle_since is not None:
                w = dataclasses.replace(w, idle_since=None)
            elif not s.busy and w.idle_since is None:
                w = dataclasses.replace(w, idle_since=now)
        moved.append(w)

    # The tasks waiting for a pool whose worker failed now fail with it.
    gone = {w.pool for w in failed}
    claims = [dataclasses.replace(c, failed=True) if c.pool in gone else c for c in claims]
    start = _starts(claims, moved, pools, asked, note)
    wanted = {c.pool for c in claims if c.waiting}
    for i, w in enumerate(moved):
        pool = pools[w.pool]
        idle = w.idle_since is not None and now - w.idle_since >= pool.idle_timeout
        if w.state == "running" and idle and w.pool not in wanted:
            moved[i] = w.enter("retiring", now)
            retire.append(w.name)
            note(w.pool, "retire", w.name, f"idle for {pool.idle_timeout:g} s (idle-timeout)")
    return Decision(
        workers=tuple(moved),
        start=tuple(start),
        retire=tuple(retire),
        stop=tuple(stop),
        failed=tuple(failed),
        log=tuple(log),
    )


def _starts(
    claims: Sequence[Claim],
    workers: Sequence[Worker],
    pools: Mapping[str, Pool],
    asked: Mapping[str, int],
    note: Callable[[str, Action, str | None, str], None],
) -> list[str]:
    """A pool's name for each worker to start: what its waiting claims need beyond its workers
    on their way, and what the sidebar asked for, within ``max-workers``."""
    start: list[str] = []
    names = list(dict.fromkeys([*(c.pool for c in claims), *asked]))
    for name in names:
        pool = pools.get(name)
        if pool is None:
            note(name, "decline", None, "no pool of this name is configured in the kernel")
            continue
        waiting = [c for c in claims if c.pool == name and c.waiting]
        need = math.ceil(sum(Fraction(1, pool.slots(c.resources)) for c in waiting))
        mine = [w for w in workers if w.pool == name]
        coming = sum(
            1
            for w in mine
            if w.state == "starting" or (w.state == "running" and w.idle_since is not None)
        )
        active = sum(1 for w in mine if w.state in UP)
        room = pool.max_workers - active
        by_claims, by_sidebar = max(0, need - coming), asked.get(name, 0)
        n = max(0, min(by_claims + by_sidebar, room))
        if n:
            why = f"{len(waiting)} task(s) wait, {coming} worker(s) on their way"
            if by_sidebar:
                why += f", {by_sidebar} asked from the sidebar"
            note(name, "start", None, f"{n} worker(s): {why}")
        declined = min(by_sidebar, by_claims + by_sidebar - n)
        if declined:  # tasks beyond max-workers queue, and their cells say so
            note(
                name,
                "decline",
                None,
                f"{declined} worker(s) asked from the sidebar: {active} of max-workers "
                f"{pool.max_workers} are up",
            )
        start += [name] * n
    return start
