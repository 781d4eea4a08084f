"""Which cluster taskcell submits to, and what its live workers offer.

In order: an address given with :func:`use_address` (``%task_cluster ADDRESS``); a
``distributed.Client`` the user already made; Dask's ``scheduler-address`` config (which
``DASK_SCHEDULER_ADDRESS`` sets); else an embedded cluster of worker processes on this machine
that advertise what it has, started on first use.
"""

from __future__ import annotations

import logging
import time
import warnings
from typing import TYPE_CHECKING

import dask.config

from taskcell import config
from taskcell.cluster import registry
from taskcell.cluster.detect import advertised_resources, detect_machine
from taskcell.cluster.mapping import WorkerCapacity

if TYPE_CHECKING:
    from distributed import Client, SpecCluster

#: How long a view of the live workers is trusted before it is fetched again (seconds).
WORKERS_TTL = 1.0

_chosen: Client | None = None
_client: Client | None = None
_embedded: SpecCluster | None = None
_workers: dict[str, tuple[float, list[WorkerCapacity]]] = {}
_registered: set[str] = set()


def current_client() -> Client:
    """The client to submit to, connecting or starting the embedded cluster on first use."""
    global _client
    from distributed.client import default_client

    if _chosen is not None and _chosen.status == "running":
        return _chosen
    try:
        return _recorded(default_client())
    except ValueError:
        pass
    if _client is None or _client.status != "running":
        address = dask.config.get("scheduler-address", None)
        _client = _connect(address or start_embedded().scheduler_address)
    return _client


def _recorded(client: Client) -> Client:
    """Note the client's scheduler in the registry the Jupyter server reads (once)."""
    address = client.scheduler.address
    if address not in _registered:
        _registered.add(address)
        try:
            registry.record(address)
        except OSError as e:  # the sidebar will not see this kernel; %%task works regardless
            warnings.warn(f"taskcell: cannot record the cluster for JupyterLab: {e}", stacklevel=2)
    return client


def use_address(address: str) -> Client:
    """Point taskcell at the scheduler at ``address`` (``%task_cluster tcp://...``)."""
    global _chosen, _client, _embedded
    client = _connect(address)
    for previous in (_chosen, _client, _embedded):  # the embedded cluster frees the machine
        if previous is not None:
            previous.close()
    _chosen, _client, _embedded = client, None, None
    return client


def _connect(address: str) -> Client:
    from distributed import Client

    return _recorded(Client(address, set_as_default=False))


def start_embedded() -> SpecCluster:
    """Start worker processes on this machine that advertise its cores, memory and GPUs."""
    global _embedded
    from distributed import Nanny, Scheduler, SpecCluster

    if _embedded is not None:
        return _embedded
    n = config.get("embedded-cluster.n-workers") or 1
    threads = config.get("embedded-cluster.threads-per-worker")
    shares = advertised_resources(detect_machine(), n)
    workers = {
        f"taskcell-{i}": {
            "cls": Nanny,
            "options": {
                "nthreads": threads or max(1, int(share.resources.get("CPU", 1))),
                "memory_limit": int(share.resources.get("MEMORY", 0)) or "auto",
                "resources": share.resources,
                "env": share.environ(),
                "silence_logs": logging.CRITICAL,
            },
        }
        for i, share in enumerate(shares)
    }
    scheduler = {
        "cls": Scheduler,
        "options": {"host": "127.0.0.1", "dashboard": False, "dashboard_address": ":0"},
    }
    _embedded = SpecCluster(
        workers=workers,
        scheduler=scheduler,
        name="taskcell-embedded",
        silence_logs=logging.CRITICAL,
    )
    return _embedded


def live_workers(client: Client, refresh: bool = False) -> list[WorkerCapacity]:
    """The client's live workers, fetched at most once a :data:`WORKERS_TTL`."""
    fetched_at, workers = _workers.get(client.id, (0.0, []))
    if refresh or time.monotonic() - fetched_at > WORKERS_TTL:
        info = client.scheduler_info(n_workers=-1)["workers"]
        workers = [
            WorkerCapacity(
                address=address,
                name=str(w.get("name", address)),
                nthreads=int(w.get("nthreads", 0)),
                memory_limit=int(w.get("memory_limit") or 0),
                resources=dict(w.get("resources") or {}),
            )
            for address, w in info.items()
        ]
        _workers[client.id] = (time.monotonic(), workers)
    return workers


def close() -> None:
    """Close taskcell's client and the embedded cluster, if it started one."""
    global _chosen, _client, _embedded
    for resource in (_chosen, _client, _embedded):
        if resource is not None:
            resource.close()
    _chosen = _client = _embedded = None
    _workers.clear()
