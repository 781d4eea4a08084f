"""Messages between a worker and its cell processes: pickle protocol 5, buffers out of band.

Small buffers cross the socket once, straight from their memory into a buffer the receiver
allocates for them. Large ones (:data:`SHARE_MIN` and up) travel as shared memory: the cell
process copies a large result once into a ``memfd`` segment and passes its file descriptor
(``SCM_RIGHTS``); the worker maps it and keeps the value there. When a later cell, in any of
the worker's cell processes, reads that value, the worker passes the same segment again (a
large input held elsewhere in the worker is copied into a new segment once), and the cell
process maps it copy-on-write: no copy, a cell that changes its input changes only its own
pages, and :meth:`Channel.written` tells which pages it changed.

A cell process keeps the mappings of one cell's inputs and results for the next cell: mapping
a GiB costs tens of milliseconds of page faults, and unmapping it as much again, so a cell that
reads a value the cell before it read or made finds its pages already mapped, unless that cell
wrote to them. A result's pages are mapped while the process waits for its next cell (and
no longer once that cell arrives: they would count in its peak memory).
A segment the worker drops is truncated, so its memory is freed at once, even while a cell
process still maps it.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import pickle
import signal
import socket
import struct
import sys
import threading
import weakref
from typing import Any

from taskcell.runner import crossing

#: Buffers at least this large travel as shared memory where they can.
SHARE_MIN = 1 << 16
#: Descriptors passed in one message at most (the kernel's limit is 253).
_MAX_FDS = 64
_HEAD = struct.Struct("!QII")  # pickle length, buffers, descriptors passed
_ENTRY = struct.Struct("!QQq")  # buffer length, offset in its segment, descriptor index or -1
_CHUNK = 1 << 24
_PAGE = mmap.PAGESIZE
_MADV_POPULATE_READ = 22
_POPULATE_PIECE = 32 << 20
_libc = ctypes.CDLL(None)
#: For the top byte of a ``/proc/self/pagemap`` entry: 1 where the page is present (or swapped)
#: and anonymous, which in a copy-on-write file mapping means this process wrote to it.
_WRITTEN_PAGE = bytes(int(bool(b & 0xC0) and not b & 0x20) for b in range(256))
_FLAGS_BYTE = 7 if sys.byteorder == "little" else 0  # the entry's top byte


class _Segments:
    """The shared segments the worker maps and may pass on, by descriptor.

    Keyed by descriptor, which stays open, and so unique, until its segment is dropped: an
    address may be mapped again by another thread before the finalizer of the mapping that
    had it runs.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_fd: dict[int, tuple[weakref.ref[mmap.mmap], int, int]] = {}  # ref, start, end

    def map(self, fds: list[int]) -> list[memoryview]:
        """The segments of one message, mapped shared and kept until no value uses them."""
        views = []
        for fd in fds:
            mapping = mmap.mmap(fd, os.fstat(fd).st_size)
            start = address_of(mapping)
            with self._lock:
                self._by_fd[fd] = (weakref.ref(mapping), start, start + len(mapping))
            weakref.finalize(mapping, self._drop, fd).atexit = False
            views.append(memoryview(mapping))
        return views

    def _drop(self, fd: int) -> None:
        with self._lock:
            del self._by_fd[fd]
        os.ftruncate(fd, 0)  # frees the memory, whatever cell processes still map it
        os.close(fd)

    def find(self, buffer: memoryview) -> tuple[int, int] | None:
        """``(fd, offset)`` of the live segment holding ``buffer``, if one does."""
        try:
            address = address_of(buffer)
        except TypeError:  # read-only memory is never one of ours
            return None
        with self._lock:
            for fd, (mapping, start, end) in self._by_fd.items():
                if start <= address and address + buffer.nbytes <= end and mapping() is not None:
                    return fd, address - start
        return None


#: The worker's segments, whichever cell process's channel brought them.
_KEPT = _Segments()


class _Inputs:
    """The segments a cell process maps copy-on-write, kept from one cell to the next."""

    def __init__(self) -> None:
        self._by_file: dict[tuple[int, int], mmap.mmap] = {}
        #: The thread mapping the pages of the last results made here, its stop, those results.
        self._populating: tuple[threading.Thread, threading.Event, list[mmap.mmap]] | None = None

    def map(self, fds: list[int]) -> list[memoryview]:
        """The segments of one message, reusing the previous message's mappings where their
        pages are untouched; mappings this message does not use are let go."""
        previous, self._by_file = self._by_file, {}
        views = []
        for fd in fds:
            stat = os.fstat(fd)
            file = (stat.st_dev, stat.st_ino)
            mapping = self._by_file.get(file)
            if mapping is None:
                mapping = previous.pop(file, None)
            if mapping is None or _written(address_of(mapping), len(mapping)):
                mapping = mmap.mmap(fd, stat.st_size, access=mmap.ACCESS_COPY)
            os.close(fd)
            self._by_file[file] = mapping
            views.append(memoryview(mapping))
        self._stop_populating()
        return views

    def written(self, buffer: memoryview) -> bool | None:
        """Whether this process wrote to ``buffer`` since its segment was mapped here; None
        when no copy-on-write mapping of this process holds it."""
        try:
            address = address_of(buffer)
        except TypeError:  # read-only memory
            return None
        for mapping in self._by_file.values():
            start = address_of(mapping)
            if start <= address and address + buffer.nbytes <= start + len(mapping):
                return _written(address, buffer.nbytes)
        return None

    def keep_made(self, fds: list[int]) -> None:
        """Keep the segments this process made for a cell's results mapped for the next
        message, their pages mapped meanwhile: the next cell here often reads them. Best
        effort: the results are already sent."""
        try:
            made = []
            for fd in fds:
                stat = os.fstat(fd)
                mapping = mmap.mmap(fd, stat.st_size, access=mmap.ACCESS_COPY)
                self._by_file[(stat.st_dev, stat.st_ino)] = mapping
                made.append(mapping)
            if made:
                stop = threading.Event()
                thread = threading.Thread(target=_populate, args=(made, stop), daemon=True)
                thread.start()
                self._populating = thread, stop, made
        except (OSError, ValueError, RuntimeError):  # dropped already, out of memory or threads
            return

    def _stop_populating(self) -> None:
        """Stop mapping the pages of results the next cell does not read, before it starts:
        they would count in its peak memory, and could not be let go meanwhile."""
        if self._populating is None:
            return
        thread, stop, made = self._populating
        kept = [id(m) for m in self._by_file.values()]
        if thread.is_alive() and all(id(m) in kept for m in made):
            return  # the cell reads them all: go on
        stop.set()
        thread.join()
        self._populating = None


def _populate(mappings: list[mmap.mmap], stop: threading.Event) -> None:
    """Map every page of ``mappings`` for reading (a no-op before Linux 5.14), last pages first,
    until ``stop`` is set. By pieces, so that it stops soon and the process's own ``mmap``
    calls wait for one piece at most; through ctypes, which lets go of the GIL."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # interrupts are the cell's
    for mapping in mappings:
        start = address_of(mapping)
        for offset in reversed(range(0, len(mapping), _POPULATE_PIECE)):
            if stop.is_set():
                return
            length = ctypes.c_size_t(min(_POPULATE_PIECE, len(mapping) - offset))
            _libc.madvise(ctypes.c_void_p(start + offset), length, _MADV_POPULATE_READ)


def _written(address: int, length: int) -> bool:
    """Whether this process wrote to any page of ``length`` bytes at ``address`` in a
    copy-on-write file mapping."""
    first, end = address // _PAGE, -(-(address + length) // _PAGE)
    try:
        with open("/proc/self/pagemap", "rb") as pagemap:
            pagemap.seek(first * 8)
            entries = pagemap.read((end - first) * 8)
    except OSError:
        return True
    return b"\x01" in entries[_FLAGS_BYTE::8].translate(_WRITTEN_PAGE)


def address_of(buffer: Any) -> int:
    """Where ``buffer``'s memory starts in this process (TypeError: it is read-only)."""
    view = ctypes.c_char.from_buffer(buffer)
    try:
        return ctypes.addressof(view)
    finally:
        del view  # releases the export, or the mapping could never close


def into_segments(buffers: list[Any]) -> list[Any]:
    """``buffers``, each large one no segment of this worker holds copied into one: kept in
    place of the original, it is passed to the next cells' processes without a copy."""
    shared = []
    for buffer in buffers:
        raw = memoryview(buffer).cast("B")
        if raw.nbytes < SHARE_MIN or _KEPT.find(raw) is not None:
            shared.append(buffer)
        else:
            shared += _KEPT.map([_segment_of(raw)])
    return shared


def _segment_of(buffer: memoryview) -> int:
    """A new ``memfd`` segment holding a copy of ``buffer``."""
    fd = os.memfd_create("taskcell-value", os.MFD_CLOEXEC)
    os.ftruncate(fd, buffer.nbytes)
    data, done = buffer.cast("B"), 0
    while done < len(data):  # written, not copied into a mapping: half the page faults
        done += os.pwrite(fd, data[done : done + _CHUNK], done)
    return fd


class Channel:
    """One end of a socket carrying whole messages; sends from several threads do not mix.

    ``keeps_values``: the worker's end. It maps the segments it receives shared and passes them
    on to later cells; the cell process's end maps them copy-on-write and copies its own large
    buffers into new segments.
    """

    def __init__(self, sock: socket.socket, keeps_values: bool = False) -> None:
        self.sock = sock
        self._values = _KEPT if keeps_values else _Inputs()
        self._sending = threading.Lock()

    def send(self, message: Any) -> None:
        """Send ``message``: a header with any segments, the pickle, then the other buffers."""
        buffers: list[pickle.PickleBuffer] = []
        payload = crossing.dumps(message, buffers.append)
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
            if isinstance(self._values, _Inputs):
                self._values.keep_made(made)
        finally:
            for fd in made:
                os.close(fd)

    def written(self, buffer: memoryview) -> bool | None:
        """The cell process's end: whether the cell wrote to a ``buffer`` it received as
        shared memory (None: it was not received so)."""
        return self._values.written(buffer) if isinstance(self._values, _Inputs) else None

    def _place(self, raw: memoryview, made: list[int]) -> tuple[int, int] | None:
        """Where a large buffer already is, or a new segment for it; None: send it inline."""
        if raw.nbytes < SHARE_MIN:
            return None
        if isinstance(self._values, _Segments):
            found = self._values.find(raw)
            if found is not None:
                return found
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
        segments = self._values.map(fds)
        buffers = [
            self._exactly(size) if index < 0 else segments[index][offset : offset + size]
            for size, offset, index in entries
        ]
        return pickle.loads(payload, buffers=buffers)

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
