"""Dask inside a cell process: the cluster the cell runs on, shared with the notebook.

A cell that uses Dask gets a ``Client`` of its worker's scheduler as the default one (made once
per cell process): ``.compute()``, ``dask.compute``, ``.persist()`` and ``get_client()`` in the
cell run on the notebook's cluster, and a name holding the notebook's own ``Client`` means this
one. The notebook's futures and persisted collections arrive bound to it; those the cell leaves
in its names are handed to the notebook's client before the cell's own references go. The
first graph a cell submits makes its task secede from the worker's thread pool, as
``distributed.worker_client`` does, so a cell that waits on its own graph never deadlocks, even
on a worker with one thread.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Iterable
from typing import Any

from taskcell.runner.analysis import CellAnalysis

_client: Any = None


def client(on_first_graph: Callable[[], None]) -> Any:
    """This process's client of its worker's scheduler, calling ``on_first_graph`` before the
    first graph it submits from now on."""
    global _client
    if _client is None or _client.status not in ("running", "connecting"):
        _client = _cell_client_class()(os.environ["DASK_SCHEDULER_ADDRESS"], set_as_default=True)
    _client.on_first_graph = on_first_graph
    return _client


def _cell_client_class() -> type:
    from distributed import Client

    class CellClient(Client):
        """A client that tells the worker before its first graph: the cell will wait on it."""

        on_first_graph: Callable[[], None] | None = None

        def _graph_to_futures(self, *args: Any, **kwargs: Any) -> Any:
            hook, self.on_first_graph = self.on_first_graph, None
            if hook is not None:
                hook()
            return super()._graph_to_futures(*args, **kwargs)

    return CellClient


def futures_in(values: Iterable[Any]) -> list[Any]:
    """The futures ``values`` hold, in collections and persisted Dask collections too."""
    from distributed.client import futures_of

    return [f for value in values for f in futures_of(value)]


def adopt(cell_client: Any, values: Iterable[Any]) -> bool:
    """Bind the futures the notebook sent to this process's client; whether there were any."""
    futures = futures_in(values)
    for future in futures:
        future.bind_client(cell_client)
    if futures:
        cell_client._inform_scheduler_of_futures()
    return bool(futures)


def hand_over(cell_client: Any, values: Iterable[Any], notebook_client_id: str) -> list[str]:
    """Tell the scheduler the notebook's client wants the futures in ``values``, before this
    process lets go of them (the same stream carries both, in order); their keys."""
    keys = list(dict.fromkeys(f.key for f in futures_in(values)))
    if keys:
        cell_client._send_to_scheduler(
            {"op": "client-desires-keys", "keys": keys, "client": notebook_client_id}
        )
    return keys


_DASK_WORDS = re.compile(r"\b(dask|distributed|compute|persist|get_client|Client)\b")
_DASK_MODULES = frozenset({"dask", "distributed", "dask_expr"})


def uses_dask(analysis: CellAnalysis, source: str, inputs: Iterable[Any]) -> bool:
    """Whether a cell may use Dask (in the notebook: its process then connects first): it
    imports or names Dask, or an input is a Dask object, holds some, or is a notebook function
    that computes."""
    if _DASK_MODULES.intersection(analysis.imports) or _DASK_WORDS.search(source):
        return True
    return any(_is_dask(value) for value in inputs)


def _is_dask(value: Any) -> bool:
    if type(value).__module__.partition(".")[0] in _DASK_MODULES:
        return True
    if isinstance(value, (list, tuple, set)):
        return any(_is_dask(v) for v in itertools.islice(value, 100))
    if isinstance(value, dict):
        return any(_is_dask(v) for v in itertools.islice(value.values(), 100))
    code = getattr(value, "__code__", None)
    return code is not None and bool(_DASK_WORDS.search(" ".join(code.co_names)))
