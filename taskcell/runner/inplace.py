"""Applying a change a cell made on its worker to the notebook's own object.

When a task cell changes an input in place (``results.append(x)``, ``d[k] = v``, ``df["c"] =
...``, ``model.fit(X, y)``), the worker sends the object's new state back and :func:`update`
makes the notebook's object take it, keeping its identity: every name, list or dict in the
notebook that refers to it sees the change, as in Python. Parts are updated the same way where
old and new correspond (``d["k"].append(1)`` changes the list ``d["k"]`` is, for whoever else
holds it). An object that cannot take a new state in place (a different type, an array of
another shape, an immutable value) is replaced instead, and :func:`update` says so.
"""

from __future__ import annotations

import collections
import collections.abc
import copyreg
from collections.abc import Mapping
from typing import Any, TypeVar

from taskcell.runner.remote_value import RemoteValue

K = TypeVar("K")

#: How deep into containers and attributes parts are updated in place; deeper, they are replaced.
_DEPTH = 32
_IMMUTABLE = (type(None), bool, int, float, complex, str, bytes, range, frozenset, type)


def update(old: Any, new: Any) -> bool:
    """Make ``old`` look like ``new`` in place; False when it cannot (bind ``new`` instead)."""
    return _update(old, new, {}, 0) is old


class Updates:
    """Updates in place that remember what they matched: an object of the cell's result that
    took the place of one of the notebook's (a part of an input it changed, a function's
    default) stands, wherever else the result holds it, for the notebook's own object."""

    def __init__(self) -> None:
        self._memo: dict[int, Any] = {}

    def update(self, old: Any, new: Any) -> bool:
        """:func:`update`, remembering what matched what."""
        return _update(old, new, self._memo, 0) is old

    def update_all(self, pairs: Mapping[K, tuple[Any, Any]]) -> dict[K, bool]:
        """:meth:`update` of each ``(old, new)`` by key, a library's objects first: taken in
        place only at the top, they are then matched where a container holds them too
        (``d = {"s": series}``), and the container keeps the notebook's own object."""
        order = sorted(pairs, key=lambda key: _is_part_kept(pairs[key][0]))
        return {key: self.update(*pairs[key]) for key in order}

    def resolved(self, new: Any) -> Any:
        """The notebook's object ``new`` was matched with, or ``new`` itself, its parts that
        were matched replaced by the notebook's (``k = Node(parent=kid)``, ``kid`` changed;
        a tuple holding one is made again, as the cell's would hold the notebook's)."""
        if id(new) in self._memo:
            return self._memo[id(new)]
        return _replace_parts(new, self._memo, set(), 0) if self._memo else new


def _replace_parts(value: Any, memo: dict[int, Any], seen: set[int], depth: int) -> Any:
    """``value`` (a new object) holding the notebook's object where it holds one matched with
    it, through the containers and objects :func:`_update` changes in place: changed in place,
    or, a tuple, made again."""
    if id(value) in memo:
        return memo[id(value)]
    if depth > _DEPTH or id(value) in seen or not _is_part_kept(value) or _is_ndarray(value):
        return value
    seen.add(id(value))
    if isinstance(value, tuple):
        parts = [_replace_parts(part, memo, seen, depth + 1) for part in value]
        if all(p is q for p, q in zip(parts, value, strict=True)):
            return value
        make = tuple if type(value) is tuple else getattr(type(value), "_make", None)
        if make is not None:  # a tuple or a namedtuple, made again once for all who hold it
            memo[id(value)] = make(parts)
        return memo.get(id(value), value)
    if isinstance(value, (list, collections.deque)):
        slots: Any = enumerate(list(value))
        target: Any = value
    elif isinstance(value, dict):
        slots, target = list(value.items()), value
    elif isinstance(value, set):
        for part in value:
            _replace_parts(part, memo, seen, depth + 1)
        return value
    elif isinstance(target := _attributes(value), dict):
        slots = list(target.items())
    else:
        return value
    for key, part in slots:
        replaced = _replace_parts(part, memo, seen, depth + 1)
        if replaced is not part:
            target[key] = replaced
    return value


def _attributes(value: Any) -> Any:
    """``vars(value)``, or None: read as a guess, and a class's ``__getattr__`` may raise
    anything for a name it lacks."""
    try:
        return vars(value)
    except Exception:
        return None


def _update(old: Any, new: Any, memo: dict[int, Any], depth: int) -> Any:
    """The object that should stand where ``old`` stood: ``old`` changed to match ``new``, or
    ``new`` where ``old`` cannot take its state. Below the top, only containers, arrays and the
    notebook's own objects are changed in place: a library's internals are replaced whole."""
    if isinstance(old, RemoteValue) and old is not new:
        old.retarget(new)
        return old
    if old is new or type(old) is not type(new) or isinstance(old, _IMMUTABLE):
        return new
    if id(new) in memo:
        return memo[id(new)]
    if depth > _DEPTH or (depth and not _is_part_kept(old)):
        return new
    memo[id(new)] = old
    try:
        done = _update_by_type(old, new, memo, depth + 1)
    except Exception:  # an object that refuses: replaced, and reported as such
        done = False
    if not done:
        memo[id(new)] = new
        return new
    return old


def _update_by_type(old: Any, new: Any, memo: dict[int, Any], depth: int) -> bool:
    if isinstance(old, tuple):  # immutable itself; its parts may have changed in place
        parts = [_update(o, n, memo, depth) for o, n in zip(old, new, strict=False)]
        return len(old) == len(new) and all(p is o for p, o in zip(parts, old, strict=True))
    if isinstance(old, list):
        old[:] = _parts_of_sequence(old, new, memo, depth)
        return True
    if isinstance(old, collections.deque):
        items = _parts_of_sequence(list(old), list(new), memo, depth)
        old.clear()
        old.extend(items)
        return True
    if isinstance(old, dict):
        keys = {k: k for k in old}  # an equal key stays the notebook's own key object
        entries = {
            keys.get(k, k): _update(old[k], v, memo, depth) if k in old else v
            for k, v in new.items()
        }
        old.clear()
        old.update(entries)
        if isinstance(old, collections.defaultdict):
            old.default_factory = new.default_factory
        _update_attributes(old, new, memo, depth)
        return True
    if isinstance(old, set):
        members = {m: m for m in old}  # an equal member stays the notebook's own object
        kept = [members.get(m, m) for m in new]
        old.clear()
        old.update(kept)
        return True
    if isinstance(old, bytearray):
        old[:] = new
        return True
    if _is_ndarray(old):
        if old.size != new.size or old.dtype != new.dtype or not old.flags.writeable:
            return False
        if old.shape != new.shape:
            old.shape = new.shape  # AttributeError where it cannot be reshaped without a copy
        old[...] = new
        return True
    if isinstance(old, collections.abc.MutableSequence):  # array.array, user sequences
        old[:] = new
        return True
    return _update_attributes(old, new, memo, depth) or _update_state(old, new, memo)


def _parts_of_sequence(old: list, new: list, memo: dict[int, Any], depth: int) -> list:
    return [
        _update(old[i], value, memo, depth) if i < len(old) else value
        for i, value in enumerate(new)
    ]


def _update_attributes(old: Any, new: Any, memo: dict[int, Any], depth: int) -> bool:
    """An object's attributes (``__dict__`` and ``__slots__``) taken from ``new``."""
    has_dict = hasattr(old, "__dict__") and hasattr(new, "__dict__")
    slots = copyreg._slotnames(type(old))  # type: ignore[attr-defined]
    if not has_dict and not slots:
        return False
    if has_dict:
        mine = vars(old)
        parts = {
            k: _update(mine[k], v, memo, depth) if k in mine else v for k, v in vars(new).items()
        }
        mine.clear()
        mine.update(parts)
    for slot in slots:
        if hasattr(new, slot):
            object.__setattr__(
                old, slot, _update(getattr(old, slot, None), getattr(new, slot), memo, depth)
            )
        elif hasattr(old, slot):
            object.__delattr__(old, slot)
    return True


def _update_state(old: Any, new: Any, memo: dict[int, Any]) -> bool:
    """An object kept in C (a numpy ``Generator``, ...): the parts its constructor takes are
    updated in place, or equal, and it takes the state its pickle carries."""
    old_reduced, new_reduced = old.__reduce_ex__(2), new.__reduce_ex__(2)
    if not (isinstance(old_reduced, tuple) and isinstance(new_reduced, tuple)):
        return False
    if old_reduced[0] != new_reduced[0] or len(old_reduced[1]) != len(new_reduced[1]):
        return False
    for part, new_part in zip(old_reduced[1], new_reduced[1], strict=True):
        if _update(part, new_part, memo, 0) is not part and not _equal(part, new_part):
            return False
    state = new_reduced[2] if len(new_reduced) > 2 else None
    if state is not None:
        old.__setstate__(state)
    return True


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return False


def _is_part_kept(value: Any) -> bool:
    return (
        isinstance(value, (list, dict, set, tuple, bytearray, collections.deque, RemoteValue))
        or _is_ndarray(value)
        or type(value).__module__ == "__main__"
    )


def _is_ndarray(value: Any) -> bool:
    return type(value).__module__ == "numpy" and type(value).__name__ == "ndarray"
