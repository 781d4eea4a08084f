"""Start a pool's worker when a submitted task needs one, share it, and retire it when idle.

:func:`claim` records a task that no live worker could run but a pool's worker can (see
:func:`taskcell.cluster.submit.plan`); the task itself is already submitted and waits in Dask's
``no-worker`` state until a worker that meets it connects. One :class:`Provisioner` per
scheduler, in the kernel, then works on a thread of its own, with its own event loop and
asynchronous client, every ``taskcell.provisioning.interval``:

- Tasks claimed for a pool and not yet on a worker are packed into workers of that pool (as many
  as :meth:`~taskcell.cluster.pools.Pool.slots` allows at once), and only as many workers start
  as those tasks need beyond the pool's workers already starting or idle, never more than its
  ``max-workers``: cells waiting together share the workers that start.
- A worker that connects is checked against its pool's shape. One that fails first (its process
  exits, its SLURM job ends, it takes longer than ``start-timeout``) fails the cells waiting for
  its pool with the reason; a task submitted outside a cell is cancelled with it.
- A worker with nothing processing for its pool's ``idle-timeout``, while no claimed task waits
  for the pool, is retired through the scheduler (which moves the results it holds to other
  workers, and keeps it when none can take them), then its process or job is stopped.

A worker still starting when the cells that asked for it are interrupted starts anyway, and
retires once idle. Workers this kernel started are stopped when it exits (a kernel killed
outright leaves them to end with their scheduler). ``max-workers`` counts one kernel's workers.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import math
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from taskcell import config
from taskcell.cluster.pools import Pool, configured_pools
from taskcell.errors import ClusterError
from taskcell.spec.amounts import show_request

if TYPE_CHECKING:
    from distributed import Client, Future
    from distributed.deploy.spec import ProcessInterface

    from taskcell.cluster.submit import Placement

__all__ = [
    "TOPIC",
    "PoolState",
    "WorkerInfo",
    "announce",
    "claim",
    "close_all",
    "leaving",
    "pool_state",
    "published_pools",
    "waiting_status",
]

#: The Dask event topic each change of a kernel's pools is logged on, for panel and sidebar.
TOPIC = "taskcell-pools"
#: Ended (retired or failed) workers kept in the state shown, per pool.
ENDED_KEPT = 10
#: Seconds a retired worker is left out of plans, longer than a view of the workers is cached.
RETIRED_SEEN = 5.0

#: ``starting``: asked for, not connected yet; ``running``: connected; ``retiring``: being
#: retired; ``retired``: retired and stopped; ``failed``: did not connect, or not as its shape.
WorkerStateName = Literal["starting", "running", "retiring", "retired", "failed"]


class WorkerInfo(TypedDict):
    """One worker a pool started, as the panel and the sidebar show it."""

    name: str
    state: WorkerStateName
    started: str  #: what was started: ``pid 4242``, ``SLURM job 17``
    address: str | None
    since: float  #: when it entered its state (seconds since the epoch)
    idle: float | None  #: seconds it has had nothing to run, while running
    error: str | None


class PoolState(TypedDict):
    """One pool: its shape, its limits and its workers."""

    name: str
    backend: str
    shape: dict[str, Any]  #: :meth:`~taskcell.spec.Resources.to_dict`
    resources: dict[str, float]  #: what its workers advertise
    max_workers: int
    idle_timeout: float
    waiting: int  #: claimed tasks not on a worker yet
    started: int  #: workers started so far by this kernel
    workers: list[WorkerInfo]


@dataclass
class _Worker:
    pool: Pool
    name: str
    asked_at: float
    state: WorkerStateName = "starting"
    handle: ProcessInterface | None = None
    started: str = ""
    address: str | None = None
    idle_since: float | None = None
    error: str | None = None
    changed_at: float = field(default_factory=time.time)

    def enter(self, state: WorkerStateName, error: str | None = None) -> None:
        self.state, self.error, self.changed_at = state, error, time.time()


@dataclass
class _Claim:
    pool: Pool
    future: Future
    resources: Mapping[str, float]
    followed: bool  #: a cell follows it and shows its status; else it is cancelled on failure
    worker: str | None = None  #: the address Dask gave it to
    error: str | None = None


class Provisioner:
    """The pools' workers on one scheduler: started, watched and retired from a thread."""

    def __init__(self, address: str, security: Any) -> None:
        self.address = address
        self._security = security
        self._lock = threading.Lock()
        self._workers: list[_Worker] = []
        self._claims: dict[str, _Claim] = {}
        self._pools: list[Pool] = []  #: the configured pools, as the kernel last read them
        self._started: dict[str, int] = {}
        self._ready = threading.Event()
        self._closing = False
        self._changed = True
        self._failure: BaseException | None = None
        self._thread = threading.Thread(
            target=asyncio.run, args=(self._main(),), name="taskcell-provisioner", daemon=True
        )
        self._thread.start()
        self._ready.wait()
        if self._failure is not None:
            raise ClusterError(
                f"cannot watch pools on the scheduler at {address}: {self._failure}"
            ) from None

    # --- the kernel's side ----------------------------------------------------------------

    def show(self, pools: list[Pool]) -> None:
        """Publish ``pools``, the configured ones, with the workers started for each."""
        with self._lock:
            self._changed = self._changed or pools != self._pools
            self._pools = pools
        self._wake()

    def claim(self, pool: Pool, future: Future, resources: Mapping[str, float], followed: bool):
        """Ask for a worker of ``pool`` for the submitted ``future``."""
        with self._lock:
            self._claims[str(future.key)] = _Claim(pool, future, resources, followed)
            self._changed = True
        self._wake()

    def status(self, key: str) -> str | None:
        """What the claimed task ``key`` waits for; None when it is not claimed.

        Raises
        ------
        ClusterError
            The pool's worker failed to start, naming the pool and the reason.
        """
        with self._lock:
            c = self._claims.get(key)
            if c is None:
                return None
            if self._failure is not None:
                raise ClusterError(f"taskcell stopped watching its pools: {self._failure!r}")
            if c.error is not None:
                raise ClusterError(c.error)
            if c.worker is not None:
                return f"queued on {c.worker}, a worker of pool {c.pool.name}"
            starting = [
                w for w in self._workers if w.pool.name == c.pool.name and w.state == "starting"
            ]
            if starting:
                w = starting[0]
                what = f" ({w.started})" if w.started else ""
                waited = time.monotonic() - w.asked_at
                return f"starting a worker of pool {c.pool.name}{what}: {waited:.0f} s"
            active = [
                w for w in self._workers if w.pool.name == c.pool.name and w.state == "running"
            ]
            if active:
                return (
                    f"waiting for a worker of pool {c.pool.name}: all {len(active)} busy "
                    f"(max-workers {c.pool.max_workers})"
                )
            return f"starting a worker of pool {c.pool.name}"

    def leaving(self) -> set[str]:
        """Addresses of its workers retiring or retired."""
        recently = time.time() - RETIRED_SEEN
        with self._lock:
            return {
                w.address
                for w in self._workers
                if w.address is not None
                and (w.state == "retiring" or (w.state == "retired" and w.changed_at > recently))
            }

    def state(self, pools: list[Pool]) -> list[PoolState]:
        """``pools`` (the configured ones) and the others this provisioner started workers for,
        with their workers."""
        now = time.monotonic()
        with self._lock:
            known = {pool.name: pool for pool in pools}
            for w in self._workers:
                known.setdefault(w.pool.name, w.pool)
            return [self._pool_state(pool, now) for pool in known.values()]

    def _pool_state(self, pool: Pool, now: float) -> PoolState:
        return _state(
            pool,
            [w for w in self._workers if w.pool.name == pool.name],
            sum(1 for c in self._claims.values() if c.pool.name == pool.name and not c.worker),
            self._started.get(pool.name, 0),
            now,
        )

    def close(self, timeout: float = 30.0) -> None:
        """Stop every worker this provisioner started, and its thread."""
        if self._closing or not self._thread.is_alive():
            return
        future = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        with contextlib.suppress(concurrent.futures.TimeoutError, OSError, RuntimeError):
            future.result(timeout)
        self._thread.join(timeout)

    def _wake(self) -> None:
        self._loop.call_soon_threadsafe(self._woken.set)

    # --- the provisioner's thread ---------------------------------------------------------

    async def _main(self) -> None:
        from distributed import Client

        self._loop = asyncio.get_running_loop()
        self._woken = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()
        try:
            self.client = await Client(
                self.address, asynchronous=True, security=self._security, set_as_default=False
            )
        except (OSError, TimeoutError) as e:
            self._failure = e
            self._ready.set()
            return
        self._ready.set()
        interval = _seconds(config.get("provisioning.interval"))
        try:
            while not self._closing:
                # A scheduler that does not answer: the cells say so, and the next tick tries.
                with contextlib.suppress(OSError, asyncio.TimeoutError):
                    await self._tick()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._woken.wait(), interval)
                self._woken.clear()
        except Exception as e:  # a bug here must fail the waiting cells, not leave them waiting
            self._failure = e
            raise

    async def _tick(self) -> None:
        with self._lock:
            idle = not self._claims and all(w.state in ("retired", "failed") for w in self._workers)
        if idle:  # nothing to watch: do not ask the scheduler every interval
            await self._publish()
            return
        identity = await self.client.scheduler.identity(n_workers=-1)
        processing = await self.client.scheduler.processing()
        seen = {str(w.get("name")): (a, w) for a, w in identity["workers"].items()}
        busy = {address for address, keys in processing.items() if keys}
        on = {str(key): address for address, keys in processing.items() for key in keys}
        now = time.monotonic()
        with self._lock:
            for key, c in list(self._claims.items()):
                if c.future.done():
                    del self._claims[key]
                    self._changed = True
                elif c.worker != on.get(key):
                    c.worker = on.get(key)
                    self._changed = True
            for w in self._workers:
                self._observe(w, seen.get(w.name), busy, now)
            starts = self._starts()
            retiring = self._retirements(now)
        for w in [w for w in self._workers if w.state == "starting" and w.handle is not None]:
            await self._check_starting(w, now)
        for w in starts:
            self._spawn(self._start(w))
        for w in retiring:
            self._spawn(self._retire(w))
        await self._publish()

    def _observe(
        self, w: _Worker, seen: tuple[str, dict] | None, busy: set[str], now: float
    ) -> None:
        """Move ``w`` on by what the scheduler says of it."""
        if w.state == "starting" and seen is not None:
            address, info = seen
            advertised = info.get("resources") or {}
            lacking = {n: a for n, a in w.pool.resources.items() if advertised.get(n, 0) < a}
            w.address = address
            if lacking:
                has = show_request({n: advertised.get(n, 0) for n in lacking})
                self._fail(w, f"it advertises {has}, its pool's shape {show_request(lacking)}")
                self._spawn(self._retire(w))
                return
            w.enter("running")
            w.idle_since = now
            self._changed = True
        elif w.state == "running" and seen is None:
            w.enter("retired", "it left the scheduler")
            w.idle_since = None
            self._spawn(self._stop(w))
            self._changed = True
        if w.state == "running" and (w.address in busy) == (w.idle_since is not None):
            w.idle_since = None if w.address in busy else now
            self._changed = True  # the panel and the sidebar show how long it has idled

    def _starts(self) -> list[_Worker]:
        """The workers to start now: what claimed tasks need beyond what is on its way."""
        new = []
        for pool in {c.pool.name: c.pool for c in self._claims.values()}.values():
            waiting = [
                c
                for c in self._claims.values()
                if c.pool.name == pool.name and not c.worker and not c.error
            ]
            need = math.ceil(sum(Fraction(1, pool.slots(c.resources)) for c in waiting))
            mine = [w for w in self._workers if w.pool.name == pool.name]
            coming = sum(
                1
                for w in mine
                if w.state == "starting" or (w.state == "running" and w.idle_since is not None)
            )
            active = sum(1 for w in mine if w.state in ("starting", "running", "retiring"))
            for _ in range(max(0, min(need - coming, pool.max_workers - active))):
                w = _Worker(pool, f"{pool.name}-{uuid.uuid4().hex[:6]}", time.monotonic())
                self._workers.append(w)
                self._started[pool.name] = self._started.get(pool.name, 0) + 1
                new.append(w)
                self._changed = True
        return new

    def _retirements(self, now: float) -> list[_Worker]:
        wanted = {c.pool.name for c in self._claims.values() if not c.worker and not c.error}
        out = []
        for w in self._workers:
            idle = w.idle_since is not None and now - w.idle_since >= w.pool.idle_timeout
            if w.state == "running" and idle and w.pool.name not in wanted:
                w.enter("retiring")
                out.append(w)
                self._changed = True
        return out

    async def _start(self, w: _Worker) -> None:
        from taskcell.cluster.launch import describe, make_worker

        try:
            w.handle = make_worker(w.pool, self.address, w.name)
            await w.handle  # as SpecCluster starts a worker: ProcessInterface or Server
        except Exception as e:  # the backend's error, whatever it is, is the reason to show
            with self._lock:
                self._fail(w, str(e).strip() or type(e).__name__)
            return
        with self._lock:
            w.started = describe(w.pool, w.handle)
            self._changed = True
        self._wake()

    async def _check_starting(self, w: _Worker, now: float) -> None:
        from taskcell.cluster.launch import ended

        assert w.handle is not None
        why = await ended(w.pool, w.handle)
        if why is None and now - w.asked_at > w.pool.start_timeout:
            why = f"it did not connect within {w.pool.start_timeout:g} s (start-timeout)"
        if why is not None and w.state == "starting":
            with self._lock:
                self._fail(w, why)
            await self._stop(w)

    def _fail(self, w: _Worker, why: str) -> None:
        """Mark ``w`` failed and fail the tasks waiting for its pool with the reason."""
        started = f" ({w.started})" if w.started else ""
        message = f"the worker of pool {w.pool.name}{started} failed to start: {why}"
        w.enter("failed", message)
        self._changed = True
        for c in self._claims.values():
            if c.pool.name == w.pool.name and not c.worker and c.error is None:
                c.error = message
                if not c.followed:
                    self._spawn(asyncio.to_thread(c.future.cancel, reason="taskcell", msg=message))

    async def _retire(self, w: _Worker) -> None:
        if w.address is not None:
            try:
                retired = await self.client.retire_workers(workers=[w.address], close_workers=True)
            except (OSError, TimeoutError):
                retired = {}
            if w.address not in retired and w.state == "retiring":
                with self._lock:  # it keeps results no other worker can take: keep it
                    w.enter("running")
                    w.idle_since = time.monotonic()
                    self._changed = True
                return
        await self._stop(w)
        with self._lock:
            if w.state == "retiring":
                w.enter("retired")
            w.idle_since = None
            self._changed = True
            self._forget_ended(w.pool)

    async def _stop(self, w: _Worker) -> None:
        if w.handle is not None:
            try:
                await w.handle.close()
            except Exception as e:  # report, and go on stopping the others
                w.error = f"{w.error or ''} (stopping it failed: {e})".strip()

    def _forget_ended(self, pool: Pool) -> None:
        ended = [
            w
            for w in self._workers
            if w.pool.name == pool.name and w.state in ("retired", "failed")
        ]
        for w in ended[:-ENDED_KEPT]:
            self._workers.remove(w)

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _publish(self) -> None:
        """Log the pools' state on :data:`TOPIC` when it changed, for the panel and the sidebar."""
        from taskcell.cluster.registry import this_kernel_id

        if not self._changed:
            return
        self._changed = False
        state = self.state(self._pools)
        event = {"kernel": this_kernel_id(), "client": self.client.id, "pools": state}
        await self.client.log_event(TOPIC, event)

    async def _shutdown(self) -> None:
        self._closing = True
        with self._lock:
            workers = [w for w in self._workers if w.state in ("starting", "running", "retiring")]
            for w in workers:
                w.enter("retired", "the kernel closed")
        await asyncio.gather(*(self._stop(w) for w in workers), return_exceptions=True)
        await self.client.close()
        self._woken.set()


def _seconds(value: str | float) -> float:
    from dask.utils import parse_timedelta

    return float(parse_timedelta(value, default="s"))


_provisioners: dict[str, Provisioner] = {}
_made = threading.Lock()


def _for(client: Client) -> Provisioner:
    address = client.scheduler.address
    with _made:
        if address not in _provisioners:
            if not _provisioners:
                atexit.register(close_all)
            _provisioners[address] = Provisioner(address, client.security)
        return _provisioners[address]


def announce(client: Client) -> None:
    """Publish the configured pools on ``client``'s scheduler before any of their workers is
    asked for, so the panel and the sidebar list them. Nothing without pools, with pools
    configured wrong, or a scheduler that does not answer: connecting must not fail for that,
    and a cell that needs a pool says what is wrong."""
    try:
        pools = configured_pools()
        if pools:
            _for(client).show(pools)
    except Exception:  # any configuration error: the same parse fails loudly in the cell
        return


def claim(client: Client, placement: Placement, future: Future, followed: bool = False) -> None:
    """Have a worker of ``placement.pool`` started for the submitted ``future`` if it needs one.

    ``followed``: a cell shows the task's status (:func:`waiting_status`), and fails when the
    pool's worker fails to start; otherwise the future is cancelled with the reason.
    """
    if placement.pool is not None:
        provisioner = _for(client)
        provisioner.show(configured_pools())  # read moments ago by the plan: valid
        provisioner.claim(placement.pool, future, placement.resources, followed)


def waiting_status(client: Client, key: str) -> str | None:
    """What the claimed task ``key`` waits for (``starting a worker of pool a100x2 (SLURM job
    17): 12 s``), or None when it waits for no pool.

    Raises
    ------
    ClusterError
        The worker started for it failed; the message names the pool and the reason.
    """
    provisioner = _provisioners.get(client.scheduler.address)
    return provisioner.status(key) if provisioner is not None else None


def leaving(client: Client) -> set[str]:
    """Addresses of the workers this kernel is retiring or has retired on ``client``'s
    scheduler, which a view of the live workers fetched a moment ago may still list."""
    provisioner = _provisioners.get(client.scheduler.address)
    return provisioner.leaving() if provisioner is not None else set()


def pool_state(client: Client) -> list[PoolState]:
    """The configured pools, and the workers this kernel started for each on ``client``'s
    scheduler (a :class:`PoolState` each), for the panel and the sidebar."""
    pools = configured_pools()
    provisioner = _provisioners.get(client.scheduler.address)
    if provisioner is None:
        return [_state(pool, [], 0, 0, time.monotonic()) for pool in pools]
    return provisioner.state(pools)


def published_pools(client: Client) -> dict[str, list[PoolState]]:
    """The latest pools each kernel logged on ``client``'s scheduler (:data:`TOPIC`), by kernel
    id. To follow changes, subscribe with ``client.subscribe_topic(TOPIC, ...)``; each event is
    ``{"kernel", "client", "pools"}``, ``client`` the id of the provisioner's own client. The
    occupancy snapshot carries them too (:mod:`taskcell.planner.schema`)."""
    latest: dict[str, list[PoolState]] = {}
    for _, event in client.get_events(TOPIC):
        latest[str(event["kernel"])] = event["pools"]
    return latest


def _state(pool: Pool, workers: list[_Worker], waiting: int, started: int, now: float) -> PoolState:
    return PoolState(
        name=pool.name,
        backend=pool.backend,
        shape=pool.shape.to_dict(),
        resources=pool.resources,
        max_workers=pool.max_workers,
        idle_timeout=pool.idle_timeout,
        waiting=waiting,
        started=started,
        workers=[
            WorkerInfo(
                name=w.name,
                state=w.state,
                started=w.started,
                address=w.address,
                since=w.changed_at,
                idle=now - w.idle_since if w.idle_since is not None else None,
                error=w.error,
            )
            for w in workers
        ],
    )


def close_all() -> None:
    """Stop every worker the pools started in this process (at exit, and in tests)."""
    with _made:
        provisioners = list(_provisioners.values())
        _provisioners.clear()
    for provisioner in provisioners:
        provisioner.close()
