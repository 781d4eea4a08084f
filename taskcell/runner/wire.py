"""Messages between a worker and its cell processes: pickle protocol 5, buffers out of band.

A large array crosses the socket once, straight from its memory, and lands in a buffer the
receiver allocates for it, instead of being copied into and out of one big pickle.
"""

from __future__ import annotations

import pickle
from multiprocessing.connection import Connection
from typing import Any

import cloudpickle


def send(conn: Connection, message: Any) -> None:
    """Send ``message``: a header pickle, then each out-of-band buffer as it is in memory."""
    buffers: list[pickle.PickleBuffer] = []
    header = cloudpickle.dumps(message, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    conn.send_bytes(pickle.dumps((len(header), [r.nbytes for r in raws])))
    conn.send_bytes(header)
    for raw in raws:
        conn.send_bytes(raw)


def receive(conn: Connection) -> Any:
    """Receive one message sent with :func:`send`; EOFError when the other side is gone."""
    _, sizes = pickle.loads(conn.recv_bytes())
    header = conn.recv_bytes()
    buffers = []
    for size in sizes:
        buffer = bytearray(size)
        conn.recv_bytes_into(buffer)
        buffers.append(buffer)
    return pickle.loads(header, buffers=buffers)
