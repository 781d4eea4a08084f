"""Which of its inputs a cell changed in place, told in the cell's process.

A cell that appends to a notebook list, sets a dict item or an attribute, sorts, fits a model
or writes into an array changes an object the notebook holds: the notebook must see the change,
as it would had the cell run there. Before the cell runs each input that is data is pickled
once (its large buffers left out of band), and again after it: an input whose pickle differs,
or one of whose large buffers the cell wrote to, was changed. A large buffer the cell received
as shared memory is judged by its pages, never read (:meth:`~taskcell.runner.wire.Channel.
written`); others by a hash. An input the cell only read costs no copy back.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import xxhash

from taskcell.runner import crossing

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
    """Fingerprints of a cell's data inputs, taken before it runs."""

    def __init__(self, inputs: dict[str, Any], written: Written) -> None:
        self._written = written
        #: The input objects themselves, by name: what the notebook's objects were sent as.
        self.objects = {name: value for name, value in inputs.items() if is_data(value)}
        self._before = {name: self._fingerprint(v) for name, v in self.objects.items()}

    def changed(self) -> dict[str, Any]:
        """The inputs whose objects the cell changed, by name."""
        return {
            name: value
            for name, value in self.objects.items()
            if self._fingerprint(value) != self._before[name]
        }

    def judged(self) -> set[str]:
        """The inputs whose change could be told: those that pickled before the cell ran (one
        that did not is never known to be unchanged)."""
        return {name for name, before in self._before.items() if before is not None}

    def _fingerprint(self, value: Any) -> tuple | None:
        buffers: list[Any] = []
        try:
            data = crossing.dumps(value, buffers.append)
        except Exception:  # it cannot travel back either; the reply names it
            return None
        parts: list[Any] = [xxhash.xxh3_128_digest(data)]
        for buffer in buffers:
            raw = buffer.raw()
            written = self._written(raw)
            if written is None:
                parts.append(xxhash.xxh3_128_digest(raw))
            else:
                parts.append((raw.nbytes, written))
        return tuple(parts)
