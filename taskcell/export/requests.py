"""What a ``%%task`` line asks for, resolved as far as export time allows.

The line is read with the magic's own grammar and layering (environment, then preset, then the
line's fields, :func:`~taskcell.runner.task_line.build_request`). A field whose text is not a
valid value but is a Python expression (``--cpu "min(8, len(files))"``) is *dynamic*
(:func:`~taskcell.runner.task_line.read_fields`): the magic evaluates it against the notebook's
names when the cell runs, and the exported task evaluates it against the task's arguments when
it is called. Everything else is resolved now.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from taskcell.errors import SpecError
from taskcell.export.notebook import Cell, ExportError
from taskcell.runner.task_line import TaskLine, base_request, read_fields
from taskcell.spec import BUILTIN_PRESETS, Environment, Expression, Resources

__all__ = ["TaskRequest", "dynamic_fields", "expression", "resolve_request"]

#: A dynamic value's expression, read once (refused with a SpecError when it is no expression).
expression = functools.lru_cache(maxsize=4096)(Expression)


@dataclass(frozen=True, kw_only=True)
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
    built: dict[str, TaskRequest] | None = None,
) -> TaskRequest:
    """The request of a task cell, with the environments defined before it.

    ``built`` keeps the requests built so far under these environments, by their line: cells
    that ask for the same share one, and a notebook's length costs no more than that.

    Raises
    ------
    ExportError
        For an unknown preset or environment, a malformed value, or an expression that is not
        valid Python; the message names the cell.
    """
    line = cell.task
    assert line is not None
    key = repr(line)
    if built is not None and key in built:
        return built[key]
    try:
        own = read_fields(line)
        for text in own.dynamic.values():
            expression(text)
        whole = base_request(line, lambda: presets, environments, {}).override(own.fixed)
        preset = base_request(replace(line, env=None), lambda: presets, {}, {})
    except SpecError as e:
        raise ExportError(f"{cell.label}: {e}") from e
    builtin = line.preset is not None and presets.get(line.preset) == BUILTIN_PRESETS.get(
        line.preset
    )
    request = TaskRequest(
        resources=whole,
        own=preset.override(own.fixed),
        preset=line.preset,
        builtin_preset=builtin,
        env=line.env,
        dynamic=own.dynamic,
        retries=line.retries,
        pure_preset=line.preset is not None and not (line.fields or line.extra or line.env),
    )
    if built is not None:
        built[key] = request
    return request


@functools.lru_cache(maxsize=1024)
def dynamic_fields(fields: tuple[tuple[str, str], ...]) -> Mapping[str, str]:
    """The dynamic ones among a line's fields (field -> expression text), as
    :func:`resolve_request` finds them; a notebook repeats a few lines many times."""
    return read_fields(TaskLine(fields=dict(fields))).dynamic
