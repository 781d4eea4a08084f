"""A change a cell made on its worker, applied to the notebook's own object."""

from __future__ import annotations

import array
import collections

import numpy as np
import pandas as pd
import pytest

from taskcell.runner.inplace import Updates, update


class Model:
    def __init__(self) -> None:
        self.coef = None
        self.history: list[int] = []


class Slotted:
    __slots__ = ("a", "b")


def _slotted(**values):
    obj = Slotted()
    for k, v in values.items():
        setattr(obj, k, v)
    return obj


def fitted() -> Model:
    model = Model()
    model.coef = np.ones(2)
    model.history = [1, 2]
    return model


CASES = [
    ("list", lambda: [1], lambda: [1, 2], lambda o: o == [1, 2]),
    ("dict", lambda: {"a": 1}, lambda: {"b": 2}, lambda o: o == {"b": 2}),
    ("set", lambda: {1}, lambda: {1, 2}, lambda o: o == {1, 2}),
    ("bytearray", lambda: bytearray(b"ab"), lambda: bytearray(b"abc"), lambda o: o == b"abc"),
    (
        "deque",
        lambda: collections.deque([1]),
        lambda: collections.deque([2, 3]),
        lambda o: list(o) == [2, 3],
    ),
    (
        "defaultdict",
        lambda: collections.defaultdict(list),
        lambda: collections.defaultdict(int, {"x": 1}),
        lambda o: o.default_factory is int and o["x"] == 1,
    ),
    (
        "array-module",
        lambda: array.array("i", [1]),
        lambda: array.array("i", [1, 2]),
        lambda o: o.tolist() == [1, 2],
    ),
    (
        "ndarray",
        lambda: np.zeros(3),
        lambda: np.arange(3.0),
        lambda o: o.tolist() == [0.0, 1.0, 2.0],
    ),
    ("ndarray-reshaped", lambda: np.zeros(4), lambda: np.ones((2, 2)), lambda o: o.shape == (2, 2)),
    (
        "dataframe-column",
        lambda: pd.DataFrame({"a": [1]}),
        lambda: pd.DataFrame({"a": [1], "b": [2]}),
        lambda o: list(o.columns) == ["a", "b"],
    ),
    ("object", Model, fitted, lambda o: o.history == [1, 2] and o.coef.tolist() == [1.0, 1.0]),
    ("slots", lambda: _slotted(a=1), lambda: _slotted(a=2, b=3), lambda o: (o.a, o.b) == (2, 3)),
    (
        "numpy-generator",
        lambda: np.random.default_rng(1),
        lambda: _advanced(np.random.default_rng(1)),
        lambda o: o.random() == _second_draw(),
    ),
]


def _advanced(rng):
    rng.random()
    return rng


def _second_draw():
    return np.random.default_rng(1).random(2)[1]


@pytest.mark.parametrize(
    ("make_old", "make_new", "check"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_the_notebooks_object_takes_the_new_state(make_old, make_new, check):
    old = make_old()
    assert update(old, make_new()) is True
    assert check(old)


def test_parts_keep_their_identity_for_whoever_else_holds_them():
    scores = [1]
    meta = {"n": 1}
    book = {"scores": scores, "meta": meta, "gone": [0]}
    assert update(book, {"scores": [1, 2], "meta": {"n": 2}, "new": 3}) is True
    assert book["scores"] is scores and scores == [1, 2]
    assert book["meta"] is meta and meta == {"n": 2}
    assert book == {"scores": [1, 2], "meta": {"n": 2}, "new": 3}


def test_a_tuple_is_kept_when_its_parts_changed_in_place():
    part = [1]
    pair = (part, "x")
    assert update(pair, ([1, 2], "x")) is True
    assert part == [1, 2]


@pytest.mark.parametrize(
    ("old", "new"),
    [(1, 2), ("a", "b"), ([1], (1,)), (np.zeros(2), np.zeros(3)), (Model(), Slotted())],
    ids=["int", "str", "list-to-tuple", "array-of-another-size", "another-type"],
)
def test_what_cannot_take_the_change_is_said_so(old, new):
    assert update(old, new) is False


def test_a_librarys_internals_are_replaced_not_rewritten():
    frame = pd.DataFrame({"a": [1, 2]})
    inner = frame._mgr
    assert update(frame, pd.DataFrame({"a": [3, 4]})) is True
    assert frame["a"].tolist() == [3, 4]
    assert frame._mgr is not inner


def test_a_new_tuple_holding_a_changed_object_is_made_once_for_all_who_hold_it():
    notebooks, cells = [0], [1]  # the notebook's list, and the copy the cell changed
    updates = Updates()
    assert updates.update_all({"kid": (notebooks, cells)}) == {"kid": True}
    pair = (cells, "x")
    both = updates.resolved([pair, pair])
    assert both[0] is both[1] and both[0][0] is notebooks
    assert updates.resolved(pair) is both[0]  # another name for it: the same tuple


def test_a_librarys_object_is_taken_before_the_container_that_holds_it():
    series, cells = pd.Series([1, 2]), pd.Series([100, 2])
    holder = {"s": series}
    updates = Updates()
    taken = updates.update_all({"holder": (holder, {"s": cells}), "s": (series, cells)})
    assert taken == {"holder": True, "s": True}
    assert holder["s"] is series and series.tolist() == [100, 2]
