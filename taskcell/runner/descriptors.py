"""Values that pickle, yet must not travel to another process.

A ``multiprocessing`` ``Connection`` pickles as its bare file descriptor number; rebuilt in
another process it stands for whatever that number is there, and closes it when it goes (Dask's
own sockets, say). Such a value is refused as one that cannot be pickled, so a cell names it
instead of breaking the worker or the notebook.
"""

from __future__ import annotations

import copyreg
import functools
from typing import Any, NoReturn

import cloudpickle


@functools.cache
def refused_types() -> tuple[type, ...]:
    from multiprocessing.connection import Connection

    return (Connection,)


def refuse(value: Any) -> NoReturn:
    raise TypeError(
        f"a {type(value).__name__} holds a file descriptor of this process: it cannot travel"
    )


class Pickler(cloudpickle.CloudPickler):
    """cloudpickle's pickler, refusing :func:`refused_types`."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, refused_types()):
            refuse(obj)
        return super().reducer_override(obj)


def refuse_everywhere() -> None:
    """Refuse these values to every pickler of this process (a cell process's)."""
    for cls in refused_types():
        copyreg.pickle(cls, refuse)
