"""A cell output too large to bring back: it stays on its worker behind this handle."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from taskcell.runner.crossing import guard_classes
from taskcell.spec.amounts import show_bytes

if TYPE_CHECKING:
    from distributed import Future


class RemoteValue:
    """A value that lives on a worker. ``%%task`` cells use it where it is; touching it here
    (an attribute, an index, ``len``, ``numpy.asarray``) fetches it once."""

    def __init__(self, future: Future, name: str, nbytes: int) -> None:
        self.future = future
        self.name = name
        self.nbytes = nbytes
        self._local: Any = None
        self._fetched = False

    def fetch(self) -> Any:
        """The value itself, brought to this process (once)."""
        if not self._fetched:
            with guard_classes():  # it may hold instances of the notebook's classes
                self._local, self._fetched = self.future.result(), True
        return self._local

    def retarget(self, value: Any) -> None:
        """Stand for ``value`` from now on (another handle's, or a value here): a cell changed
        this one in place, and every name holding this handle must see it."""
        if isinstance(value, RemoteValue):
            self.future, self.nbytes = value.future, value.nbytes
            self._local, self._fetched = None, False
        else:
            self._local, self._fetched = value, True

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") or attr in {"future", "name", "nbytes", "_local", "_fetched"}:
            raise AttributeError(attr)
        return getattr(self.fetch(), attr)

    def __getitem__(self, item: Any) -> Any:
        return self.fetch()[item]

    def __len__(self) -> int:
        return len(self.fetch())

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        import numpy as np

        return np.asarray(self.fetch(), *args, **kwargs)

    def __repr__(self) -> str:
        return (
            f"<RemoteValue {self.name!r}: {show_bytes(self.nbytes)} kept on the cluster "
            f"(key {self.future.key!r}); .fetch() brings it here>"
        )
