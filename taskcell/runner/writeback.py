"""A finished cell applied to the notebook, so that it looks as if the cell had run there.

Only a cell that succeeded is applied, and then all of it: the inputs it changed in place take
their new state, keeping their identity (:mod:`taskcell.runner.inplace`); the names it bound are
bound, to the notebook's own objects where the cell bound an input's (``y = x``), the functions
and classes it defined reading the notebook's globals from now on; the names it
deleted go; process-wide state it changed (a random generator that moved on, an option it set,
an environment variable) is set here. What could not come back is named in a note, never
silently dropped; only a file the cell closed (its ``with`` is over) is unbound without one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from taskcell.runner import inplace, process_state
from taskcell.runner.closure import adopt
from taskcell.runner.crossing import apply_definitions
from taskcell.runner.job import CellResult

if TYPE_CHECKING:
    from distributed import Client


@dataclass(frozen=True)
class Sent:
    """What the notebook sent a cell: its input objects by name, and the names it may delete."""

    objects: dict[str, Any]
    deleted: tuple[str, ...]


def write_back(
    client: Client,
    namespace: MutableMapping[str, Any],
    sent: Sent,
    result: CellResult,
    may_bind: Callable[[str], bool] = lambda name: True,
) -> tuple[Any, list[str]]:
    """Apply ``result`` to ``namespace``; the cell's value (its ``Out[]``) and the notes to show.

    ``may_bind`` says whether a name may be bound or deleted now (a background cell's rule);
    changes in place and process-wide state are applied whatever it says, as they would have
    been had the cell run here.
    """
    if result.futures:
        _adopt_futures(client, result)
    notes = []
    bound = {*result.outputs, *result.aliases, *result.shared}
    updates = inplace.Updates()
    taken = updates.update_all({n: (sent.objects[n], new) for n, new in result.changed.items()})
    for name, new in result.changed.items():
        old = sent.objects[name]
        if taken[name]:
            continue
        others = [n for n, v in namespace.items() if v is old and n != name]
        if name not in bound and name not in sent.deleted and may_bind(name):
            namespace[name] = new
        if others:
            notes.append(
                f"the cell changed {name} in place, but the notebook's {type(old).__name__} "
                f"could not take the change: {', '.join(others)} still "
                f"{'holds' if len(others) == 1 else 'hold'} the value from before"
            )
    apply_definitions(result.definitions, updates.update)
    # What the cell bound that is (a part of) an object it changed is the notebook's object.
    outputs = {n: updates.resolved(v) for n, v in result.outputs.items()}
    adopt(namespace, {n: v for n, v in outputs.items() if may_bind(n)})
    for name, source in result.aliases.items():
        if may_bind(name):
            namespace[name] = sent.objects[source]
    for name, other in result.shared.items():
        if may_bind(name) and other in outputs:
            namespace[name] = outputs[other]
    for name in sent.deleted:
        if name not in bound and may_bind(name):
            namespace.pop(name, None)
    for name, why in result.lost_changes.items():
        notes.append(
            f"the cell changed {name} in place, but it ({why}) cannot come back from the "
            f"worker: the notebook's {name} is as it was"
        )
    for name, why in result.lost.items():
        if may_bind(name):
            namespace.pop(name, None)
        if not why:  # a closed file (see runner.child._sendable): nothing was lost
            continue
        notes.append(
            f"{name} ({why}) cannot come back from the worker, so it is not bound here. "
            f"Make it in a plain cell, or turn it into a value that pickles in this one."
        )
    process_state.apply(result.state)
    for key, setting in result.environ.items():
        if setting is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = setting
    value = sent.objects[result.value_alias] if result.value_alias else result.value
    return updates.resolved(value), notes


def _adopt_futures(client: Client, result: CellResult) -> None:
    """Bind the futures the cell left in its names to this client (the worker has told the
    scheduler this client wants them)."""
    from distributed.client import futures_of

    values = [*result.outputs.values(), *result.changed.values(), result.value]
    futures = [f for value in values for f in futures_of(value)]
    for future in futures:
        future.bind_client(client)
    if futures:
        client._inform_scheduler_of_futures()
