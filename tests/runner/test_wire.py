"""The wire between a worker and its cell processes: large values as shared memory."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import mmap
import os
import socket
import threading

import numpy as np
import pytest
from waiting import eventually

from taskcell.runner.wire import SHARE_MIN, Channel


@pytest.fixture
def ends():
    """The worker's end (keeps values) and the cell process's end of one socket pair."""
    ours, theirs = socket.socketpair()
    worker, cell = Channel(ours, keeps_values=True), Channel(theirs)
    yield worker, cell
    worker.close()
    cell.close()


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def mapping_of(array: np.ndarray) -> str:
    """What the mapping holding ``array`` maps, as ``/proc/self/maps`` names it."""
    address = array.ctypes.data
    with open("/proc/self/maps") as maps:
        for line in maps:
            span, *_, what = line.split(maxsplit=5)
            start, end = (int(a, 16) for a in span.split("-"))
            if start <= address < end:
                return what
    raise AssertionError(f"no mapping holds {address:#x}")


def segment_sizes() -> list[int]:
    """The sizes of the shared segments this process holds open (a mapping holds its own)."""
    sizes = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            if os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:taskcell-value"):
                sizes.append(os.stat(f"/proc/self/fd/{fd}").st_size)
    return sizes


def populating_works() -> bool:
    """Whether this kernel maps pages ahead on request (``MADV_POPULATE_READ``, Linux 5.14)."""
    with mmap.mmap(-1, mmap.PAGESIZE) as probe:
        view = ctypes.c_char.from_buffer(probe)
        try:
            libc = ctypes.CDLL(None)
            return libc.madvise(ctypes.c_void_p(ctypes.addressof(view)), mmap.PAGESIZE, 22) == 0
        finally:
            del view


def all_pages_mapped(array: np.ndarray) -> bool:
    """Whether every page under ``array`` is mapped in this process (``/proc/self/pagemap``)."""
    page = mmap.PAGESIZE
    first, last = array.ctypes.data // page, (array.ctypes.data + array.nbytes - 1) // page
    with open("/proc/self/pagemap", "rb") as pagemap:
        pagemap.seek(first * 8)
        entries = pagemap.read((last - first + 1) * 8)
    return all(flags & 0x80 for flags in entries[7::8])


def passed(sender: Channel, receiver: Channel, message: object) -> object:
    """``message`` sent on one end and received on the other (a thread sends: the socket's
    buffer holds less than a large message)."""
    thread = threading.Thread(target=sender.send, args=(message,))
    thread.start()
    try:
        return receiver.receive()
    finally:
        thread.join()


def test_small_and_large_values_arrive_equal(ends):
    worker, cell = ends
    small, large = np.arange(10), np.arange(SHARE_MIN // 8 * 3, dtype=np.float64)
    kind, outputs, text = passed(cell, worker, ("done", {"small": small, "large": large}, "text"))
    assert kind == "done" and text == "text"
    np.testing.assert_array_equal(outputs["small"], small)
    np.testing.assert_array_equal(outputs["large"], large)


def test_a_kept_value_passed_to_a_later_cell_is_its_own_copy_on_write(ends):
    worker, cell = ends
    kept = passed(cell, worker, np.zeros(SHARE_MIN))  # a cell's large result, kept by the worker
    seen = passed(worker, cell, {"big": kept})["big"]  # a later cell reads it
    seen[0] = 7  # and changes it
    assert seen[0] == 7
    assert kept[0] == 0
    assert passed(worker, cell, {"big": kept})["big"][0] == 0


def test_a_later_cell_reading_the_same_value_finds_it_mapped(ends):
    worker, cell = ends
    kept = passed(cell, worker, np.ones(SHARE_MIN))
    first = passed(worker, cell, {"big": kept})["big"]
    again = passed(worker, cell, {"big": kept})["big"]
    assert again.ctypes.data == first.ctypes.data  # the same pages, not mapped anew
    again[0] = 7  # a cell that writes to its input
    fresh = passed(worker, cell, {"big": kept})["big"]
    assert fresh.ctypes.data != again.ctypes.data and fresh[0] == 1


def test_a_cell_processs_own_result_is_mapped_for_its_next_cell(ends):
    if not populating_works():
        pytest.skip("this Linux has no MADV_POPULATE_READ (5.14 and later): pages map on use")
    worker, cell = ends
    kept = passed(cell, worker, np.ones(SHARE_MIN))
    seen = passed(worker, cell, {"big": kept})["big"]  # untouched here: any page mapped was
    eventually(  # mapped by the cell process while it waited
        lambda: all_pages_mapped(seen), "the cell's own result mapped for reading", every=0.01
    )
    np.testing.assert_array_equal(seen, kept)


def test_a_value_made_in_one_cell_process_reaches_another_as_shared_memory():
    pairs = [socket.socketpair() for _ in range(2)]
    (worker_a, cell_a), (worker_b, cell_b) = [
        (Channel(ours, keeps_values=True), Channel(theirs)) for ours, theirs in pairs
    ]
    try:
        kept = passed(cell_a, worker_a, np.arange(SHARE_MIN, dtype=np.float64))
        seen = passed(worker_b, cell_b, {"big": kept})["big"]
        assert "memfd:taskcell-value" in mapping_of(seen)
        np.testing.assert_array_equal(seen, kept)
    finally:
        for end in (worker_a, cell_a, worker_b, cell_b):
            end.close()


def test_a_dropped_value_frees_its_memory_even_where_a_cell_process_maps_it(ends):
    worker, cell = ends
    gc.collect()  # segments an earlier test let go of close now, not during this one
    before = open_fds()
    kept = passed(cell, worker, np.ones(SHARE_MIN))
    seen = passed(worker, cell, {"big": kept})["big"]
    assert SHARE_MIN * 8 in segment_sizes()
    del kept
    gc.collect()
    assert set(segment_sizes()) == {0}  # the worker let go: the pages the cell maps are freed
    del seen
    passed(worker, cell, "the next cell")  # lets go of the last cell's mappings
    gc.collect()
    assert open_fds() == before


def test_many_large_buffers_in_one_message(ends):
    worker, cell = ends
    arrays = [np.full(SHARE_MIN // 8, i, dtype=np.float64) for i in range(100)]
    got = passed(cell, worker, arrays)
    assert [a[0] for a in got] == list(range(100))
