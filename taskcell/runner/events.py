"""What a cell's worker tells its kernel while the cell runs: started, output, finished.

Workers publish with ``log_event`` on one topic per kernel client, named after the client's
id, and each event names its cell's key. The scheduler keeps at most
``distributed.admin.low-level-log-length`` events of a topic and drops a client's own topic
when the client leaves, so nothing piles up per cell; a topic per cell would stay forever.
The kernel listens only while it has cells running.
"""

from __future__ import annotations

import queue
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distributed import Client

_lock = threading.Lock()
_inboxes: dict[str, dict[str, queue.Queue]] = {}  # client id -> cell key -> its events


def listen(client: Client, key: str) -> queue.Queue:
    """A queue that receives the events of the cell ``key`` until :func:`forget`."""
    inbox: queue.Queue = queue.Queue()
    with _lock:
        routes = _inboxes.setdefault(client.id, {})
        routes[key] = inbox
        # Subscribing again is cheap, and survives a scheduler restarted on the same address.
        client.subscribe_topic(client.id, lambda event: _route(routes, event[1]))
    return inbox


def forget(client: Client, key: str) -> None:
    """Stop routing the events of the cell ``key``; with no cell left, stop listening (a
    subscriber to its own topic would be sent the scheduler's news of its own departure)."""
    with _lock:
        routes = _inboxes.get(client.id, {})
        routes.pop(key, None)
        if not routes and client.status == "running":
            client.unsubscribe_topic(client.id)


def _route(routes: dict[str, queue.Queue], event: Any) -> None:
    # Dask logs events of its own on a client's topic; ours name a key.
    inbox = routes.get(event.get("key", "")) if isinstance(event, dict) else None
    if inbox is not None:
        inbox.put(event)
