"""The export targets as records: the traits the shared planner asks, and each one's renderer.

The planner (:mod:`taskcell.export.flow`) asks traits, never names. Adding a target is a module
that renders a plan, a row in :data:`EXPORT_TARGETS`, and its name in ``taskcell.export.Target``
(which ``labextension/src/generated.ts`` is generated from; ``tests/export/test_targets.py``
checks the two agree).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from taskcell.errors import ExportError

__all__ = ["EXPORT_TARGETS", "ExportTarget", "Shipping", "export_target"]

Shipping = Literal["pickle", "copy", "rebound"]
"""How a task gets the notebook's functions: pickled with the driver's globals they read (so no
star import runs again, and a function travels with the names it changes); as copies in a process
of its own (a function changing the notebook's data in place is refused); or as values made to
read the names passed beside them (:func:`~taskcell.export.standalone.rebound`)."""


@dataclass(frozen=True, kw_only=True)
class ExportTarget:
    """One export target: what the planner asks of it, and the function rendering its module."""

    name: str
    renderer: str
    """``module:function`` rendering a plan: the module's source (unformatted), and notes."""
    ships_functions: Shipping
    keeps_cluster: bool = False
    """The notebook's Dask cluster stays in the driver, and task cells using it run there."""
    types_params: bool = False
    """The planner follows the type of every name a task reads."""
    types_updates: bool = False
    """The planner types what tasks change in place, to leave out an immutable value."""
    types_returns: bool = False
    """The planner types every task's results."""
    returns_results: bool = True
    """The module gives back the notebook's final values: a task returns them though unread."""
    checks_travel: bool = False
    """Every code cell runs as a task: what it reads must travel between tasks too."""


#: The export targets by name, in the order offered: one row each.
EXPORT_TARGETS: dict[str, ExportTarget] = {
    target.name: target
    for target in (
        ExportTarget(
            name="dask",
            renderer="taskcell.export.dask_target:render_dask",
            ships_functions="pickle",
            keeps_cluster=True,
            types_updates=True,
        ),
        ExportTarget(
            name="flyte",
            renderer="taskcell.export.flyte_target:render_flyte",
            ships_functions="copy",
            types_params=True,
            types_returns=True,
            returns_results=False,
        ),
        ExportTarget(
            name="latch",
            renderer="taskcell.export.latch_target:render_latch",
            ships_functions="rebound",
            checks_travel=True,
        ),
    )
}


def export_target(target: str | ExportTarget) -> ExportTarget:
    """The row for ``target`` (a name, or a row of one's own); ExportError names a bad one."""
    if isinstance(target, ExportTarget):
        return target
    if not isinstance(target, str) or target not in EXPORT_TARGETS:
        raise ExportError(f"target= must be one of {', '.join(EXPORT_TARGETS)}, got {target!r}")
    return EXPORT_TARGETS[target]
