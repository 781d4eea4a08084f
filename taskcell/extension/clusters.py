"""Which clusters this Jupyter server knows, without ever running code in a kernel.

Three sources, merged by scheduler address:

- each kernel that uses taskcell records its scheduler in the registry
  (:mod:`taskcell.cluster.registry`); the server keeps the records of *its own* live kernels
  and names their notebooks through its sessions, so a kernel busy in a long cell is listed
  all the same;
- configured addresses: the extension's ``scheduler_addresses`` and Dask's
  ``scheduler-address`` (which ``DASK_SCHEDULER_ADDRESS`` sets) as the server process sees it;
- the embedded clusters this server started from the sidebar.

A cluster is named in URLs by :func:`cluster_id`, a short hash of its address: addresses hold
``/`` and ``:``, and a browser can only ask for clusters the server already knows (it never
makes the server connect to an address of its choosing).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from taskcell.extension.payloads import ClusterInfo, ClusterSource, LinkStatus, NotebookRef


def normalize_address(address: str) -> str:
    """``host:port`` -> ``tcp://host:port``, as Dask spells the address it records."""
    address = address.strip().rstrip("/")
    return address if "://" in address else f"tcp://{address}"


def cluster_id(address: str) -> str:
    """The id of the cluster at ``address`` in ``/taskcell/api/clusters/<id>``."""
    return hashlib.sha256(normalize_address(address).encode()).hexdigest()[:12]


def configured_addresses(extra: Iterable[str] = ()) -> list[str]:
    """``extra`` (the extension's own setting), then Dask's ``scheduler-address``."""
    import dask.config

    found = [a for a in extra if a and a.strip()]
    dask_address = dask.config.get("scheduler-address", None)
    if dask_address:
        found.append(str(dask_address))
    return found


def discover(
    records: Mapping[str, str],
    live_kernels: Iterable[str],
    sessions: Iterable[Mapping[str, Any]],
    configured: Iterable[str],
    statuses: Mapping[str, LinkStatus] | None = None,
    started: Iterable[str] = (),
) -> list[ClusterInfo]:
    """Merge the registry and the configuration into one record per cluster.

    Parameters
    ----------
    records : mapping
        Kernel id -> scheduler address, from :func:`taskcell.cluster.registry.recorded`.
    live_kernels : iterable of str
        The kernel ids this server runs; records of other kernels (stopped ones, another
        server's) are ignored.
    sessions : iterable of mapping
        The server's sessions, as ``SessionManager.list_sessions`` returns them.
    configured : iterable of str
        Configured scheduler addresses.
    statuses : mapping, optional
        Cluster id -> link status, for the clusters the server already watches.
    started : iterable of str
        The addresses of the clusters this server started.

    Returns
    -------
    list of ClusterInfo
        Kernel clusters first (by address), then the configured ones and those this server
        started, not already listed.
    """
    live = set(live_kernels)
    notebooks: dict[str, list[NotebookRef]] = {}
    for session in sessions:
        kernel = session.get("kernel") or {}
        kernel_id = kernel.get("id")
        if kernel_id:
            ref = NotebookRef(
                path=str(session.get("path", "")),
                name=str(session.get("name", "")),
                kernel_id=str(kernel_id),
            )
            notebooks.setdefault(str(kernel_id), []).append(ref)

    found: dict[str, ClusterInfo] = {}

    def entry(address: str, source: ClusterSource) -> ClusterInfo:
        address = normalize_address(address)
        info = found.get(address)
        if info is None:
            cid = cluster_id(address)
            info = found[address] = ClusterInfo(
                id=cid,
                address=address,
                sources=[],
                notebooks=[],
                kernels=[],
                status=(statuses or {}).get(cid),
            )
        if source not in info["sources"]:
            info["sources"].append(source)
        return info

    for kernel_id, address in sorted(records.items(), key=lambda kv: kv[1]):
        if kernel_id not in live:
            continue
        info = entry(address, "kernel")
        info["kernels"].append(kernel_id)
        info["notebooks"].extend(notebooks.get(kernel_id, []))
    for address in configured:
        entry(address, "config")
    for address in started:
        entry(address, "server")
    return list(found.values())
