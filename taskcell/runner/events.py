"""What a cell's worker tells its kernel while the cell runs: started, output, finished.

Workers publish with ``log_event`` on one topic per kernel client, named after the client's
id, and each event names its cell's key. The scheduler keeps at most
``distributed.admin.low-level-log-length`` events of a topic and drops a client's own topic
when the client leaves, so nothing piles up per cell; a topic per cell would stay forever.

The kernel subscribes when a task cell starts and stays subscribed while task cells follow
one another: a client sends its messages to the scheduler in batches at most every 10 ms, so
a subscription sent just before a cell's submission would hold that submission back for most
of those 10 ms. For the same reason finished cells' futures are kept (:func:`keep`), and let go
all at once, when a cell is submitted a second after the first of them (:func:`submitted`):
each release is a message too, and one the scheduler reads before a submission has it tell the
worker to drop a result just before it sends the cell (a batch every 5 ms there). Before any other
code runs, and when the kernel exits, :func:`settle` lets the kept futures go and ends the
subscriptions no running cell needs, since that code may close the client, and a client that
leaves while subscribed to its own topic is sent the scheduler's news of its departure over a
closed connection (which the scheduler logs as critical).
"""

from __future__ import annotations

import atexit
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distributed import Client, Future


@dataclass
class _Listening:
    """A client's subscription to its topic and the cells whose events it routes."""

    client: Client
    #: The connection it was made on: a client that reconnected (to a scheduler started
    #: again on the same address) has a new one, and must subscribe again.
    connection: object
    routes: dict[str, queue.Queue] = field(default_factory=dict)


#: How often, at most, a Dask client sends the scheduler what it batched (seconds).
BATCH_INTERVAL = 0.01
#: How long finished cells' futures are kept while task cells follow one another (seconds).
KEEP_SECONDS = 1.0

_lock = threading.Lock()
_listening: dict[str, _Listening] = {}  # client id -> its subscription
_kept: list[tuple[float, Future]] = []  # finished cells' futures, and since when (monotonic)


def listen(client: Client, key: str) -> queue.Queue:
    """A queue that receives the events of the cell ``key`` until :func:`forget`."""
    inbox: queue.Queue = queue.Queue()
    with _lock:
        here = _listening.get(client.id)
        if here is None or here.connection is not client.scheduler_comm:
            routes = here.routes if here is not None else {}
            here = _listening[client.id] = _Listening(client, client.scheduler_comm, routes)
            client.subscribe_topic(client.id, lambda event: _route(routes, event[1]))
        here.routes[key] = inbox
    return inbox


def forget(client: Client, key: str) -> None:
    """Stop routing the events of the cell ``key``; the subscription stays for the next task
    cell, until :func:`settle`."""
    with _lock:
        here = _listening.get(client.id)
        if here is not None:
            here.routes.pop(key, None)


def keep(future: Future) -> None:
    """Hold a finished cell's ``future`` (see the module docstring)."""
    with _lock:
        _kept.append((time.monotonic(), future))


def submitted() -> None:
    """A cell was submitted: let the futures kept over :data:`KEEP_SECONDS` go."""
    held_since = time.monotonic() - KEEP_SECONDS
    with _lock:
        if _kept and _kept[0][0] < held_since:
            _kept.clear()


def settle() -> bool:
    """Let the kept futures go and end each subscription that no running cell needs (before
    code that is not a task cell runs, see the module docstring); whether there was one."""
    with _lock:
        _kept.clear()
        idle = [h for h in _listening.values() if not h.routes]
        for here in idle:
            del _listening[here.client.id]
    for here in idle:
        if here.client.status == "running":
            here.client.unsubscribe_topic(here.client.id)
    return bool(idle)


@atexit.register
def _settle_at_exit() -> None:
    if settle():
        time.sleep(BATCH_INTERVAL * 3)  # the client sends its last batch meanwhile


def _route(routes: dict[str, queue.Queue], event: Any) -> None:
    # Dask logs events of its own on a client's topic; ours name a key.
    inbox = routes.get(event.get("key", "")) if isinstance(event, dict) else None
    if inbox is not None:
        inbox.put(event)
