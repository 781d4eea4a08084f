"""What a browser may ask the server to do to a cluster, checked before anything is done.

A browser names a task by its key and a worker by its address; the server acts only on what the
cluster's latest snapshot shows (a running or waiting task, a pool's connected worker), so a
page cannot stop what nobody can see, and only through its own client of that cluster
(:class:`~taskcell.extension.watch.ClusterWatch`); it asks a kernel for a worker only of a pool
the snapshot shows that kernel has. Every body is a JSON object of known fields.
"""

from __future__ import annotations

from typing import Any

from taskcell.extension.control import MAX_WORKERS
from taskcell.extension.payloads import shown
from taskcell.planner.schema import PoolInfo, Snapshot

#: Longest key accepted; taskcell's keys are a name and a 32-digit uuid.
MAX_KEY = 1000
#: Longest worker address accepted.
MAX_ADDRESS = 500


class ActionRequestError(ValueError):
    """A request the server cannot act on: the message says which field and why."""


def _only(data: dict[str, Any], fields: tuple[str, ...], action: str) -> None:
    """Refuse fields other than ``fields``."""
    unknown = sorted(set(data) - set(fields))
    if unknown:
        takes = (
            "no field"
            if not fields
            else f"{fields[0]!r} alone"
            if len(fields) == 1
            else " and ".join(map(repr, fields))
        )
        raise ActionRequestError(
            f"unknown field(s) {', '.join(shown(f) for f in unknown[:5])}; {action} takes {takes}"
        )


def _text(data: dict[str, Any], field: str, what: str, limit: int) -> str:
    value = data.get(field)
    if not isinstance(value, str) or not value.strip():
        raise ActionRequestError(f"{field!r} must be {what} (a string), got {shown(value)}")
    if len(value) > limit:
        raise ActionRequestError(
            f"{field!r} must be at most {limit} characters long, got {shown(value)}"
        )
    return value


def parse_cancel(data: dict[str, Any]) -> str:
    """The key of a checked ``{"key": "..."}`` body."""
    _only(data, ("key",), "cancel")
    return _text(data, "key", "a task's key", MAX_KEY)


def parse_scale(data: dict[str, Any]) -> int:
    """The worker count of a checked ``{"workers": n}`` body."""
    _only(data, ("workers",), "scale")
    n = data.get("workers")
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_WORKERS:
        raise ActionRequestError(
            f"'workers' must be a whole number from 0 to {MAX_WORKERS}, got {shown(n)}"
        )
    return n


def parse_retire(data: dict[str, Any]) -> str:
    """The worker address of a checked ``{"worker": "tcp://..."}`` body."""
    _only(data, ("worker",), "retire")
    return _text(data, "worker", "a pool worker's address", MAX_ADDRESS)


def parse_start_worker(data: dict[str, Any]) -> tuple[str, str]:
    """The kernel and pool of a checked ``{"kernel": "...", "pool": "..."}`` body."""
    _only(data, ("kernel", "pool"), "start-worker")
    return (
        _text(data, "kernel", "the id of the kernel whose pool it is", MAX_KEY),
        _text(data, "pool", "a pool's name", MAX_KEY),
    )


def parse_nothing(data: dict[str, Any], action: str) -> None:
    """A body that must be empty (``{}``) for ``action``."""
    _only(data, (), action)


def live_keys(snapshot: Snapshot | None) -> set[str]:
    """The keys of the tasks ``snapshot`` shows running or waiting (listed, not only counted)."""
    if snapshot is None:
        return set()
    keys = {t["key"] for w in snapshot["workers"] for t in w["tasks"]}
    return keys | {t["key"] for t in snapshot["queue"]}


def pool_workers(snapshot: Snapshot | None) -> set[str]:
    """The addresses of the pools' workers ``snapshot`` shows running (connected)."""
    if snapshot is None:
        return set()
    live = {w["address"] for w in snapshot["workers"]}
    return {
        w["address"]
        for p in snapshot["pools"]
        for w in p["workers"]
        if w["state"] == "running" and w["address"] in live
    }


def shown_pool(snapshot: Snapshot | None, kernel: str, name: str) -> PoolInfo | None:
    """The pool ``name`` of ``kernel`` as ``snapshot`` shows it; None where it does not."""
    pools = snapshot["pools"] if snapshot is not None else []
    return next((p for p in pools if p["kernel"] == kernel and p["name"] == name), None)
