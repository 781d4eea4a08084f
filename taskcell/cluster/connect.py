"""Which cluster taskcell submits to, and what its live workers offer.

In order: an address given with :func:`use_address` (``%task_cluster ADDRESS``); a
``distributed.Client`` the user already made; Dask's ``scheduler-address`` config (which
``DASK_SCHEDULER_ADDRESS`` sets); else an embedded cluster of worker processes on this machine
that advertise what it has.

The embedded cluster is started, and connected to, in a thread of its own (:class:`Embedded`):
:func:`start_early` begins it when the extension loads, and a cell that needs it waits for it.
An interrupt ends that wait in one line and leaves the start going on, so the next cell finds
the same one cluster. A cluster started early that no cell used is stopped as soon as the
user picks another one.

The cluster in use is recorded for the Jupyter server (:mod:`taskcell.cluster.registry`) at the
moment it is chosen, under this module's lock, so the user's choice always wins over an
embedded start still under way. Modules above this one learn of each scheduler connected to
through :func:`on_connected` (the provisioner publishes the configured pools there).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

import dask.config

from taskcell import config
from taskcell.cluster import interruptible, registry
from taskcell.cluster.embedded import EmbeddedCluster, wants_tls, worker_specs
from taskcell.cluster.mapping import WorkerCapacity
from taskcell.cluster.quiet import quiet_distributed
from taskcell.errors import ClusterError, Interrupted

if TYPE_CHECKING:
    from distributed import Client
    from distributed.security import Security

#: How long a view of the live workers is trusted before it is fetched again (seconds).
WORKERS_TTL = 1.0
#: How long one question to the scheduler may take before it counts as unanswered (seconds).
ANSWER_TIMEOUT = 2.0
#: How long the embedded cluster's workers may take to connect once its scheduler is up.
WORKERS_START_TIMEOUT = 60.0

_lock = threading.RLock()  # guards the module's state, never held while waiting on the cluster
_chosen: str | None = None  # the address given with %task_cluster
_client: Client | None = None  # taskcell's client of a chosen or configured address
_client_for: str | None = None  # the address _client was made for
_embedded: Embedded | None = None
_workers: dict[str, tuple[float, list[WorkerCapacity]]] = {}
_answered: dict[str, float] = {}  # client id -> when its scheduler last answered
_asking: dict[str, concurrent.futures.Future] = {}  # client id -> its question in flight
#: (client id, worker address) -> (the scheduler's last_seen of the worker, when it changed)
_heard: dict[tuple[str, str], tuple[object, float]] = {}
_recorded_address: str | None = None  # the address last recorded in the registry
_announced: dict[str, Client] = {}  # scheduler address -> the client hooks were called with
_securities: dict[str, Security] = {}  # scheduler address -> the Security it was chosen with
_hooks: list[Callable[[Client], None]] = []

#: Told, in a sentence, when a cell has to wait for the embedded cluster to start (the
#: extension shows it under the cell).
on_wait: Callable[[str], None] | None = None


class Embedded:
    """The embedded cluster, started and connected to in a thread of its own.

    A cell waits for :meth:`client`; an interrupt ends the wait, not the start. :meth:`close`
    stops it at any moment, its start included.
    """

    def __init__(self, cluster: EmbeddedCluster | None = None) -> None:
        """Start the cluster, or adopt ``cluster``, already started."""
        self.cluster = cluster
        self.used = False  #: a cell ran on it
        self.replaces: str | None = None  #: the address of a cluster used before, now stopped
        self._client: Client | None = None
        self._error: Exception | None = None
        self._closed = False
        self._done = threading.Event()
        threading.Thread(target=self._start, name="taskcell-embedded-start", daemon=True).start()

    def _start(self) -> None:
        client = None
        try:
            cluster = self.cluster or start_embedded()
            with _lock:
                self.cluster = cluster
            if self._closed:
                return
            address = cluster.address()
            client = _connect(address, cluster.security)
            try:
                client.wait_for_workers(cluster.n_workers, timeout=WORKERS_START_TIMEOUT)
            except (OSError, asyncio.TimeoutError, TimeoutError):
                raise ClusterError(
                    f"the embedded cluster's workers did not connect within "
                    f"{WORKERS_START_TIMEOUT:g} s"
                ) from None
            with _lock:
                current = _embedded is self and not self._closed
                if current:  # else the user chose another cluster meanwhile: theirs stays
                    self._client = client
                    _record(address)
            if current:
                _announce(client)
            else:
                client.close()
        except Exception as e:
            self._error = e
            for resource in (client, self.cluster):
                if resource is not None:
                    resource.close()
        finally:
            self._done.set()
            if self._closed:
                self.close()

    def started(self) -> Client | None:
        """The client once the start has ended, waiting without a word under any cell; None
        where it failed (the next cell says why)."""
        self._done.wait()
        return self._client

    def client(self) -> Client:
        """The client of the started cluster, waiting for the start; the start's error."""
        try:
            if not self._done.is_set() and on_wait is not None:
                before = f"the cluster at {self.replaces} was stopped; " if self.replaces else ""
                on_wait(f"{before}waiting for the embedded cluster to start on this machine")
            interruptible.wait(self._done)
        except KeyboardInterrupt:
            raise Interrupted(
                "the embedded cluster was still starting; it goes on starting, and the next "
                "cell uses it"
            ) from None
        if self._error is not None:
            raise self._error
        assert self._client is not None
        return self._client

    def usable(self) -> bool:
        """Starting, or started and running; False once it failed, stopped or was closed."""
        if self._closed:
            return False
        if not self._done.is_set():
            return True
        client, cluster = self._client, self.cluster
        return (
            client is not None and client.status == "running" and bool(cluster and cluster.alive())
        )

    def ready_client(self) -> Client | None:
        """The client if the cluster is up now; never waits."""
        return self._client if self._done.is_set() and self.usable() else None

    def close(self) -> None:
        """Stop the cluster and close its client, without the client's reconnection log."""
        with _lock:
            self._closed = True
            resources = (self._client, self.cluster)
        for resource in resources:
            if resource is not None:
                with (
                    contextlib.suppress(OSError, asyncio.TimeoutError, TimeoutError),
                    quiet_distributed(),
                ):
                    resource.close()


def start_early(cluster: EmbeddedCluster | None = None) -> Embedded | None:
    """Start the embedded cluster in the background, or adopt ``cluster`` (started before
    Dask was imported here), if no cluster is configured or chosen (``%load_ext`` calls
    this): the first cell then finds it up. None where it did not, ``cluster`` closed."""
    global _embedded
    with _lock:
        chosen = _chosen or _configured_address() or _user_client()
        if not chosen and (_embedded is None or not _embedded.usable()):
            _embedded = Embedded(cluster)
            return _embedded
    if cluster is not None:
        cluster.close()
    return None


def _configured_address() -> str | None:
    return dask.config.get("scheduler-address", None)


def _user_client() -> Client | None:
    """The default client the user made, if any (without importing distributed for it)."""
    import sys

    if "distributed" not in sys.modules:
        return None
    from distributed.client import default_client

    try:
        return default_client()
    except ValueError:
        return None


def drop_unused() -> None:
    """Stop an embedded cluster that started early but no cell used, where the user has since
    chosen another cluster (``%task_cluster``, a Client, ``scheduler-address``)."""
    global _embedded
    with _lock:
        embedded = _embedded
        if embedded is None or embedded.used:
            return
        if _chosen is None and not _configured_address() and not _user_client():
            return
        _embedded = None
    embedded.close()


def settled() -> bool:
    """Whether no embedded cluster started early waits unused (nothing for drop_unused)."""
    return _embedded is None or _embedded.used


def current_client() -> Client:
    """The client to submit to, connecting or starting the embedded cluster on first use.

    A cluster that was chosen (``%task_cluster``, or Dask's ``scheduler-address``) and went away
    is reconnected when it is back, and is an error naming it meanwhile: never a silent switch
    to another cluster. An interrupt while the embedded cluster starts is
    :class:`~taskcell.errors.Interrupted`, in one line; the start goes on.
    """
    global _client, _client_for
    if _chosen is None:
        user = _user_client()
        if user is not None:
            drop_unused()
            with _lock:
                _record(user.scheduler.address)
            _announce(user)
            return user
    address = _chosen or _configured_address()
    if not address:
        with _lock:
            embedded = _embedded_start()
        client = embedded.client()
        embedded.used = True
        return client
    drop_unused()
    with _lock:
        if _client is not None and _client_for == address and _client.status == "running":
            return _client
        previous, _client = _client, None
    if previous is not None:
        with contextlib.suppress(OSError, asyncio.TimeoutError, TimeoutError):
            previous.close(timeout=ANSWER_TIMEOUT)
    client = _connect(address)
    with _lock:
        _client, _client_for = client, address
        _record(address)
    _announce(client)
    return client


def existing_client() -> Client | None:
    """The client :func:`current_client` would give, if it is connected now; never connects."""
    if _chosen is None:
        user = _user_client()
        if user is not None:
            return user
    if _client is not None and _client.status == "running":
        return _client
    return _embedded.ready_client() if _embedded is not None else None


def _embedded_start() -> Embedded:
    """The embedded cluster, starting or started; a new start where there is none usable.
    Called with ``_lock`` held."""
    global _embedded
    if _embedded is None or not _embedded.usable():
        stopped = _embedded
        _embedded = Embedded()
        if stopped is not None:
            if stopped.used and stopped.cluster is not None:  # it started: a cell ran on it
                _embedded.replaces = stopped.cluster.address()
            stopped.close()
    return _embedded


def _record(address: str) -> None:
    """Note ``address`` in the registry the Jupyter server reads, as the cluster this kernel
    uses now. Called with ``_lock`` held, where the choice is made, so that the last address
    recorded is the one chosen last."""
    global _recorded_address
    if address == _recorded_address:
        return
    _recorded_address = address
    try:
        registry.record(address)
    except OSError as e:  # the sidebar will not see this kernel; %%task works regardless
        warnings.warn(f"taskcell: cannot record the cluster for JupyterLab: {e}", stacklevel=3)


def on_connected(hook: Callable[[Client], None]) -> None:
    """Call ``hook(client)`` once for each scheduler this kernel connects to: at once for those
    it is connected to already, then as it connects. A hook must not raise; it runs in the
    thread that connected, outside this module's lock. Registering a hook again does nothing,
    so each entry point registers the hooks it needs (nothing registers one on import)."""
    with _lock:
        if hook in _hooks:
            return
        _hooks.append(hook)
        connected = [c for c in _announced.values() if c.status == "running"]
    for client in connected:
        hook(client)


def _announce(client: Client) -> None:
    """Run the :func:`on_connected` hooks for ``client``'s scheduler, the first time."""
    address = client.scheduler.address
    with _lock:
        if address in _announced:
            return
        _announced[address] = client
        hooks = list(_hooks)
    for hook in hooks:
        hook(client)


def use_address(address: str, security: Security | None = None) -> Client:
    """Point taskcell at the scheduler at ``address`` (``%task_cluster tcp://...``), with
    ``security`` (None: Dask's ``distributed.comm.tls.*`` config); an unreachable address is
    an error and changes nothing."""
    global _chosen, _client, _client_for, _embedded
    client = _connect(address, security)
    with _lock:
        previous = (_client, _embedded)  # the embedded cluster frees the machine
        _chosen, _client, _client_for, _embedded = address, client, address, None
        _record(address)
    _announce(client)
    for resource in previous:
        if resource is not None:
            resource.close()
    return client


def _connect(address: str, security: Security | None = None) -> Client:
    """A client of ``address`` with ``security``; where None, the one ``address`` was last
    given (a reconnection keeps it), else Dask's TLS config."""
    from distributed import Client

    if security is not None:
        _securities[address] = security
    security = security or _securities.get(address)
    _check_tls(address, security)
    timeout = config.seconds("scheduler-timeout")
    try:
        client = Client(address, set_as_default=False, timeout=timeout, security=security)
    except (OSError, asyncio.TimeoutError, TimeoutError) as e:
        raise ClusterError(
            f"cannot reach the scheduler at {address} within {timeout:g} s ({e}); start it "
            f"again, or choose another cluster with %task_cluster ADDRESS"
        ) from None
    _answered[client.id] = time.monotonic()
    return client


def _check_tls(address: str, security: Security | None) -> None:
    """ClusterError for a ``tls://`` address without a certificate to speak TLS with."""
    if not address.startswith("tls://"):
        return
    from distributed.security import Security

    tls = (security or Security()).get_tls_config_for_role("client")
    if not (tls["ca_file"] and tls["cert"]):
        raise ClusterError(
            f"the scheduler at {address} speaks TLS, and no certificate is given: set Dask's "
            f"distributed.comm.tls.ca-file, distributed.comm.tls.client.cert and "
            f"distributed.comm.tls.client.key, or pass a distributed.Security"
        )


def start_embedded() -> EmbeddedCluster:
    """Start worker processes on this machine that advertise its cores, memory and GPUs, over
    TLS where this process's config asks for it (returns at once;
    :meth:`EmbeddedCluster.address` waits for the scheduler)."""
    return EmbeddedCluster(worker_specs(), tls=wants_tls())


def live_workers(client: Client, refresh: bool = False, wait: bool = True) -> list[WorkerCapacity]:
    """The client's live workers, fetched at most once a :data:`WORKERS_TTL`; ClusterError if
    the scheduler does not answer within :data:`ANSWER_TIMEOUT` (see :func:`silence`).

    One question is in flight per client, whoever asks (every background cell of a kernel
    shares it), and it is not withdrawn when a caller stops waiting for it: a scheduler that
    answers slowly still answers, and is not silent while it does. With ``wait`` False, a
    question in flight is not waited for: the last view is returned, or ClusterError once the
    scheduler has been silent past ``taskcell.scheduler-timeout`` (one thread following many
    cells must not wait on each).

    A worker the scheduler has not heard from for ``taskcell.scheduler-timeout`` (its
    ``last_seen`` unchanged that long, as this kernel sees it, whatever the two clocks say) is
    not live: a network cut between it and the scheduler leaves it listed for minutes.
    """
    fetched_at, workers = _workers.get(client.id, (0.0, []))
    if not refresh and time.monotonic() - fetched_at <= WORKERS_TTL:
        return workers
    asked = _ask(client, again=refresh)
    if not wait and not asked.done():
        if silence(client) > config.seconds("scheduler-timeout"):
            raise ClusterError(f"the scheduler at {client.scheduler.address} does not answer")
        return workers
    try:
        asked.result(timeout=ANSWER_TIMEOUT)
    except (concurrent.futures.TimeoutError, asyncio.TimeoutError, TimeoutError):
        raise ClusterError(
            f"the scheduler at {client.scheduler.address} did not answer within "
            f"{ANSWER_TIMEOUT:g} s"
        ) from None
    except OSError as e:
        why = str(e) or type(e).__name__
        raise ClusterError(
            f"the scheduler at {client.scheduler.address} did not answer ({why})"
        ) from None
    # Read from the answer itself: result() returns before the callback storing it has run.
    return _answer(client.id, asked)


def _ask(client: Client, again: bool) -> concurrent.futures.Future:
    """The question to ``client``'s scheduler for its workers that is in flight, or a new one
    (``again``: a new one anyway); its answer is stored by :func:`_answer`."""
    with _lock:
        asked = _asking.get(client.id)
        if asked is None or asked.done() or again:
            question = client.scheduler.identity(n_workers=-1)
            loop = getattr(client.loop, "asyncio_loop")  # noqa: B009 (tornado's IOLoop, untyped)
            asked = asyncio.run_coroutine_threadsafe(question, loop)
            asked.add_done_callback(lambda done: _answer(client.id, done))
            _asking[client.id] = asked
    return asked


def _answer(client_id: str, asked: concurrent.futures.Future) -> list[WorkerCapacity]:
    """The live workers the scheduler's answer names, stored with when it came unless a newer
    question has been asked since (its answer will be)."""
    if asked.cancelled() or asked.exception() is not None:
        return []
    identity = asked.result()
    now = time.monotonic()
    _answered[client_id] = now
    limit = config.seconds("scheduler-timeout")
    workers = [
        WorkerCapacity(
            address=address,
            name=str(w.get("name", address)),
            nthreads=int(w.get("nthreads", 0)),
            memory_limit=int(w.get("memory_limit") or 0),
            resources=dict(w.get("resources") or {}),
        )
        for address, w in identity["workers"].items()
        if now - _heard_since(client_id, address, w.get("last_seen"), now) <= limit
    ]
    with _lock:
        if _asking.get(client_id) is asked:
            _workers[client_id] = (now, workers)
    return workers


def _heard_since(client_id: str, worker: str, last_seen: object, now: float) -> float:
    """When (this kernel's clock) the scheduler's ``last_seen`` of ``worker`` last changed;
    ``now`` where the scheduler does not say."""
    key = (client_id, worker)
    previous = _heard.get(key)
    if last_seen is None or previous is None or previous[0] != last_seen:
        _heard[key] = (last_seen, now)
        return now
    return previous[1]


def departed(client: Client, live: list[WorkerCapacity]) -> list[str]:
    """The workers this kernel saw on ``client``'s scheduler that are not among ``live``."""
    here = {w.address for w in live}
    return sorted({a for c, a in list(_heard) if c == client.id and a not in here})


def forget_workers(client: Client) -> None:
    """Drop the cached view of ``client``'s workers: the next look fetches them."""
    _workers.pop(client.id, None)


def silence(client: Client) -> float:
    """Seconds since the client's scheduler last answered :func:`live_workers`."""
    return time.monotonic() - _answered.get(client.id, time.monotonic())


def not_answering(client: Client, consequence: str) -> ClusterError | None:
    """The error of a scheduler silent past ``taskcell.scheduler-timeout`` (None before):
    ``the scheduler at ... has not answered for 12 s (taskcell.scheduler-timeout is 10 s);
    nothing was submitted``, ``consequence`` last."""
    quiet, limit = silence(client), config.seconds("scheduler-timeout")
    if quiet <= limit:
        return None
    return ClusterError(
        f"the scheduler at {client.scheduler.address} has not answered for {quiet:.0f} s "
        f"(taskcell.scheduler-timeout is {limit:g} s); {consequence}"
    )


def answered_workers(client: Client, refresh: bool = False) -> list[WorkerCapacity]:
    """:func:`live_workers`, asked again while the scheduler is silent for less than
    ``taskcell.scheduler-timeout``; then the error :func:`not_answering` gives."""
    while True:
        try:
            return live_workers(client, refresh)
        except ClusterError:
            error = not_answering(client, "nothing was submitted")
            if error is not None:
                raise error from None
            time.sleep(0.2)  # a refused connection fails at once: do not spin


def close() -> None:
    """Close taskcell's client and the embedded cluster, if it started one."""
    global _chosen, _client, _client_for, _embedded
    with _lock:
        resources = (_client, _embedded)
        _chosen = _client = _client_for = _embedded = None
    for resource in resources:
        if resource is not None:
            resource.close()
    _workers.clear()
