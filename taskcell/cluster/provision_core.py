"""What a kernel's pools do next, decided from plain facts: the pure half of
:mod:`taskcell.cluster.provision`, as ``AdaptiveCore`` is of distributed's adaptive scaling.

:func:`decide` takes the tasks claimed for pools, the workers the pools started, what the
scheduler says of them, what the provisioner told of them since (each a :data:`Fact`: a start
failed, the scheduler refused to retire one, the kernel closes), the workers the sidebar asked
for, the pools and the time, and returns a :class:`Decision`: every worker moved on (connected,
busy or idle, left, failed, retiring, kept, retired), the workers to start, to retire and to
stop, the addresses leaving, and a line for each decision with its reason. It does no I/O and
reads no clock; the provisioner gathers the facts, keeps the decision and does what it says.

The rules:

- A starting worker the scheduler lists is running if it advertises its pool's shape, else it
  has failed (and is retired). One not listed has failed once its start failed (its backend's
  error, or its process or job ended: :func:`taskcell.cluster.launch.ended`) or its pool's
  ``start-timeout`` passed, and is stopped.
- A running worker the scheduler no longer lists has retired ("it left the scheduler"). One
  with nothing processing is idle from the moment it was first seen so.
- Tasks claimed for a pool and not on a worker yet are packed into its workers (as many at
  once as :meth:`~taskcell.cluster.pools.Pool.slots` allows); workers start for what those
  tasks need beyond the pool's workers starting or idle, plus one per worker the sidebar
  asked for, never past its ``max-workers`` (starting, running and retiring ones count).
- A running worker idle for its pool's ``idle-timeout``, while no claimed task waits for the
  pool, retires. Once the scheduler retired it, it has retired; one the scheduler keeps (no
  other worker can take its results) runs on, idle from then; a failed one is stopped anyway.
- When the kernel closes, every worker starting, running or retiring has retired, and stops.
- Of the workers that ended, the last :data:`ENDED_KEPT` of each pool are kept; a retiring one,
  or one retired less than :data:`RETIRED_SEEN` ago, is leaving: plans leave its address out.

Every time here is the kernel's ``time.monotonic()`` (:data:`Monotonic`).

:class:`Placement`, where :func:`taskcell.cluster.submit.plan` puts a request (live workers, or
a pool), lives here, below both ``submit`` and ``provision``, which pass it between them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Literal, NewType

from taskcell.cluster.mapping import WorkerCapacity
from taskcell.cluster.pool_records import UP, PoolWorkerState
from taskcell.cluster.pools import Pool
from taskcell.cluster.waits import Wait, wait
from taskcell.spec.amounts import show_request

#: Seconds on the kernel's ``time.monotonic()`` clock.
Monotonic = NewType("Monotonic", float)

#: Ended (retired or failed) workers kept in the state shown, per pool.
ENDED_KEPT = 10
#: Seconds a retired worker is left out of plans, longer than a view of the workers is cached.
RETIRED_SEEN = 5.0

#: start: a worker is asked of the pool's backend; connect: it connected with the pool's shape;
#: leave: it left the scheduler; fail: it did not connect, or not with the pool's shape;
#: retire: it idled past the pool's idle-timeout, or the scheduler kept it; decline: a worker
#: the sidebar asked for was not started.
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

    def enter(self, state: PoolWorkerState, now: Monotonic, error: str | None = None) -> Worker:
        """This worker in ``state`` from ``now``, with ``error`` as the reason."""
        idle = self.idle_since if state == "running" else None
        return replace(self, state=state, since=now, error=error, idle_since=idle)

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


#: What the provisioner saw happen to a worker while doing what a decision said. started: what
#: was started for it is known (``detail``: ``pid 4242``, ``SLURM job 17``); start-failed: it did
#: not start (``detail``: its backend's error, or why its process or job ended); retired: the
#: scheduler retired it, and its process or job was stopped; retire-refused: the scheduler kept
#: it (no other worker can take its results); stop-failed: stopping its process or job failed
#: (``detail``: the error); closing: the kernel closes, and the workers it started stop.
Happened = Literal["started", "start-failed", "retired", "retire-refused", "stop-failed", "closing"]


@dataclass(frozen=True)
class Fact:
    """One thing the provisioner tells :func:`decide` of, besides what the scheduler says."""

    happened: Happened
    worker: str = ""  #: the worker's name; empty for closing
    detail: str = ""


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

    #: every worker given and kept, moved on (same order), then those to start
    workers: tuple[Worker, ...]
    launch: tuple[Worker, ...] = ()  #: the workers to start
    retire: tuple[str, ...] = ()  #: workers to retire through the scheduler, then stop
    stop: tuple[str, ...] = ()  #: workers whose process or job to stop
    failed: tuple[Worker, ...] = ()  #: workers that failed now: their pools' claims fail
    log: tuple[Logged, ...] = ()
    leaving: frozenset[str] = frozenset()  #: addresses of workers retiring or just retired


def decide(
    *,
    claims: Sequence[Claim],
    workers: Sequence[Worker],
    seen: Mapping[str, Seen],
    pools: Mapping[str, Pool],
    asked: Mapping[str, int],
    now: Monotonic,
    tag: str,
    facts: Sequence[Fact] = (),
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
    tag
        Unique to this decision: the workers to start are named ``{pool}-{tag}{n}``.
    facts
        What the provisioner told since the last decision, oldest first.
    """
    if any(f.happened == "closing" for f in facts):
        return _close(workers, now)
    m = _Moves(now)
    moved = [_move(w, pools[w.pool], seen.get(w.name), facts, m) for w in workers]
    # The tasks waiting for a pool whose worker failed now fail with it.
    gone = {w.pool for w in m.failed}
    claims = [replace(c, failed=True) if c.pool in gone else c for c in claims]
    start = _starts(claims, moved, pools, asked, m.note)
    wanted = {c.pool for c in claims if c.waiting}
    moved = [_retire_idle(w, pools[w.pool], w.pool in wanted, m) for w in moved]
    launch = [
        Worker(name=f"{pool}-{tag}{n}", pool=pool, asked_at=now, since=now)
        for n, pool in enumerate(start)
    ]
    kept, leaving = _retain([*moved, *launch], now)
    return Decision(
        workers=kept,
        launch=tuple(launch),
        retire=tuple(m.retire),
        stop=tuple(m.stop),
        failed=tuple(m.failed),
        log=tuple(m.log),
        leaving=leaving,
    )


def waiting(pool: Pool, on: str | None, workers: Sequence[Worker], now: Monotonic) -> Wait:
    """What a task claimed for ``pool`` waits for: ``on``, the worker Dask gave it to, else a
    worker of its pool starting (the first asked for), or its busy ones."""
    if on is not None:
        return wait("pool-queued", pool=pool.name, where=on)
    mine = [w for w in workers if w.pool == pool.name]
    starting = next((w for w in mine if w.state == "starting"), None)
    if starting is not None:
        waited = now - starting.asked_at
        return wait("pool-starting", pool=pool.name, where=starting.started or None, seconds=waited)
    running = sum(1 for w in mine if w.state == "running")
    if running:
        return wait("pool-busy", pool=pool.name, count=running, total=pool.max_workers)
    return wait("pool-starting", pool=pool.name)


@dataclass
class _Moves:
    """What :func:`decide` decided so far, besides the workers' states."""

    now: Monotonic
    retire: list[str] = field(default_factory=list)
    stop: list[str] = field(default_factory=list)
    failed: list[Worker] = field(default_factory=list)
    log: list[Logged] = field(default_factory=list)

    def note(self, pool: str, action: Action, worker: str | None, why: str) -> None:
        """Log one decision with its reason."""
        self.log.append(Logged(at=self.now, pool=pool, action=action, worker=worker, why=why))

    def fail(self, w: Worker, why: str, then: list[str]) -> Worker:
        """``w`` failed for ``why``: its claims fail, and it is retired or stopped (``then``)."""
        w = w.enter("failed", self.now, w.failure(why))
        self.failed.append(w)
        then.append(w.name)
        self.note(w.pool, "fail", w.name, why)
        return w

    def connect(self, w: Worker, pool: Pool, s: Seen) -> Worker:
        """``w``, listed by the scheduler as ``s``: running with its pool's shape, else failed
        and retired."""
        w = replace(w, address=s.address)
        lacking = {n: a for n, a in pool.resources.items() if s.resources.get(n, 0) < a}
        if lacking:
            has = show_request({n: s.resources.get(n, 0) for n in lacking})
            why = f"it advertises {has}, its pool's shape {show_request(lacking)}"
            return self.fail(w, why, self.retire)
        self.note(w.pool, "connect", w.name, f"connected as {s.address}")
        return w.enter("running", self.now)


def _move(w: Worker, pool: Pool, s: Seen | None, facts: Sequence[Fact], m: _Moves) -> Worker:
    """``w`` moved on by what was told of it and what the scheduler says of it (``s``)."""
    told = {f.happened: f.detail for f in facts if f.worker == w.name}  # the last of each
    if "started" in told:
        w = replace(w, started=told["started"])
    if "stop-failed" in told:
        w = replace(w, error=f"{w.error or ''} (stopping it failed: {told['stop-failed']})".strip())
    if w.state == "starting" and s is not None:
        w = m.connect(w, pool, s)
    elif w.state == "starting" and "start-failed" in told:
        w = m.fail(w, told["start-failed"], m.stop)
    elif w.state == "starting" and m.now - w.asked_at > pool.start_timeout:
        why = f"it did not connect within {pool.start_timeout:g} s (start-timeout)"
        w = m.fail(w, why, m.stop)
    elif w.state == "retiring" and "retired" in told:
        w = w.enter("retired", m.now)
    elif w.state == "retiring" and "retire-refused" in told:
        w = replace(w.enter("running", m.now), idle_since=m.now)
        why = "the scheduler kept it: no other worker can take its results"
        m.note(w.pool, "retire", w.name, why)
    elif w.state == "failed" and "retire-refused" in told:
        m.stop.append(w.name)
    elif w.state == "running" and s is None:
        w = w.enter("retired", m.now, "it left the scheduler")
        m.stop.append(w.name)
        m.note(w.pool, "leave", w.name, "the scheduler no longer lists it")
    if w.state == "running" and s is not None:
        if s.busy and w.idle_since is not None:
            w = replace(w, idle_since=None)
        elif not s.busy and w.idle_since is None:
            w = replace(w, idle_since=m.now)
    return w


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


def _retire_idle(w: Worker, pool: Pool, wanted: bool, m: _Moves) -> Worker:
    """``w``, retiring if it is running and idle for its pool's idle-timeout while no claim
    waits for its pool (``wanted``)."""
    idle = w.idle_since is not None and m.now - w.idle_since >= pool.idle_timeout
    if w.state != "running" or not idle or wanted:
        return w
    m.retire.append(w.name)
    m.note(w.pool, "retire", w.name, f"idle for {pool.idle_timeout:g} s (idle-timeout)")
    return w.enter("retiring", m.now)


def _close(workers: Sequence[Worker], now: Monotonic) -> Decision:
    """Every worker starting, running or retiring retired and stopped: the kernel closes."""
    up = tuple(w.name for w in workers if w.state in UP)
    moved = (w.enter("retired", now, "the kernel closed") if w.name in up else w for w in workers)
    return Decision(workers=tuple(moved), stop=up)


def _retain(workers: Sequence[Worker], now: Monotonic) -> tuple[tuple[Worker, ...], frozenset[str]]:
    """``workers`` less the ended ones before the last :data:`ENDED_KEPT` of each pool, and the
    addresses of those kept that are retiring or retired within :data:`RETIRED_SEEN`."""
    later: Counter[str] = Counter()  # ended workers of each pool, counted from the last
    kept: list[Worker] = []
    for w in reversed(workers):
        later[w.pool] += w.state not in UP
        if w.state in UP or later[w.pool] <= ENDED_KEPT:
            kept.insert(0, w)
    just = now - RETIRED_SEEN
    out = (w for w in kept if w.state == "retiring" or (w.state == "retired" and w.since > just))
    return tuple(kept), frozenset(w.address for w in out if w.address is not None)
