"""``POST /taskcell/api/clusters/<id>/cancel``: which task a browser may stop, checked.

A browser names a task by its key; the server stops only a task the cluster's latest snapshot
shows running or waiting (so a page cannot stop what nobody can see), through its own client
of that cluster (:meth:`~taskcell.extension.watch.ClusterWatch.cancel`).
"""

from __future__ import annotations

from typing import Any

from taskcell.extension.payloads import shown
from taskcell.planner.schema import Snapshot

#: Longest key accepted; taskcell's keys are a name and a 32-digit uuid.
MAX_KEY = 1000


class CancelRequestError(ValueError):
    """A cancel request the server cannot act on: the message says which field and why."""


def parse_cancel(data: dict[str, Any]) -> str:
    """The key of a checked ``{"key": "..."}`` body."""
    unknown = sorted(set(data) - {"key"})
    if unknown:
        raise CancelRequestError(
            f"unknown field(s) {', '.join(map(repr, unknown))}; cancel takes 'key' alone"
        )
    key = data.get("key")
    if not isinstance(key, str) or not key.strip():
        raise CancelRequestError(f"'key' must be a task's key (a string), got {shown(key)}")
    if len(key) > MAX_KEY:
        raise CancelRequestError(
            f"'key' must be at most {MAX_KEY} characters long, got {shown(key)}"
        )
    return key


def live_keys(snapshot: Snapshot | None) -> set[str]:
    """The keys of the tasks ``snapshot`` shows running or waiting (listed, not only counted)."""
    if snapshot is None:
        return set()
    keys = {t["key"] for w in snapshot["workers"] for t in w["tasks"]}
    return keys | {t["key"] for t in snapshot["queue"]}
