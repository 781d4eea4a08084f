"""Messages between a worker and its cell processes: pickle protocol 5, buffers out of band.

Small buffers cross the socket once, straight from their memory into a buffer the receiver
allocates for them. Large ones (:data:`SHARE_MIN` and up) travel as shared memory: the cell
process copies a large result once into a ``memfd`` segment and passes its file descriptor
(``SCM_RIGHTS``); the worker maps it and keeps the value there. When a later cell reads that
value, the worker passes the same segment again, and the cell process maps it copy-on-write:
no copy, and a cell that changes its input changes only its own pages.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import pickle
import socket
import struct
import threading
import weakref
from typing import Any

import cloudpickle

#: Buffers at least this large travel as shared memory where they can.
SHARE_MIN = 1 << 20
#: Descriptors passed in one message at most (the kernel's limit is 253).
_MAX_FDS = 64
_HEAD = struct.Struct("!QII")  # pickle length, buffers, descriptors passed
_ENTRY = struct.Struct("!QQq")  # buffer length, offset in its segment, descriptor index or -1
_CHUNK = 1 << 24


class _Segments:
    """The shared segments this process maps and may pass on: address range -> descriptor."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_start: dict[int, tuple[int, int]] = {}  # start address -> (end, fd)

    def add(self, mapping: mmap.mmap, fd: int) -> None:
        start = _address(mapping)
        with self._lock:
            self._by_start[start] = (start + len(mapping), fd)
        weakref.finalize(mapping, self._drop, start)

    def _drop(self, start: int) -> None:
        with self._lock:
            _, fd = self._by_start.pop(start)
        os.close(fd)

    def find(self, buffer: memoryview) -> tuple[int, int] | None:
        """``(fd, offset)`` of the segment holding ``buffer``, if one does."""
        try:
            address = _address(buffer)
        except TypeError:  # read-only memory is never one of ours
            return None
        with self._lock:
            for start, (end, fd) in self._by_start.items():
                if start <= address and address + buffer.nbytes <= end:
                    return fd, address - start
        return None


def _address(buffer: Any) -> int:
    view = ctypes.c_char.from_buffer(buffer)
    try:
        return ctypes.addressof(view)
    finally:
        del view  # releases the export, or the mapping could never close


def _segment_of(buffer: memoryview) -> int:
    """A new ``memfd`` segment holding a copy of ``buffer``."""
    fd = os.memfd_create("taskcell-value", os.MFD_CLOEXEC)
    os.ftruncate(fd, buffer.nbytes)
    with mmap.mmap(fd, buffer.nbytes) as mapping:
        mapping[:] = buffer.cast("B")
    return fd


class Channel:
    """One end of a socket carrying whole messages; sends from several threads do not mix.

    ``keeps_values``: the worker's end. It maps the segments it receives shared and passes them
    on to later cells; the cell process's end maps them copy-on-write and copies its own large
    buffers into new segments.
    """

    def __init__(self, sock: socket.socket, keeps_values: bool = False) -> None:
        self.sock = sock
        self._keeps = _Segments() if keeps_values else None
        self._sending = threading.Lock()

    def send(self, message: Any) -> None:
        """Send ``message``: a header with any segments, the pickle, then the other buffers."""
        buffers: list[pickle.PickleBuffer] = []
        payload = cloudpickle.dumps(message, protocol=5, buffer_callback=buffers.append)
        raws = [b.raw() for b in buffers]
        fds: list[int] = []
        made: list[int] = []  # segments made for this message, closed once sent
        entries = []
        try:
            for raw in raws:
                place = self._place(raw, made) if len(fds) < _MAX_FDS else None
                if place is None:
                    entries.append(_ENTRY.pack(raw.nbytes, 0, -1))
                else:
                    entries.append(_ENTRY.pack(raw.nbytes, place[1], len(fds)))
                    fds.append(place[0])
            head = _HEAD.pack(len(payload), len(raws), len(fds)) + b"".join(entries)
            with self._sending:
                sent = socket.send_fds(self.sock, [head], fds) if fds else 0
                self.sock.sendall(head[sent:])
                self.sock.sendall(payload)
                for raw, entry in zip(raws, entries, strict=True):
                    if _ENTRY.unpack(entry)[2] < 0:
                        self.sock.sendall(raw)
        finally:
            for fd in made:
                os.close(fd)

    def _place(self, raw: memoryview, made: list[int]) -> tuple[int, int] | None:
        """Where a large buffer already is, or a new segment for it; None: send it inline."""
        if raw.nbytes < SHARE_MIN:
            return None
        if self._keeps is not None:
            return self._keeps.find(raw)
        made.append(_segment_of(raw))
        return made[-1], 0

    def receive(self) -> Any:
        """The next message; EOFError when the other end is gone."""
        first, fds, _, _ = socket.recv_fds(self.sock, _HEAD.size, _MAX_FDS)
        if not first:
            raise EOFError("the other end closed the socket")
        head = bytes(first) + self._exactly(_HEAD.size - len(first))
        length, count, _ = _HEAD.unpack(head)
        entries = [_ENTRY.unpack(self._exactly(_ENTRY.size)) for _ in range(count)]
        payload = self._exactly(length)
        segments = [self._map(fd) for fd in fds]
        buffers = [
            self._exactly(size) if index < 0 else segments[index][offset : offset + size]
            for size, offset, index in entries
        ]
        return pickle.loads(payload, buffers=buffers)

    def _map(self, fd: int) -> memoryview:
        size = os.fstat(fd).st_size
        if self._keeps is None:
            mapping = mmap.mmap(fd, size, access=mmap.ACCESS_COPY)
            os.close(fd)
        else:
            mapping = mmap.mmap(fd, size)
            self._keeps.add(mapping, fd)
        return memoryview(mapping)

    def _exactly(self, n: int) -> bytearray:
        buffer = bytearray(n)
        view, got = memoryview(buffer), 0
        while got < n:
            read = self.sock.recv_into(view[got:], min(n - got, _CHUNK))
            if read == 0:
                raise EOFError("the other end closed the socket")
            got += read
        return buffer

    def close(self) -> None:
        self.sock.close()
