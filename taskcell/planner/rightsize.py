"""Right-sizing from measured use: which tasks asked for far too much or ran near their limit.

Every finished ``%%task`` records its wall time, the cores it kept busy (CPU time over wall
time) and its peak memory (:class:`~taskcell.runner.job.Usage`). :func:`review` compares them with
what the task asked for; :func:`auto_preset` picks a request for the next run of the same cell
(``%%task --preset auto``) from its past runs, or from the planner when it has none.

Records are read by their attributes (``key``, ``cell``, ``request``, ``state``, ``usage`` and,
when present, ``source``), as :class:`~taskcell.runner.history.TaskRecord` has them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from taskcell.errors import SpecError
from taskcell.planner.schema import HintInfo
from taskcell.planner.suggestion import cost, covers, round_up, show_bytes, suggest
from taskcell.spec import GPU, Resources

#: Used under this share of what it asked: over-requested.
LOW = 0.25
#: Used over this share of its limit: near its limit.
HIGH = 0.90
#: Memory asked for the next run over the measured peak.
HEADROOM = 1.25
#: Cores are judged only for tasks that ran at least this long (seconds): short runs mislead.
MIN_WALL_FOR_CPU = 1.0
#: Past runs of a cell that ``--preset auto`` looks at, newest first.
RECENT_RUNS = 5


@dataclass(frozen=True)
class Hint:
    """One finding about one finished task. See :class:`~taskcell.planner.schema.HintInfo`."""

    key: str
    cell: str
    kind: Literal["over-requested", "near-limit"]
    resource: Literal["memory", "cpu"]
    requested: float
    used: float
    message: str
    preset: str | None
    line: str | None

    def to_dict(self) -> HintInfo:
        return HintInfo(
            key=self.key,
            cell=self.cell,
            kind=self.kind,
            resource=self.resource,
            requested=self.requested,
            used=self.used,
            message=self.message,
            preset=self.preset,
            line=self.line,
        )

    def __str__(self) -> str:
        return self.message + (f" Next time: {self.line}" if self.line else "")


def _presets(presets: Mapping[str, Resources] | None) -> dict[str, Resources]:
    from taskcell import config

    return dict(config.presets() if presets is None else presets)


def _gpu_need(request: Resources) -> GPU | None:
    gpu = request.gpu
    if isinstance(gpu, GPU) and gpu.partition is None:
        return GPU(gpu.device, gpu.quantity) if gpu.device else GPU(None, gpu.quantity)
    return None


def fitting_preset(
    peak_memory: int,
    cores: float,
    like: Resources,
    presets: Mapping[str, Resources] | None = None,
    more_cores_than: float = 0,
) -> tuple[str | None, Resources]:
    """The smallest preset that would have held a run, or a custom request when none does.

    Memory is the peak plus a quarter; cores are those kept busy, rounded up (2.05 -> 2);
    GPUs are those ``like`` asked for, and a task without GPUs gets no GPU preset.
    """
    catalogue = _presets(presets)
    memory = math.ceil(peak_memory * HEADROOM)
    cpu = max(1, math.ceil(cores - 0.1), math.floor(more_cores_than) + 1 if more_cores_than else 0)
    gpu = _gpu_need(like)
    if like.gpu is not None and gpu is None:  # a MIG slice, TPU or other device: keep it as is
        request = Resources(cpu=cpu, memory=round_up(memory), gpu=like.gpu)
        return None, request
    fits = [
        (name, p)
        for name, p in catalogue.items()
        if (gpu is not None or p.gpu is None) and covers(p, memory=memory, cpu=cpu, gpu=gpu)
    ]
    if fits:
        return min(fits, key=lambda item: (cost(item[1]), item[0]))
    return None, Resources(cpu=cpu, memory=round_up(memory), gpu=like.gpu)


def _line(preset: str | None, request: Resources) -> str:
    return f"%%task {preset}" if preset else f"%%task {request.to_options()}"


def _pct(share: float) -> str:
    return f"{share * 100:.0f}%"


def review(
    records: Iterable[Any],
    presets: Mapping[str, Resources] | None = None,
    *,
    low: float = LOW,
    high: float = HIGH,
) -> list[Hint]:
    """Find the finished tasks that asked for far more than they used, or ran near their limit.

    Parameters
    ----------
    records : iterable of TaskRecord
        A kernel's task history (``%tasks`` shows it).
    presets : mapping, optional
        The presets to suggest from; every preset you can name by default.
    low, high : float
        Used under ``low`` of the request is over-requested (0.25); over ``high`` of the limit
        is near the limit (0.90).

    Returns
    -------
    list of Hint
        Oldest task first; for each, what would have fit (a preset, or a custom line).
    """
    catalogue = _presets(presets)
    hints = []
    for r in records:
        usage = getattr(r, "usage", None)
        if usage is None or getattr(r, "state", "finished") != "finished":
            continue
        hints += _memory_hints(r, usage, catalogue, low, high)
        hints += _cpu_hints(r, usage, catalogue, low, high)
    return hints


def _memory_hints(r: Any, usage: Any, catalogue: dict, low: float, high: float) -> list[Hint]:
    asked = r.request.memory
    if asked is None:
        return []
    peak = usage.peak_memory
    if peak < low * asked.request:
        preset, request = fitting_preset(peak, usage.cores, r.request, catalogue)
        message = (
            f"{r.cell} asked for {show_bytes(asked.request)} of memory and peaked at "
            f"{show_bytes(peak)} ({_pct(peak / asked.request)}); "
            f"{preset or 'a smaller request'} would have held it."
        )
        return [
            Hint(
                r.key,
                r.cell,
                "over-requested",
                "memory",
                asked.request,
                peak,
                message,
                preset,
                _line(preset, request),
            )
        ]
    if peak > high * asked.limit:
        preset, request = fitting_preset(peak, usage.cores, r.request, catalogue)
        message = (
            f"{r.cell} peaked at {show_bytes(peak)}, {_pct(peak / asked.limit)} of its "
            f"{show_bytes(asked.limit)} memory limit; the next run may run out of memory. "
            f"Give it {preset or 'more'}."
        )
        return [
            Hint(
                r.key,
                r.cell,
                "near-limit",
                "memory",
                asked.limit,
                peak,
                message,
                preset,
                _line(preset, request),
            )
        ]
    return []


def _cpu_hints(r: Any, usage: Any, catalogue: dict, low: float, high: float) -> list[Hint]:
    asked = r.request.cpu
    if asked is None or usage.wall < MIN_WALL_FOR_CPU:
        return []
    cores = usage.cores
    requested, limit = float(asked.request), float(asked.limit)
    if cores < low * requested:
        preset, request = fitting_preset(usage.peak_memory, cores, r.request, catalogue)
        message = (
            f"{r.cell} asked for {requested:g} cores and kept {cores:.2g} busy "
            f"({_pct(cores / requested)}); {preset or 'a smaller request'} would have done."
        )
        return [
            Hint(
                r.key,
                r.cell,
                "over-requested",
                "cpu",
                requested,
                cores,
                message,
                preset,
                _line(preset, request),
            )
        ]
    if cores > high * limit:
        preset, request = fitting_preset(
            usage.peak_memory, cores, r.request, catalogue, more_cores_than=limit
        )
        message = (
            f"{r.cell} kept {cores:.2g} of its {limit:g} cores busy ({_pct(cores / limit)}): "
            f"it is CPU-bound and may run faster with more, e.g. {preset or 'a larger request'}."
        )
        return [
            Hint(
                r.key,
                r.cell,
                "near-limit",
                "cpu",
                limit,
                cores,
                message,
                preset,
                _line(preset, request),
            )
        ]
    return []


@dataclass(frozen=True)
class AutoChoice:
    """What ``%%task --preset auto`` runs a cell with, and why.

    ``preset`` is the preset's name, or None for a custom request; ``request`` is what to
    ask for either way; ``basis`` says whether past runs or the planner decided.
    """

    preset: str | None
    request: Resources
    basis: Literal["history", "planner"]
    reason: str


def _same_cell(r: Any, name: str | None, source: str | None) -> bool:
    if source is not None and getattr(r, "source", None) == source:
        return True
    return name is not None and r.cell == name


def auto_preset(
    history: Sequence[Any],
    *,
    name: str | None = None,
    source: str | None = None,
    inputs_size: Any = 0,
    profile: str = "default",
    presets: Mapping[str, Resources] | None = None,
    workers: Any = None,
) -> AutoChoice:
    """Choose the request for ``%%task --preset auto``.

    From the last finished runs of the same cell (same ``--name``, or the same source), the
    smallest preset that holds their highest peak memory plus a quarter, the most cores they
    kept busy, and the GPUs they asked for. With no such run, the planner's suggestion for the
    cell's inputs (``inputs_size``) under ``profile``.

    Parameters
    ----------
    history : sequence of TaskRecord
        The kernel's task history, oldest first.
    name : str, optional
        The task's ``--name``.
    source : str, optional
        The cell's source, matched against records that carry theirs.
    inputs_size : int, str, DataFrame, ...
        The size of the cell's inputs, for the planner (anything
        :func:`~taskcell.planner.sizing.input_size` reads).
    profile, presets, workers
        As for :func:`~taskcell.planner.suggestion.suggest`.

    Returns
    -------
    AutoChoice
    """
    catalogue = _presets(presets)
    runs = [
        r
        for r in reversed(history)
        if getattr(r, "usage", None) is not None
        and getattr(r, "state", "finished") == "finished"
        and _same_cell(r, name, source)
    ][:RECENT_RUNS]
    if runs:
        peak = max(r.usage.peak_memory for r in runs)
        cores = max(r.usage.cores for r in runs)
        preset, request = fitting_preset(peak, cores, runs[0].request, catalogue)
        n = len(runs)
        reason = (
            f"{n} past run{'s' if n != 1 else ''} of this cell peaked at {show_bytes(peak)} and "
            f"kept {cores:.2g} cores busy; {preset or 'a custom request'} holds that with room"
        )
        return AutoChoice(preset, request, "history", reason)
    planned = suggest(inputs_size, profile, workers=workers, presets=catalogue)
    if planned.request is None:
        raise SpecError(f"--preset auto: {planned.message}")
    reason = f"no past run of this cell; planner: {planned.message}"
    return AutoChoice(planned.preset, planned.request, "planner", reason)
