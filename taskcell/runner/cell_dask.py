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
import json
import os
import re
import time
import types
from collections.abc import Callable, Iterable
from typing import Any

from taskcell.runner.analysis import CellAnalysis

_client: Any = None
#: The environment variable that gives a cell process its worker's TLS credentials (JSON).
CELL_TLS = "TASKCELL_WORKER_TLS"
_credentials: str | None = None


def client(on_first_graph: Callable[[], None]) -> Any:
    """This process's client of its worker's scheduler, calling ``on_first_graph`` before the
    first graph it submits from now on."""
    global _client
    if _client is None or _client.status not in ("running", "connecting"):
        _client = _cell_client_class()(
            os.environ["DASK_SCHEDULER_ADDRESS"], security=_security(), set_as_default=True
        )
    _client.on_first_graph = on_first_graph
    return _client


def take_credentials() -> None:
    """Move the worker's TLS credentials (:data:`CELL_TLS`) out of this process's environment,
    where a cell's subprocesses, ``!env`` and ``%env`` would see them, into this module."""
    global _credentials
    _credentials = os.environ.pop(CELL_TLS, None)


def _security() -> Any:
    """The worker's TLS credentials, or None: Dask's config decides."""
    if not _credentials:
        return None
    from distributed import Security

    return Security(**json.loads(_credentials))


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


def bind_futures(cell_client: Any, values: Iterable[Any]) -> bool:
    """Bind the futures the notebook sent to this process's client; whether there were any."""
    futures = futures_in(values)
    for future in futures:
        future.bind_client(cell_client)
    if futures:
        cell_client._inform_scheduler_of_futures()
    return bool(futures)


def hand_over(cell_client: Any, values: Iterable[Any], notebook_client_id: str) -> list[str]:
    """Make the scheduler count the notebook's client among those that want the futures in
    ``values``, before this process lets go of them; their keys.

    Done through the scheduler's RPC, which returns once it is done (a message on this
    client's stream could still be in its buffer when the process ends), and only once the
    scheduler knows every key (a graph this cell just submitted may still be on its way).
    """
    keys = list(dict.fromkeys(f.key for f in futures_in(values)))
    if not keys:
        return keys
    deadline = time.monotonic() + _HAND_OVER_WAIT
    while None in cell_client.sync(cell_client.scheduler.get_task_status, keys=keys).values():
        if time.monotonic() > deadline:
            break  # those it never learns of are lost, and a later compute says so
        time.sleep(0.01)

    def want(dask_scheduler: Any) -> None:  # nested, so it travels by value
        dask_scheduler.client_desires_keys(keys=keys, client=notebook_client_id)

    cell_client.run_on_scheduler(want)
    return keys


#: How long a cell's new futures may take to reach the scheduler, in seconds.
_HAND_OVER_WAIT = 30


_DASK_WORDS = re.compile(r"\b(dask|distributed|compute|persist|get_client|Client)\b")
_DASK_MODULES = frozenset({"dask", "distributed", "dask_expr"})


def uses_dask(analysis: CellAnalysis, source: str, inputs: Iterable[Any]) -> bool:
    """Whether a cell may use Dask (in the notebook: its process then connects first): it
    imports or names Dask, or an input is a Dask object, holds some, or is a notebook function
    that computes."""
    if _DASK_MODULES.intersection(analysis.imports) or _DASK_WORDS.search(source):
        return True
    seen: set[int] = set()
    return any(_is_dask(value, seen) for value in inputs)


def _is_dask(value: Any, seen: set[int]) -> bool:
    """Whether ``value`` is or holds a Dask object (in its first 100 items, each container
    looked at once: one may hold itself)."""
    if type(value).__module__.partition(".")[0] in _DASK_MODULES:
        return True
    if isinstance(value, (list, tuple, set, dict)):
        if id(value) in seen:
            return False
        seen.add(id(value))
        items = value.values() if isinstance(value, dict) else value
        return any(_is_dask(v, seen) for v in itertools.islice(items, 100))
    func = value.__func__ if isinstance(value, types.MethodType) else value
    code = func.__code__ if isinstance(func, types.FunctionType) else None
    return code is not None and bool(_DASK_WORDS.search(" ".join(code.co_names)))
