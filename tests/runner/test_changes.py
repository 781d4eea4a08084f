"""Which inputs a cell changed in place, told in the cell's process."""

from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import pytest

from taskcell.runner.changes import InputSnapshot
from taskcell.runner.crossing import seal
from taskcell.runner.wire import SHARE_MIN, Channel


def not_shared(buffer: memoryview) -> None:
    return None


def test_a_change_in_place_is_seen_and_a_read_is_not():
    items, table, untouched = [1], {"a": 1}, {"b": 2}
    snapshot = InputSnapshot({"items": items, "table": table, "untouched": untouched}, not_shared)
    items.append(2)
    table["a"] += 1
    assert sorted(untouched) == ["b"]
    assert snapshot.changed() == {"items": [1, 2], "table": {"a": 2}}


def test_a_write_into_a_private_array_is_seen():
    data = np.zeros(SHARE_MIN // 8 + 1)
    snapshot = InputSnapshot({"data": data}, not_shared)
    assert snapshot.changed() == {}
    data[-1] = 1.0
    assert list(snapshot.changed()) == ["data"]


def test_code_and_dask_objects_are_not_watched():
    import dask

    snapshot = InputSnapshot({"f": print, "np": np, "lazy": dask.delayed(sum)([1])}, not_shared)
    assert snapshot.objects == {}


@pytest.fixture
def received():
    """A large array as a cell process receives it from its worker: shared memory."""
    ours, theirs = socket.socketpair()
    worker, cell = Channel(ours, keeps_values=True), Channel(theirs)
    worker.send({"data": np.zeros(SHARE_MIN // 8 * 4)})
    yield cell.receive()["data"], cell
    worker.close()
    cell.close()


def test_a_shared_input_is_judged_by_its_pages(received):
    data, cell = received
    assert cell.written(memoryview(data)) is False
    snapshot = InputSnapshot({"data": data}, cell.written)
    _ = float(data.sum())  # reading it is no change
    assert snapshot.changed() == {}
    data[len(data) // 2] = 3.0
    assert cell.written(memoryview(data)) is True
    assert list(snapshot.changed()) == ["data"]


def arrived(**values):
    """Each of ``values`` as a cell process receives a large input: in its own pickle, the
    ``Sealed`` it came in beside it."""
    sealed = {name: seal({name: value}, {}) for name, value in values.items()}
    return {name: s.open()[name] for name, s in sealed.items()}, sealed


def test_an_input_that_came_in_its_own_pickle_is_judged_against_it():
    inputs, sealed = arrived(rows=[{"id": i} for i in range(1000)], sizes={"a": 1})
    assert all(s.plain for s in sealed.values())
    snapshot = InputSnapshot(inputs, not_shared, sealed)
    assert snapshot.changed() == {}
    inputs["rows"][500]["id"] = -1
    assert list(snapshot.changed()) == ["rows"]


def test_an_input_that_pickles_to_other_bytes_than_it_came_in_is_judged_by_its_value():
    # A strided view pickles its data in band; the contiguous array it arrives as, out of band.
    inputs, sealed = arrived(every_other=np.arange(SHARE_MIN // 4, dtype=float)[::2])
    snapshot = InputSnapshot(inputs, not_shared, sealed)
    assert snapshot.changed() == {}
    inputs["every_other"][-1] = -1.0
    assert list(snapshot.changed()) == ["every_other"]


def test_a_shared_input_in_its_own_pickle_is_judged_by_its_pages():
    ours, theirs = socket.socketpair()
    worker, here = Channel(ours, keeps_values=True), Channel(theirs)
    try:
        worker.send({"big": seal({"big": np.zeros(SHARE_MIN // 8 * 4)}, {})})
        sent = here.receive()
        inputs = sent["big"].open()
        snapshot = InputSnapshot(inputs, here.written, sent)
        assert snapshot.changed() == {}
        inputs["big"][7] = 1.0
        assert list(snapshot.changed()) == ["big"]
    finally:
        worker.close()
        here.close()


def test_an_input_that_came_in_its_own_pickle_is_not_pickled_before_the_cell(monkeypatch):
    from taskcell.runner import crossing

    inputs, sealed = arrived(rows=[{"id": i} for i in range(1000)])
    pickled = []
    dumps = crossing.dumps
    monkeypatch.setattr(crossing, "dumps", lambda *a: pickled.append(1) or dumps(*a))
    snapshot = InputSnapshot(inputs, not_shared, sealed)
    assert pickled == []
    assert snapshot.changed() == {}
    assert pickled == [1]


class FromFile:
    """Data whose pickle reads a file again where it is opened."""

    def __init__(self, path):
        self.path = path
        self.text = Path(path).read_text()

    def __reduce__(self):
        return FromFile, (self.path,)


def test_an_input_that_cannot_be_opened_again_after_the_cell_counts_as_changed(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    # The strided view pickles to other bytes than it came in: its pickle is opened again.
    inputs, sealed = arrived(held={"note": FromFile(str(path)), "every_other": np.ones(8)[::2]})
    snapshot = InputSnapshot(inputs, not_shared, sealed)
    path.unlink()  # what the cell did
    assert list(snapshot.changed()) == ["held"]


def test_two_shared_arrays_swapped_are_a_change():
    ours, theirs = socket.socketpair()
    worker, here = Channel(ours, keeps_values=True), Channel(theirs)
    try:
        size = SHARE_MIN // 8 * 2
        worker.send({"pair": {"a": np.zeros(size), "b": np.ones(size)}})
        pair = here.receive()["pair"]
        snapshot = InputSnapshot({"pair": pair}, here.written)
        assert snapshot.changed() == {}
        pair["a"], pair["b"] = pair["b"], pair["a"]
        assert list(snapshot.changed()) == ["pair"]
    finally:
        worker.close()
        here.close()
