"""Right-sizing from measured use: which tasks asked for far too much or ran near their limit.

Every finished ``%%task`` records its wall time, the cores it kept busy (CPU time over wall
time) and its peak memory (:class:`~taskcell.runner.job.Usage`). :func:`review` compares them with
what the task asked for; :func:`latest_hints` keeps one hint per cell, from its latest run, for
the panel; :func:`auto_preset` picks a request for the next run of the same cell
(``%%task --preset auto``) from its past runs, or from the planner when it has none. Memory is
suggested as people ask for it (256Mi, 512Mi, then whole GiB; see
:func:`~taskcell.planner.suggestion.round_up`).

Records are read by their attributes (``key``, ``cell``, ``request``, ``state``, ``usage`` and,
when present, ``source``), as :class:`~taskcell.runner.history.TaskRecord` has them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from taskcell.errors import SpecError
from taskcell.planner.amounts import show_bytes
from taskcell.planner.schema import HintInfo
from taskcell.planner.suggestion import cost, covers, round_up, suggest
from taskcell.runner.history import kernel_history
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
#: Most hints :func:`latest_hints` gives (the panel's list).
HINTS_SHOWN = 10


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
        return HintInfo(**dataclasses.asdict(self))  # type: ignore[typeddict-item]

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


def cores_needed(cores: float) -> int:
    """Whole cores for what a run kept busy: 0.3 -> 1, 1.95 -> 2, 2.3 -> 3."""
    return max(1, math.ceil(cores - 0.1))


def _within(preset: Resources, asked: Resources) -> bool:
    """Whether ``preset`` asks for no more than ``asked`` in cores and memory, and less in one."""
    pairs: list[tuple[float, float]] = []
    if asked.cpu:
        pairs.append((float(preset.cpu.request) if preset.cpu else 0.0, float(asked.cpu.request)))
    if asked.memory:
        pairs.append((preset.memory.request if preset.memory else 0, asked.memory.request))
    return all(mine <= theirs for mine, theirs in pairs) and any(m < t for m, t in pairs)


def fitting_preset(
    memory: int,
    cpu: float,
    like: Resources,
    presets: Mapping[str, Resources] | None = None,
    within: Resources | None = None,
) -> tuple[str | None, Resources]:
    """The smallest preset with this much memory and these cores, or None and a custom request.

    GPUs are those ``like`` asks for, and a task without GPUs gets no GPU preset. With
    ``within``, only presets smaller than that request (in cores or memory, larger in neither)
    count. The custom request asks for exactly ``memory`` (rounded up) and ``cpu``.
    """
    catalogue = _presets(presets)
    gpu = _gpu_need(like)
    custom = Resources(cpu=cpu, memory=round_up(memory), gpu=like.gpu)
    if like.gpu is not None and gpu is None:  # a MIG slice, TPU or other device: kept as is
        return None, custom
    fits = [
        (name, p)
        for name, p in catalogue.items()
        if (gpu is not None or p.gpu is None)
        and covers(p, memory=memory, cpu=cpu, gpu=gpu)
        and (within is None or _within(p, within))
    ]
    if fits:
        return min(fits, key=lambda item: (cost(item[1]), item[0]))
    return None, custom


def _line(preset: str | None, request: Resources) -> str:
    return f"%%task {preset}" if preset else f"%%task {request.to_options()}"


def _pct(share: float) -> str:
    return f"{share * 100:.0f}%"


def review(
    records: Iterable[Any] | None = None,
    presets: Mapping[str, Resources] | None = None,
    *,
    low: float = LOW,
    high: float = HIGH,
) -> list[Hint]:
    """Find the finished tasks that asked for far more than they used, or ran near their limit.

    Parameters
    ----------
    records : iterable of TaskRecord, optional
        Task records; this kernel's history (what ``%tasks`` shows) by default.
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
    for r in list(kernel_history()) if records is None else records:
        usage = getattr(r, "usage", None)
        if usage is None or getattr(r, "state", "finished") != "finished":
            continue
        hints += _memory_hints(r, usage, catalogue, low, high)
        hints += _cpu_hints(r, usage, catalogue, low, high)
    return hints


def latest_hints(
    records: Iterable[Any] | None = None,
    presets: Mapping[str, Resources] | None = None,
    *,
    limit: int = HINTS_SHOWN,
) -> list[Hint]:
    """One hint per cell name, from the latest finished run of that name, latest cell first.

    A cell whose latest run was well sized gets none (what an earlier run was told no longer
    holds); a run misjudged in both memory and cores gets one hint that says both, with the one
    line that fixes both.

    Parameters
    ----------
    records : iterable of TaskRecord, optional
        Task records, oldest first; this kernel's history by default.
    presets : mapping, optional
        The presets to suggest from; every preset you can name by default.
    limit : int
        The most hints returned.

    Returns
    -------
    list of Hint
    """
    catalogue = _presets(presets)
    runs = list(kernel_history()) if records is None else list(records)
    seen: set[str] = set()
    hints: list[Hint] = []
    for r in reversed(runs):
        if len(hints) >= limit:
            break
        if r.cell in seen or getattr(r, "usage", None) is None:
            continue
        if getattr(r, "state", "finished") != "finished":
            continue
        seen.add(r.cell)
        found = review([r], catalogue)
        if found:
            message = " ".join(h.message for h in found)
            hints.append(dataclasses.replace(found[0], message=message))
    return hints


def _right_size(
    r: Any, usage: Any, catalogue: dict, low: float, high: float
) -> tuple[str | None, Resources]:
    """What would have fit one run: each resource it misjudged set from what it used.

    Memory: the peak plus a quarter when it asked far too much or ran near its limit, else
    what it asked. Cores: those it kept busy when it asked far too many, one more than its
    limit when it was CPU-bound, else what it asked. A preset when one holds that (and, when
    only shrinking, asks for no more than the run did), else the run's request so changed.
    """
    asked = r.request
    memory = asked.memory.request if asked.memory else math.ceil(usage.peak_memory * HEADROOM)
    cpu = float(asked.cpu.request) if asked.cpu else 1.0
    fields: dict[str, Any] = {}
    if asked.memory and (
        usage.peak_memory < low * asked.memory.request
        or usage.peak_memory > high * asked.memory.limit
    ):
        memory = math.ceil(usage.peak_memory * HEADROOM)
        fields["memory"] = round_up(memory)
    grow = False
    if asked.cpu and usage.wall >= MIN_WALL_FOR_CPU:
        if usage.cores < low * float(asked.cpu.request):
            cpu = min(cores_needed(usage.cores), cpu)
            fields["cpu"] = cpu
        elif usage.cores > high * float(asked.cpu.limit):
            cpu = math.floor(float(asked.cpu.limit)) + 1
            fields["cpu"] = cpu
            grow = True
    grow = grow or bool(asked.memory and usage.peak_memory > high * asked.memory.limit)
    preset, request = fitting_preset(memory, cpu, asked, catalogue, within=None if grow else asked)
    if preset is None:
        request = asked.override(Resources(**fields))
    return preset, request


def _memory_hints(r: Any, usage: Any, catalogue: dict, low: float, high: float) -> list[Hint]:
    asked = r.request.memory
    if asked is None:
        return []
    peak = usage.peak_memory
    if peak < low * asked.request:
        preset, request = _right_size(r, usage, catalogue, low, high)
        if preset is None and request.memory and request.memory.request >= asked.request:
            return []  # the smallest request people write is what it asked already
        message = (
            f"{r.cell} asked for {show_bytes(asked.request)} of memory and peaked at "
            f"{show_bytes(peak)} ({_pct(peak / asked.request)}); "
            f"{preset or 'a smaller request'} would have held it."
        )
        return [Hint(r.key, r.cell, "over-requested", "memory", asked.request, peak, message,
                     preset, _line(preset, request))]  # fmt: skip
    if peak > high * asked.limit:
        preset, request = _right_size(r, usage, catalogue, low, high)
        message = (
            f"{r.cell} peaked at {show_bytes(peak)}, {_pct(peak / asked.limit)} of its "
            f"{show_bytes(asked.limit)} memory limit; the next run may run out of memory. "
            f"Give it {preset or 'more'}."
        )
        return [Hint(r.key, r.cell, "near-limit", "memory", asked.limit, peak, message, preset,
                     _line(preset, request))]  # fmt: skip
    return []


def _cpu_hints(r: Any, usage: Any, catalogue: dict, low: float, high: float) -> list[Hint]:
    asked = r.request.cpu
    if asked is None or usage.wall < MIN_WALL_FOR_CPU:
        return []
    cores = usage.cores
    requested, limit = float(asked.request), float(asked.limit)
    if cores < low * requested and cores_needed(cores) < requested:
        preset, request = _right_size(r, usage, catalogue, low, high)
        message = (
            f"{r.cell} asked for {requested:g} cores and kept {cores:.2f} busy "
            f"({_pct(cores / requested)}); {preset or 'fewer cores'} would have done."
        )
        return [Hint(r.key, r.cell, "over-requested", "cpu", requested, cores, message, preset,
                     _line(preset, request))]  # fmt: skip
    if cores > high * limit:
        preset, request = _right_size(r, usage, catalogue, low, high)
        message = (
            f"{r.cell} kept {cores:.2f} of its {limit:g} cores busy ({_pct(cores / limit)}): "
            f"it is CPU-bound and may run faster with more, e.g. {preset or 'more cores'}."
        )
        return [Hint(r.key, r.cell, "near-limit", "cpu", limit, cores, message, preset,
                     _line(preset, request))]  # fmt: skip
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
    history: Sequence[Any] | None = None,
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
    history : sequence of TaskRecord, optional
        Task records, oldest first; this kernel's history by default.
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
    history = kernel_history() if history is None else history
    runs = [
        r
        for r in reversed(history)
        if getattr(r, "usage", None) is not None
        and getattr(r, "state", "finished") == "finished"
        and _same_cell(r, name, source)
    ][:RECENT_RUNS]
    usages = [r.usage for r in runs if r.usage is not None]
    if usages:
        peak = max(u.peak_memory for u in usages)
        cores = max(u.cores for u in usages)
        need = math.ceil(peak * HEADROOM)
        preset, request = fitting_preset(need, cores_needed(cores), runs[0].request, catalogue)
        n = len(runs)
        reason = (
            f"{n} past run{'s' if n != 1 else ''} of this cell peaked at {show_bytes(peak)} and "
            f"kept {cores:.2f} cores busy; {preset or 'a custom request'} holds that with room"
        )
        return AutoChoice(preset, request, "history", reason)
    planned = suggest(inputs_size, profile, workers=workers, presets=catalogue)
    if planned.request is None:
        raise SpecError(f"--preset auto: {planned.message}")
    reason = f"no past run of this cell; planner: {planned.message}"
    return AutoChoice(planned.preset, planned.request, "planner", reason)
