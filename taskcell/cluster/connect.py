"""Which cluster taskcell submits to, and what its live workers offer.

In order: an address given with :func:`use_address` (``%task_cluster ADDRESS``); a
``distributed.Client`` the user already made; Dask's ``scheduler-address`` config (which
``DASK_SCHEDULER_ADDRESS`` sets); else an embedded cluster of worker processes on this machine
that advertise what it has, started on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import warnings
from typing import TYPE_CHECKING

import dask.config

from taskcell import config
from taskcell.cluster import provision, registry
from taskcell.cluster.detect import advertised_resources, detect_machine
from taskcell.cluster.embedded import EmbeddedCluster
from taskcell.cluster.mapping import WorkerCapacity
from taskcell.errors import ClusterError

if TYPE_CHECKING:
    from distributed import Client

#: How long a view of the live workers is trusted before it is fetched again (seconds).
WORKERS_TTL = 1.0
#: How long one question to the scheduler may take before it counts as unanswered (seconds).
ANSWER_TIMEOUT = 2.0

_chosen: str | None = None  # the address given with %task_cluster
_client: Client | None = None
_client_for: str | None = None  # the address _client was made for; None: the embedded cluster
_embedded: EmbeddedCluster | None = None
_workers: dict[str, tuple[float, list[WorkerCapacity]]] = {}
_answered: dict[str, float] = {}  # client id -> when its scheduler last answered
_registered: set[str] = set()


def current_client() -> Client:
    """The client to submit to, connecting or starting the embedded cluster on first use.

    A cluster that was chosen (``%task_cluster``, or Dask's ``scheduler-address``) and went away
    is reconnected when it is back, and is an error naming it meanwhile: never a silent switch
    to another cluster.
    """
    global _client, _client_for
    from distributed.client import default_client

    if _chosen is None:
        with contextlib.suppress(ValueError):
            return _recorded(default_client())
    address = _chosen or dask.config.get("scheduler-address", None)
    if _client is not None and _client_for == address and _client.status == "running":
        return _client
    if _client is not None:
        with contextlib.suppress(OSError, asyncio.TimeoutError, TimeoutError):
            _client.close(timeout=ANSWER_TIMEOUT)
        _client = None
    _client = _connect(address) if address else _connect(_embedded_cluster().scheduler_address)
    _client_for = address
    return _client


def existing_client() -> Client | None:
    """The client :func:`current_client` would give, if it is connected now; never connects."""
    from distributed.client import default_client

    if _chosen is None:
        with contextlib.suppress(ValueError):
            return default_client()
    return _client if _client is not None and _client.status == "running" else None


def _embedded_cluster() -> EmbeddedCluster:
    global _embedded
    if _embedded is None or not _embedded.alive():
        _embedded = start_embedded()
    return _embedded


def _recorded(client: Client) -> Client:
    """Note the client's scheduler in the registry the Jupyter server reads, and publish the
    configured pools there (once)."""
    address = client.scheduler.address
    if address not in _registered:
        _registered.add(address)
        try:
            registry.record(address)
        except OSError as e:  # the sidebar will not see this kernel; %%task works regardless
            warnings.warn(f"taskcell: cannot record the cluster for JupyterLab: {e}", stacklevel=2)
        provision.announce(client)
    return client


def use_address(address: str) -> Client:
    """Point taskcell at the scheduler at ``address`` (``%task_cluster tcp://...``); an
    unreachable address is an error and changes nothing."""
    global _chosen, _client, _client_for, _embedded
    client = _connect(address)
    for previous in (_client, _embedded):  # the embedded cluster frees the machine
        if previous is not None:
            previous.close()
    _chosen, _client, _client_for, _embedded = address, client, address, None
    return client


def _connect(address: str) -> Client:
    from distributed import Client

    timeout = config.get("scheduler-timeout")
    try:
        client = Client(address, set_as_default=False, timeout=timeout)
    except (OSError, asyncio.TimeoutError, TimeoutError) as e:
        raise ClusterError(
            f"cannot reach the scheduler at {address} within {timeout} ({e}); start it again, "
            f"or choose another cluster with %task_cluster ADDRESS"
        ) from None
    _answered[client.id] = time.monotonic()
    return _recorded(client)


def start_embedded() -> EmbeddedCluster:
    """Start worker processes on this machine that advertise its cores, memory and GPUs."""
    n = config.get("embedded-cluster.n-workers") or 1
    threads = config.get("embedded-cluster.threads-per-worker")
    shares = advertised_resources(detect_machine(), n)
    return EmbeddedCluster(
        {
            f"taskcell-{i}": {
                "nthreads": threads or max(1, int(share.resources.get("CPU", 1))),
                "memory_limit": int(share.resources.get("MEMORY", 0)) or "auto",
                "resources": share.resources,
                "env": share.environ(),
            }
            for i, share in enumerate(shares)
        }
    )


def live_workers(client: Client, refresh: bool = False) -> list[WorkerCapacity]:
    """The client's live workers, fetched at most once a :data:`WORKERS_TTL`; ClusterError if
    the scheduler does not answer within :data:`ANSWER_TIMEOUT` (see :func:`silence`)."""
    fetched_at, workers = _workers.get(client.id, (0.0, []))
    if refresh or time.monotonic() - fetched_at > WORKERS_TTL:
        try:
            identity = client.sync(
                client.scheduler.identity, n_workers=-1, callback_timeout=ANSWER_TIMEOUT
            )
        except (OSError, asyncio.TimeoutError, TimeoutError) as e:
            raise ClusterError(
                f"the scheduler at {client.scheduler.address} did not answer ({e!r})"
            ) from None
        _answered[client.id] = time.monotonic()
        workers = [
            WorkerCapacity(
                address=address,
                name=str(w.get("name", address)),
                nthreads=int(w.get("nthreads", 0)),
                memory_limit=int(w.get("memory_limit") or 0),
                resources=dict(w.get("resources") or {}),
            )
            for address, w in identity["workers"].items()
        ]
        _workers[client.id] = (time.monotonic(), workers)
    return workers


def silence(client: Client) -> float:
    """Seconds since the client's scheduler last answered :func:`live_workers`."""
    return time.monotonic() - _answered.get(client.id, time.monotonic())


def close() -> None:
    """Close taskcell's client and the embedded cluster, if it started one."""
    global _chosen, _client, _client_for, _embedded
    for resource in (_client, _embedded):
        if resource is not None:
            resource.close()
    _chosen = _client = _client_for = _embedded = None
    _workers.clear()
