"""Start a pool's worker when a submitted task needs one, share it, and retire it when idle.

:func:`claim` records a task that no live worker could run but a pool's worker can (see
:func:`taskcell.cluster.submit.plan`); the task itself is already submitted and waits in Dask's
``no-worker`` state until a worker that meets it connects. One :class:`Provisioner` per
scheduler, in the kernel, then works on a thread of its own, with its own event loop and
asynchronous client, every ``taskcell.provisioning.interval`` and whenever something changes:
it asks the scheduler which workers it lists and what they process (a worker its backend named,
a Gateway's, known by its handle's ``name``), asks each backend whether a starting worker's
process or job has ended, hands these facts to :func:`taskcell.cluster.provision_core.decide`
(which holds every rule: packing, ``max-workers``, idle retirement, start timeouts, shapes),
and does what it decided:

- starts workers through the pool's backend (:mod:`taskcell.cluster.launch`);
- retires workers through the scheduler (which moves the results they hold to other workers,
  and keeps a worker when none can take them), then stops their process or job;
- fails the cells waiting for a pool whose worker failed, with the reason; a task submitted
  outside a cell is cancelled with it.

The sidebar may ask for one more worker of a pool
(:data:`~taskcell.cluster.pool_records.START_TOPIC`); the provisioner subscribes before it first
publishes its pools, so no request it could be shown is lost. Each change of the pools is
published on :data:`~taskcell.cluster.pool_records.POOLS_TOPIC` as
:class:`~taskcell.cluster.pool_records.PoolInfo` records, times on the scheduler's clock. The
last :data:`DECISIONS_KEPT` decisions, each with its reason, are kept for whoever debugs a pool
(:func:`decisions`).

A worker still starting when the cells that asked for it are interrupted starts anyway, and
retires once idle. Workers this kernel started are stopped when it exits (a kernel killed
outright leaves them to end with their scheduler). ``max-workers`` counts one kernel's workers.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import dataclasses
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from taskcell import config
from taskcell.cluster import connect
from taskcell.cluster.pool_records import (
    POOLS_TOPIC,
    START_TOPIC,
    UP,
    PoolInfo,
    PoolWorker,
    PoolWorkerState,
)
from taskcell.cluster.pools import Pool, configured_pools
from taskcell.cluster.provision_core import (
    Claim,
    Decision,
    Logged,
    Placement,
    Seen,
    Worker,
    decide,
)
from taskcell.cluster.provision_core import Monotonic as _Monotonic
from taskcell.cluster.waits import Wait, wait
from taskcell.errors import ClusterError

if TYPE_CHECKING:
    from distributed import Client, Future
    from distributed.deploy.spec import ProcessInterface

__all__ = [
    "DECISIONS_KEPT",
    "announce",
    "claim",
    "close_all",
    "decisions",
    "leaving",
    "pool_state",
    "published_pools",
    "waiting_status",
]

log = logging.getLogger(__name__)

#: Ended (retired or failed) workers kept in the state shown, per pool.
ENDED_KEPT = 10
#: Seconds a retired worker is left out of plans, longer than a view of the workers is cached.
RETIRED_SEEN = 5.0
#: Decisions kept, the latest last (:func:`decisions`).
DECISIONS_KEPT = 200


def _now() -> _Monotonic:
    return _Monotonic(time.monotonic())


@dataclass(kw_only=True)
class _Claim:
    pool: Pool
    future: Future
    resources: Mapping[str, float]
    followed: bool  #: a cell follows it and shows its status; else it is cancelled on failure
    worker: str | None = None  #: the address Dask gave it to
    error: str | None = None

    def fact(self) -> Claim:
        return Claim(
            pool=self.pool.name,
            resources=self.resources,
            placed=self.worker is not None,
            failed=self.error is not None,
        )


class Provisioner:
    """The pools' workers on one scheduler: started, watched and retired from a thread."""

    def __init__(self, address: str, security: Any) -> None:
        self.address = address
        #: How often it looks (taskcell.provisioning.interval); a bad one starts nothing.
        self._interval = config.seconds("provisioning.interval")
        self._security = security
        self._lock = threading.Lock()
        self._workers: list[Worker] = []  #: in the order asked for
        self._handles: dict[str, ProcessInterface] = {}
        self._claims: dict[str, _Claim] = {}
        self._pools: list[Pool] = []  #: the configured pools, as the kernel last read them
        self._known: dict[str, Pool] = {}  #: every pool named so far, its latest definition
        self._launched: dict[str, int] = {}
        self._asked: dict[str, int] = {}  #: workers the sidebar asked for, not decided yet
        self._log: deque[Logged] = deque(maxlen=DECISIONS_KEPT)
        self._offset = time.time() - time.monotonic()  #: monotonic -> the scheduler's clock
        self._ready = threading.Event()
        self._closing = False  #: shutting down: no more ticks
        self._closed = False  #: shut down: the thread ends
        self._changed = True
        self._failure: BaseException | None = None
        self.kernel = ""  #: this kernel's id (its client's id outside a kernel), once connected
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
            self._known.update((pool.name, pool) for pool in pools)
        self._wake()

    def claim(self, pool: Pool, future: Future, resources: Mapping[str, float], followed: bool):
        """Ask for a worker of ``pool`` for the submitted ``future``."""
        with self._lock:
            self._claims[str(future.key)] = _Claim(
                pool=pool, future=future, resources=resources, followed=followed
            )
            self._known[pool.name] = pool
            self._changed = True
        self._wake()

    def status(self, key: str) -> Wait | None:
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
                return wait("pool-queued", pool=c.pool.name, where=c.worker)
            mine = [w for w in self._workers if w.pool == c.pool.name]
            starting = [w for w in mine if w.state == "starting"]
            if starting:
                w = starting[0]
                waited = time.monotonic() - w.asked_at
                return wait(
                    "pool-starting", pool=c.pool.name, where=w.started or None, seconds=waited
                )
            active = [w for w in mine if w.state == "running"]
            if active:
                return wait(
                    "pool-busy", pool=c.pool.name, count=len(active), total=c.pool.max_workers
                )
            return wait("pool-starting", pool=c.pool.name)

    def leaving(self) -> set[str]:
        """Addresses of its workers retiring or retired."""
        recently = time.monotonic() - RETIRED_SEEN
        with self._lock:
            return {
                w.address
                for w in self._workers
                if w.address is not None
                and (w.state == "retiring" or (w.state == "retired" and w.since > recently))
            }

    def state(self, pools: list[Pool]) -> list[PoolInfo]:
        """``pools`` (the configured ones) and the others this provisioner started workers for,
        with their workers."""
        with self._lock:
            known = {pool.name: pool for pool in pools}
            for w in self._workers:
                known.setdefault(w.pool, self._known[w.pool])
            return [self._info(pool) for pool in known.values()]

    def decisions(self) -> list[Logged]:
        """The latest decisions, oldest first."""
        with self._lock:
            return list(self._log)

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

    def _info(self, pool: Pool) -> PoolInfo:
        """``pool`` as published, its workers' times on the scheduler's clock."""

        def on_scheduler(t: float | None) -> float | None:
            return None if t is None else t + self._offset

        waiting = sum(
            1 for c in self._claims.values() if c.pool.name == pool.name and c.fact().waiting
        )
        return PoolInfo(
            kernel=self.kernel,
            name=pool.name,
            backend=pool.backend,
            resources=dict(pool.resources),
            max_workers=pool.max_workers,
            waiting=waiting,
            launched=self._launched.get(pool.name, 0),
            workers=[
                PoolWorker(
                    name=w.name,
                    state=w.state,
                    started=w.started,
                    address=w.address,
                    since=w.since + self._offset,
                    idle_since=on_scheduler(w.idle_since),
                    error=w.error,
                )
                for w in self._workers
                if w.pool == pool.name
            ],
        )

    # --- the provisioner's thread ---------------------------------------------------------

    async def _main(self) -> None:
        from distributed import Client

        from taskcell.cluster.registry import this_kernel_id

        self._loop = asyncio.get_running_loop()
        self._woken = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()
        try:
            self.client = await Client(
                self.address, asynchronous=True, security=self._security, set_as_default=False
            )
            self.kernel = this_kernel_id() or self.client.id
            await self._listen()
        except (OSError, TimeoutError) as e:
            self._failure = e
            self._ready.set()
            return
        self._ready.set()
        try:
            while not self._closed:  # until _shutdown ends: leaving earlier would cancel it
                # A scheduler that does not answer: the cells say so, and the next tick tries.
                with contextlib.suppress(OSError, asyncio.TimeoutError):
                    if not self._closing:
                        await self._tick()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._woken.wait(), self._interval)
                self._woken.clear()
        except Exception as e:  # a bug here must fail the waiting cells, not leave them waiting
            self._failure = e
            raise

    async def _listen(self) -> None:
        """Subscribe to the sidebar's requests, and wait until the scheduler has the
        subscription (it travels apart from calls), measuring its clock meanwhile."""

        def look(topic: str, client: str, dask_scheduler: Any = None) -> tuple[bool, float]:
            import time  # runs on the scheduler, shipped by value

            broker = getattr(dask_scheduler, "_broker", None)  # distributed 2024.2 and later
            if broker is None:
                subscribers = dask_scheduler.event_subscriber.get(topic, ())
            else:
                subscribers = broker._topics[topic].subscribers if topic in broker._topics else ()
            return client in subscribers, time.time()

        self.client.subscribe_topic(START_TOPIC, self._on_request)
        deadline = time.monotonic() + config.seconds("scheduler-timeout")
        while True:
            sent = time.monotonic()
            try:
                listening, remote = await self.client.run_on_scheduler(
                    look, START_TOPIC, self.client.id
                )
            except (OSError, TimeoutError):
                raise
            except Exception:  # a scheduler that runs no function: its own clock is ours
                return
            self._offset = remote - (sent + time.monotonic()) / 2
            if listening or time.monotonic() > deadline:
                return
            await asyncio.sleep(0.01)  # the subscription is on its way in a batch

    def _on_request(self, event: tuple[float, Any]) -> None:
        """A request of the sidebar: ``{"kernel", "pool"}``, one more worker of a pool."""
        _, msg = event
        if not isinstance(msg, dict) or msg.get("kernel") != self.kernel:
            return
        pool = str(msg.get("pool"))
        with self._lock:
            self._asked[pool] = self._asked.get(pool, 0) + 1
        self._woken.set()

    async def _tick(self) -> None:
        with self._lock:
            quiet = not self._claims and not self._asked
            quiet = quiet and all(w.state in ("retired", "failed") for w in self._workers)
        if quiet:  # nothing to watch: do not ask the scheduler every interval
            await self._publish()
            return
        identity = await self.client.scheduler.identity(n_workers=-1)
        processing = await self.client.scheduler.processing()
        busy = {address for address, keys in processing.items() if keys}
        on = {str(key): address for address, keys in processing.items() for key in keys}
        with self._lock:  # the name each worker is listed under, as its handle says (a
            # Gateway names its workers), mapped to ours for the decision
            listed_as = {n: getattr(h, "name", None) for n, h in self._handles.items()}
            ours = {str(listed): n for n, listed in listed_as.items() if listed is not None}
        seen = {
            ours.get(str(w.get("name")), str(w.get("name"))): Seen(
                address=address, resources=w.get("resources") or {}, busy=address in busy
            )
            for address, w in identity["workers"].items()
        }
        ended = await self._ended()
        with self._lock:
            for key, c in list(self._claims.items()):
                if c.future.done():
                    del self._claims[key]
                    self._changed = True
                elif c.worker != on.get(key):
                    c.worker = on.get(key)
                    self._changed = True
            now = _now()
            decision = decide(
                claims=[c.fact() for c in self._claims.values()],
                workers=[
                    dataclasses.replace(w, ended=ended.get(w.name)) if w.name in ended else w
                    for w in self._workers
                ],
                seen=seen,
                pools=self._known,
                asked=self._asked,
                now=now,
            )
            self._asked = {}
            starts = self._apply(decision, now)
        for w in starts:
            self._spawn(self._start(w))
        for name in decision.retire:
            self._spawn(self._retire(name))
        for name in decision.stop:
            self._spawn(self._stop(name))
        await self._publish()

    async def _ended(self) -> dict[str, str]:
        """Why each starting worker's process or job ended, where it did."""
        from taskcell.cluster.launch import ended

        with self._lock:
            starting = [
                (w.name, self._known[w.pool], self._handles[w.name])
                for w in self._workers
                if w.state == "starting" and w.name in self._handles
            ]
        found = {}
        for name, pool, handle in starting:
            why = await ended(pool, handle)
            if why is not None:
                found[name] = why
        return found

    def _apply(self, decision: Decision, now: _Monotonic) -> list[Worker]:
        """Take ``decision`` (under the lock); the workers it asks to start, now recorded."""
        if list(decision.workers) != self._workers:
            self._changed = True
        self._workers = list(decision.workers)
        for w in decision.failed:
            self._fail_claims(w)
        self._note(*decision.log)
        starts = []
        for name in decision.start:
            w = Worker(name=f"{name}-{uuid.uuid4().hex[:6]}", pool=name, asked_at=now, since=now)
            self._workers.append(w)
            self._launched[name] = self._launched.get(name, 0) + 1
            starts.append(w)
            self._changed = True
        for pool in {w.pool for w in decision.failed} | {w.pool for w in self._workers}:
            self._forget_ended(pool)
        return starts

    def _note(self, *entries: Logged) -> None:
        for entry in entries:
            self._log.append(entry)
            log.debug("pool %s: %s %s: %s", entry.pool, entry.action, entry.worker, entry.why)

    def _fail_claims(self, w: Worker) -> None:
        """Fail the tasks waiting for ``w``'s pool with the reason ``w`` failed."""
        for c in self._claims.values():
            if c.pool.name == w.pool and c.worker is None and c.error is None:
                c.error = w.error
                if not c.followed:
                    self._spawn(asyncio.to_thread(c.future.cancel, reason="taskcell", msg=w.error))

    def _find(self, name: str) -> Worker | None:
        return next((w for w in self._workers if w.name == name), None)

    def _replace(self, name: str, **changes: Any) -> Worker | None:
        """Change the worker ``name`` (under the lock); the worker as changed."""
        for i, w in enumerate(self._workers):
            if w.name == name:
                self._workers[i] = dataclasses.replace(w, **changes)
                self._changed = True
                return self._workers[i]
        return None

    def _enter(self, name: str, state: PoolWorkerState, why: str | None = None) -> Worker | None:
        """Move the worker ``name`` to ``state`` now (under the lock)."""
        w = self._find(name)
        if w is None:
            return None
        moved = w.enter(state, _now(), why)
        return self._replace(
            name,
            state=moved.state,
            since=moved.since,
            error=moved.error,
            idle_since=moved.idle_since,
        )

    async def _start(self, w: Worker) -> None:
        from taskcell.cluster.launch import describe, make_worker

        pool = self._known[w.pool]
        try:
            handle = make_worker(pool, self.address, w.name, self._security)
            with self._lock:
                self._handles[w.name] = handle
                # What it is, known now (its pid or job id, once started): the scheduler may
                # list the worker, and a failure name it, before the start below returns.
                self._replace(w.name, started=describe(pool, handle))
            await handle  # as SpecCluster starts a worker: ProcessInterface or Server
        except Exception as e:  # the backend's error, whatever it is, is the reason to show
            why = str(e).strip() or type(e).__name__
            with self._lock:
                failed = self._enter(w.name, "failed", w.failure(why))
                if failed is not None:
                    self._fail_claims(failed)
                self._note(Logged(at=_now(), pool=w.pool, action="fail", worker=w.name, why=why))
            return
        with self._lock:
            self._replace(w.name, started=describe(pool, handle))
        self._wake()

    async def _retire(self, name: str) -> None:
        with self._lock:
            w = self._find(name)
        if w is None:
            return
        if w.address is not None:
            try:
                retired = await self.client.retire_workers(workers=[w.address], close_workers=True)
            except (OSError, TimeoutError):
                retired = {}
            with self._lock:
                current = self._find(name)
                if w.address not in retired and current and current.state == "retiring":
                    # It keeps results no other worker can take: keep it.
                    self._enter(name, "running")
                    self._replace(name, idle_since=_now())
                    why = "the scheduler kept it: no other worker can take its results"
                    self._note(
                        Logged(at=_now(), pool=w.pool, action="retire", worker=name, why=why)
                    )
                    return
        await self._stop(name)
        with self._lock:
            current = self._find(name)
            if current is not None and current.state == "retiring":
                self._enter(name, "retired")
            self._forget_ended(w.pool)

    async def _stop(self, name: str) -> None:
        with self._lock:
            handle = self._handles.pop(name, None)
        if handle is None:
            return
        try:
            await handle.close()
        except Exception as e:  # report, and go on stopping the others
            with self._lock:
                w = self._find(name)
                if w is not None:
                    self._replace(name, error=f"{w.error or ''} (stopping it failed: {e})".strip())

    def _forget_ended(self, pool: str) -> None:
        ended = [w for w in self._workers if w.pool == pool and w.state in ("retired", "failed")]
        for w in ended[:-ENDED_KEPT]:
            self._workers.remove(w)

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _publish(self) -> None:
        """Log the pools on :data:`POOLS_TOPIC` when they changed, for the panel and the
        sidebar."""
        with self._lock:
            if not self._changed:
                return
            self._changed = False
        pools = self.state(self._pools)
        event = {"kernel": self.kernel, "client": self.client.id, "pools": pools}
        await self.client.log_event(POOLS_TOPIC, event)

    async def _shutdown(self) -> None:
        self._closing = True
        with self._lock:
            names = [w.name for w in self._workers if w.state in UP]
            for name in names:
                self._enter(name, "retired", "the kernel closed")
        await asyncio.gather(*(self._stop(name) for name in names), return_exceptions=True)
        await self.client.close()
        self._closed = True
        self._woken.set()


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
    asked for, so the panel and the sidebar list them, and the sidebar may start one. Nothing
    without pools, with pools configured wrong, or a scheduler that does not answer:
    connecting must not fail for that, and a cell that needs a pool says what is wrong.

    Called for each scheduler this kernel connects to
    (:func:`taskcell.cluster.connect.on_connected`).
    """
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


def waiting_status(client: Client, key: str) -> Wait | None:
    """What the claimed task ``key`` waits for (a ``pool-starting`` :class:`Wait`, in words
    ``starting a worker of pool a100x2 (SLURM job 17): 12 s``), or None when it waits for no
    pool.

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


def pool_state(client: Client) -> list[PoolInfo]:
    """The configured pools, and the workers this kernel started for each on ``client``'s
    scheduler, for the panel and the sidebar (times on the scheduler's clock)."""
    from taskcell.cluster.registry import this_kernel_id

    pools = configured_pools()
    provisioner = _provisioners.get(client.scheduler.address)
    if provisioner is not None:
        return provisioner.state(pools)
    kernel = this_kernel_id() or client.id
    return [
        PoolInfo(
            kernel=kernel,
            name=pool.name,
            backend=pool.backend,
            resources=dict(pool.resources),
            max_workers=pool.max_workers,
            waiting=0,
            launched=0,
            workers=[],
        )
        for pool in pools
    ]


def decisions(client: Client) -> list[Logged]:
    """The last :data:`DECISIONS_KEPT` decisions of this kernel's pools on ``client``'s
    scheduler, oldest first, each with its reason (``at`` on this kernel's
    ``time.monotonic()``): what to read when a pool starts or retires workers unexpectedly."""
    provisioner = _provisioners.get(client.scheduler.address)
    return provisioner.decisions() if provisioner is not None else []


def published_pools(client: Client) -> dict[str, list[PoolInfo]]:
    """The latest pools each kernel logged on ``client``'s scheduler (:data:`POOLS_TOPIC`), by
    kernel id. To follow changes, subscribe with ``client.subscribe_topic(POOLS_TOPIC, ...)``;
    each event is ``{"kernel", "client", "pools"}``, ``client`` the id of the provisioner's
    own client. The occupancy snapshot carries them too (:mod:`taskcell.planner.schema`)."""
    latest: dict[str, list[PoolInfo]] = {}
    for _, event in client.get_events(POOLS_TOPIC):
        latest[str(event["kernel"])] = event["pools"]
    return latest


def close_all() -> None:
    """Stop every worker the pools started in this process (at exit, and in tests)."""
    with _made:
        provisioners = list(_provisioners.values())
        _provisioners.clear()
    for provisioner in provisioners:
        provisioner.close()


connect.on_connected(announce)
