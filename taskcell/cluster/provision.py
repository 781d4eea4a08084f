"""Start a pool's worker when a submitted task needs one, share it, and retire it when idle.

:func:`claim` records a task that no live worker could run but a pool's worker can (see
:func:`taskcell.cluster.submit.plan`); the task itself is already submitted and waits in Dask's
``no-worker`` state until a worker that meets it connects. One :class:`Provisioner` per
scheduler, in the kernel, then works on a thread of its own, with its own event loop and
asynchronous client, every ``taskcell.provisioning.interval`` and whenever something changes.
It only gathers facts and does I/O: it asks the scheduler which workers it lists and what they
process (a worker its backend named, a Gateway's, known by its handle's ``name``), asks each
backend whether a starting worker's process or job has ended, hands these facts, the time and
what it saw happen since (a start failed, the scheduler kept a worker, a stop failed, the kernel
closes) to :func:`taskcell.cluster.provision_core.decide`, which holds every rule and every
change of a worker's state, keeps the decision, and does what it says:

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
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from taskcell import config
from taskcell.cluster.pool_records import POOLS_TOPIC, START_TOPIC, UP, PoolInfo, PoolWorker
from taskcell.cluster.pools import Pool, configured_pools
from taskcell.cluster.provision_core import (
    Claim,
    Decision,
    Fact,
    Logged,
    Monotonic,
    Placement,
    Seen,
    Worker,
    decide,
    waiting,
)
from taskcell.cluster.waits import Wait
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

#: Decisions kept, the latest last (:func:`decisions`).
DECISIONS_KEPT = 200


def _now() -> Monotonic:
    return Monotonic(time.monotonic())


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
    """The pools' workers on one scheduler: watched, decided on and acted for from a thread."""

    def __init__(self, address: str, security: Any) -> None:
        self.address = address
        #: How often it looks (taskcell.provisioning.interval); a bad one starts nothing.
        self._interval = config.seconds("provisioning.interval")
        self._security = security
        self._lock = threading.Lock()
        self._workers: list[Worker] = []  #: in the order asked for, as last decided
        self._leaving: frozenset[str] = frozenset()  #: as last decided
        self._told: list[Fact] = []  #: what happened since the last decision
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

    def status(self, key: str, now: Monotonic) -> Wait | None:
        """What the claimed task ``key`` waits for at ``now``; None when it is not claimed.

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
            return waiting(c.pool, c.worker, self._workers, now)

    def leaving(self) -> set[str]:
        """Addresses of its workers retiring or just retired."""
        with self._lock:
            return set(self._leaving)

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
        """Gather the facts, decide, and do what was decided."""
        with self._lock:
            watching = self._claims or self._asked or any(w.state in UP for w in self._workers)
        # Nothing to watch: do not ask the scheduler every interval, but let time pass.
        seen, on = await self._look() if watching else ({}, {})
        ended = await self._ended()
        with self._lock:
            if self._closing:
                return
            self._told += ended
            self._place(on)
            decision = self._decide(seen)
        for w in decision.launch:
            self._spawn(self._start(w))
        for name in decision.retire:
            self._spawn(self._retire(name))
        for name in decision.stop:
            self._spawn(self._stop(name))
        await self._publish()

    async def _look(self) -> tuple[dict[str, Seen], dict[str, str]]:
        """What the scheduler says of each worker it lists, by our name for it, and the worker
        each task processing is on."""
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
        return seen, on

    async def _ended(self) -> list[Fact]:
        """The starting workers whose process or job ended, and why."""
        from taskcell.cluster.launch import ended

        with self._lock:
            starting = [
                (w.name, self._known[w.pool], self._handles[w.name])
                for w in self._workers
                if w.state == "starting" and w.name in self._handles
            ]
        return [
            Fact("start-failed", name, why)
            for name, pool, handle in starting
            if (why := await ended(pool, handle)) is not None
        ]

    def _place(self, on: Mapping[str, str]) -> None:
        """Drop the claims whose task ended, and note the worker the others are on (under
        the lock)."""
        for key, c in list(self._claims.items()):
            if c.future.done():
                del self._claims[key]
                self._changed = True
            elif c.worker != on.get(key):
                c.worker = on.get(key)
                self._changed = True

    def _decide(self, seen: Mapping[str, Seen]) -> Decision:
        """Decide from ``seen`` and what was told since the last decision, and keep the
        decision (under the lock)."""
        decision = decide(
            claims=[c.fact() for c in self._claims.values()],
            workers=self._workers,
            seen=seen,
            pools=self._known,
            asked=self._asked,
            now=_now(),
            tag=uuid.uuid4().hex[:5],  # with the count, as long as a name was: the sidebar fits it
            facts=self._told,
        )
        self._told, self._asked = [], {}
        self._changed = self._changed or list(decision.workers) != self._workers
        self._workers, self._leaving = list(decision.workers), decision.leaving
        for w in decision.launch:
            self._launched[w.pool] = self._launched.get(w.pool, 0) + 1
        for w in decision.failed:
            self._fail_claims(w)
        for entry in decision.log:
            self._log.append(entry)
            log.debug("pool %s: %s %s: %s", entry.pool, entry.action, entry.worker, entry.why)
        return decision

    def _tell(self, fact: Fact) -> None:
        """Record what happened, for the next decision, and have it taken now."""
        with self._lock:
            self._told.append(fact)
        self._wake()

    def _fail_claims(self, w: Worker) -> None:
        """Fail the tasks waiting for ``w``'s pool with the reason ``w`` failed."""
        for c in self._claims.values():
            if c.pool.name == w.pool and c.worker is None and c.error is None:
                c.error = w.error
                if not c.followed:
                    self._spawn(asyncio.to_thread(c.future.cancel, reason="taskcell", msg=w.error))

    async def _start(self, w: Worker) -> None:
        from taskcell.cluster.launch import describe, make_worker

        pool = self._known[w.pool]
        try:
            handle = make_worker(pool, self.address, w.name, self._security)
            with self._lock:
                if self._closing:  # shut down since the start was decided: it never starts
                    return
                self._handles[w.name] = handle
            # What it is, known now (its pid or job id, once started): the scheduler may
            # list the worker, and a failure name it, before the start below returns.
            self._tell(Fact("started", w.name, describe(pool, handle)))
            await handle  # as SpecCluster starts a worker: ProcessInterface or Server
        except Exception as e:  # the backend's error, whatever it is, is the reason to show
            self._tell(Fact("start-failed", w.name, str(e).strip() or type(e).__name__))
            return
        self._tell(Fact("started", w.name, describe(pool, handle)))

    async def _retire(self, name: str) -> None:
        """Retire ``name`` through the scheduler, then stop it; tell which happened."""
        with self._lock:
            address = next((w.address for w in self._workers if w.name == name), None)
        if address is not None:
            try:
                retired = await self.client.retire_workers(workers=[address], close_workers=True)
            except (OSError, TimeoutError):
                retired = {}
            if address not in retired:  # it keeps results no other worker can take
                self._tell(Fact("retire-refused", name))
                return
        await self._stop(name)
        self._tell(Fact("retired", name))

    async def _stop(self, name: str) -> None:
        with self._lock:
            handle = self._handles.pop(name, None)
        if handle is None:
            return
        try:
            await handle.close()
        except Exception as e:  # report, and go on stopping the others
            self._tell(Fact("stop-failed", name, str(e)))

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
        with self._lock:
            self._closing = True
            self._told.append(Fact("closing"))
            decision = self._decide({})
        await asyncio.gather(*(self._stop(name) for name in decision.stop), return_exceptions=True)
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

    A hook of :func:`taskcell.cluster.connect.on_connected`, registered by the entry points:
    the extension as it loads, :func:`taskcell.cluster.submit.submit` for the Python API.
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
    return provisioner.status(key, _now()) if provisioner is not None else None


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
