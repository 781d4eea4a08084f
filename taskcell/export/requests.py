"""What a ``%%task`` line asks for, resolved as far as export time allows.

The line is read with the magic's own grammar and layering (environment, then preset, then the
line's fields, :func:`~taskcell.runner.task_line.build_request`). A field whose text is not a
valid value but is a Python expression (``--cpu "min(8, len(files))"``) is *dynamic*: the magic
evaluates it against the notebook's names when the cell runs, and the exported task evaluates it
against the task's arguments when it is called. Everything else is resolved now.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field

from taskcell.errors import SpecError
from taskcell.export.notebook import Cell, ExportError
from taskcell.runner import task_line
from taskcell.runner.task_line import TaskLine, build_request
from taskcell.spec import BUILTIN_PRESETS, Environment, Expression, Resources

__all__ = ["TaskRequest", "expression", "is_dynamic", "resolve_request"]

#: Whether ``--name text`` is computed when the cell runs (the magic's rule); a notebook
#: repeats a few fields many times.
is_dynamic = functools.lru_cache(maxsize=4096)(task_line.is_dynamic)
#: A dynamic value's expression, read once (refused with a SpecError when it is no expression).
expression = functools.lru_cache(maxsize=4096)(Expression)


@dataclass(frozen=True)
class TaskRequest:
    """A task cell's request.

    Attributes
    ----------
    resources
        The whole fixed request: environment, preset and the line's fixed fields, layered.
    own
        The part the cell adds over its environment (preset and fixed fields); the whole request
        when it names no environment.
    preset
        The preset the cell names, if any.
    builtin_preset
        True when ``preset`` is one of Latch's presets, unchanged by the user's configuration.
    env
        The ``--env`` the cell names, if any.
    dynamic
        Fields computed when the task is called: field name -> Python expression text.
    retries
        ``--retries``.
    pure_preset
        The cell names a preset and nothing else (no environment, no field of its own).
    """

    resources: Resources
    own: Resources
    preset: str | None = None
    builtin_preset: bool = False
    env: str | None = None
    dynamic: Mapping[str, str] = field(default_factory=dict)
    retries: int = 0
    pure_preset: bool = False


def resolve_request(
    cell: Cell,
    presets: Mapping[str, Resources],
    environments: Mapping[str, Environment],
    built: dict[str, tuple[Resources, Resources]] | None = None,
) -> TaskRequest:
    """The request of a task cell, with the environments defined before it.

    ``built`` keeps the requests built so far under these environments, by their fixed line:
    cells that ask for the same share one, and a notebook's length costs no more than that.

    Raises
    ------
    ExportError
        For an unknown preset or environment, a malformed value, or an expression that is not
        valid Python; the message names the cell.
    """
    line = cell.task
    assert line is not None
    dynamic = {name: text for name, text in line.fields.items() if is_dynamic(name, text)}
    fixed = {name: text for name, text in line.fields.items() if name not in dynamic}
    whole_line = TaskLine(preset=line.preset, fields=fixed, extra=line.extra, env=line.env)
    key = repr(whole_line)
    try:
        for text in dynamic.values():
            expression(text)
        if built is None or key not in built:
            whole = build_request(whole_line, lambda: presets, environments, {})
            own_line = TaskLine(preset=line.preset, fields=fixed, extra=line.extra)
            own = build_request(own_line, lambda: presets, {}, {})
            if built is not None:
                built[key] = (whole, own)
        else:
            whole, own = built[key]
    except SpecError as e:
        raise ExportError(f"{cell.label}: {e}") from e
    builtin = line.preset is not None and presets.get(line.preset) == BUILTIN_PRESETS.get(
        line.preset
    )
    return TaskRequest(
        resources=whole,
        own=own,
        preset=line.preset,
        builtin_preset=builtin,
        env=line.env,
        dynamic=dynamic,
        retries=line.retries,
        pure_preset=line.preset is not None and not (line.fields or line.extra or line.env),
    )
