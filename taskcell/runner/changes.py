"""Which of its inputs a cell changed in place, told in the cell's process.

A cell that appends to a notebook list, sets a dict item or an attribute, sorts, fits a model
or writes into an array changes an object the notebook holds: the notebook must see the change,
as it would had the cell run there. Before the cell runs each input that is data is pickled
once (its large buffers left out of band), and again after it: an input whose pickle differs,
or one of whose large buffers the cell wrote to, was changed. A large buffer the cell received
as shared memory is judged by its pages, never read (:meth:`~taskcell.runner.wire.Channel.
written`); others by a hash. An input the cell only read costs no copy back.

An input that came in its own pickle of plain data (:attr:`~taskcell.runner.crossing.Sealed.
plain`) is not pickled before: that pickle stands for it. After the cell, a value that pickles
to it again is unchanged; only one that does not is compared with that pickle opened afresh
(pickling need not give back the bytes it was made from: a set's order, say).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any

import xxhash

from taskcell.runner import crossing, wire

Written = Callable[[memoryview], "bool | None"]
_NOT_DATA = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.ModuleType,
    type,
)


def is_data(value: Any) -> bool:
    """Whether a change to ``value`` in place is the cell's to bring back: not code, and not a
    Dask object (collections and futures are immutable; a client is the cluster's)."""
    if isinstance(value, _NOT_DATA):
        return False
    root = type(value).__module__.partition(".")[0]
    return root not in ("dask", "distributed", "dask_expr")


class InputSnapshot:
    """Fingerprints of a cell's data inputs, taken before it runs. ``sent``: the inputs that
    came in their own plain pickle, by name (see the module docstring)."""

    def __init__(
        self,
        inputs: dict[str, Any],
        written: Written,
        sent: Mapping[str, crossing.Sealed] | None = None,
    ) -> None:
        self._written = written
        self._sent = {n: s for n, s in (sent or {}).items() if s.plain and s.names == (n,)}
        #: The input objects themselves, by name: what the notebook's objects were sent as.
        self.objects = {name: value for name, value in inputs.items() if is_data(value)}
        self._before = {
            name: self._received(self._sent[name]) if name in self._sent else self._fingerprint(v)
            for name, v in self.objects.items()
        }

    def changed(self) -> dict[str, Any]:
        """The inputs whose objects the cell changed, by name."""
        return {name: value for name, value in self.objects.items() if self._differs(name, value)}

    def judged(self) -> set[str]:
        """The inputs whose change could be told: those that pickled before the cell ran, or
        came in a plain pickle of their own (one that did not is never known to be unchanged)."""
        return {name for name, before in self._before.items() if before is not None}

    def _differs(self, name: str, value: Any) -> bool:
        now, before = self._fingerprint(value), self._before[name]
        if now is None or before is None or name not in self._sent or now == before:
            return now != before
        # It pickles to other bytes than it came in (or the cell wrote to its arrays): unless
        # the cell wrote to the memory it came in, compare with its pickle opened afresh.
        sealed = self._sent[name]
        if tuple(map(self._part, sealed.buffers)) != before[1:]:
            return True
        try:
            [again] = sealed.open().values()
        except Exception:  # its reduction reads what the cell changed (a file): changed
            return True
        return now != self._fingerprint(again)

    def _received(self, sealed: crossing.Sealed) -> tuple:
        """The fingerprint of the value ``sealed`` holds, as it arrived: its pickle's hash and
        its buffers' parts, where its arrays' memory is."""
        return (xxhash.xxh3_128_digest(sealed.payload), *map(self._part, sealed.buffers))

    def _fingerprint(self, value: Any) -> tuple | None:
        buffers: list[Any] = []
        try:
            data = crossing.dumps(value, buffers.append)
        except Exception:  # it cannot travel back either; the reply names it
            return None
        return (xxhash.xxh3_128_digest(data), *(self._part(b.raw()) for b in buffers))

    def _part(self, buffer: Any) -> Any:
        """A large buffer's part of a fingerprint: where it came as shared memory, which memory
        it is and whether the cell wrote to its pages (two arrays swapped are a change); else
        a hash of it."""
        raw = memoryview(buffer).cast("B")
        written = self._written(raw)
        if written is None:
            return xxhash.xxh3_128_digest(raw)
        return wire.address_of(raw), raw.nbytes, written
