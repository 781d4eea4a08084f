"""Right-sizing from measured use: which tasks asked for far too much or ran near their limit.

Every finished ``%%task`` records its wall time, the cores it kept busy (CPU time over wall
time) and its peak memory (:class:`~taskcell.runner.job.Usage`). :func:`review` compares them with
what the task asked for; :func:`latest_hints` keeps one hint per cell, from its latest run, for
the panel. A hint names the smallest preset that holds the measured peak with
:data:`HEADROOM` to spare; a hint about cores never asks for more memory, and one busy core of
one asked is no sign that more would help. Memory is suggested as people ask for it (256Mi,
512Mi, then whole GiB; see :func:`~taskcell.planner.suggestion.round_up`).

Each run is one of the kernel's :class:`~taskcell.runner.history.TaskRecord` records.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from taskcell.planner.schema import HintInfo
from taskcell.planner.suggestion import cost, covers, round_up
from taskcell.runner.history import TaskRecord, kernel_history
from taskcell.runner.job import Usage
from taskcell.spec import GPU, Resources, format_quantity
from taskcell.spec.amounts import show_bytes

#: Used under this share of what it asked: over-requested.
LOW = 0.25
#: Used over this share of its limit: near its limit.
HIGH = 0.90
#: Memory asked for the next run over the measured peak.
HEADROOM = 1.25
#: Cores are judged only for tasks that ran at least this long (seconds): short runs mislead.
MIN_WALL_FOR_CPU = 1.0
#: Most hints :func:`latest_hints` gives (the panel's list).
HINTS_SHOWN = 10


@dataclass(frozen=True, kw_only=True)
class Hint:
    """One finding about one finished task, its fields documented by its JSON record
    :class:`~taskcell.planner.schema.HintInfo` (:meth:`to_dict`).

    The same fields as ``HintInfo``, written twice because a type checker derives neither a
    dataclass from a ``TypedDict`` nor the reverse: ``tests/planner/test_rightsize.py`` keeps
    the two equal, and :meth:`to_dict` copies them by name.
    """

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
        """The hint as JSON (:class:`~taskcell.planner.schema.HintInfo`)."""
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


def memory_needed(peak: int) -> int:
    """The memory that holds a measured ``peak`` with :data:`HEADROOM` to spare."""
    return math.ceil(peak * HEADROOM)


def fitting_preset(
    memory: int,
    cpu: float,
    like: Resources,
    presets: Mapping[str, Resources] | None = None,
    *,
    at_most: Resources | None = None,
    by: Literal["memory", "cpu"] = "memory",
) -> tuple[str | None, Resources]:
    """The smallest preset with this much memory and these cores, or None and a custom request.

    GPUs are those ``like`` asks for, and a task without GPUs gets no GPU preset. With
    ``at_most``, only presets with no more memory and no more cores than it asks count (a
    field it leaves out bounds nothing). ``by`` says which is smallest: least memory, then
    fewest cores (``"memory"``, the rung that holds a peak), or the other way round. The custom
    request asks for exactly ``memory`` (rounded up) and ``cpu``.
    """
    found = presets_holding(memory, cpu, like, presets, at_most=at_most, by=by)
    if found:
        return found[0]
    return None, Resources(cpu=cpu or None, memory=round_up(memory) or None, gpu=like.gpu)


def presets_holding(
    memory: int,
    cpu: float,
    like: Resources,
    presets: Mapping[str, Resources] | None = None,
    *,
    at_most: Resources | None = None,
    by: Literal["memory", "cpu"] = "memory",
) -> list[tuple[str, Resources]]:
    """Every preset :func:`fitting_preset` may choose, smallest first."""
    catalogue = _presets(presets)
    gpu = _gpu_need(like)
    if like.gpu is not None and gpu is None:  # a MIG slice, TPU or other device: kept as is
        return []
    fits = [
        (name, p)
        for name, p in catalogue.items()
        if (gpu is not None or p.gpu is None)
        and covers(p, memory=memory, gpu=gpu)
        and _holds_cores(p, cpu)
        and (at_most is None or _no_more(p, at_most))
    ]

    def size(item: tuple[str, Resources]) -> tuple:
        cores, mem, gpus = cost(item[1])
        return ((mem, cores) if by == "memory" else (cores, mem), gpus, item[0])

    return sorted(fits, key=size)


def _holds_cores(preset: Resources, cpu: float) -> bool:
    """Whether ``preset`` gives ``cpu`` cores: one that names none runs on one thread."""
    if preset.cpu is None:
        return cpu <= 1
    return float(preset.cpu.request) >= cpu


def _no_more(preset: Resources, bound: Resources) -> bool:
    """Whether ``preset`` asks for no more memory and no more cores than ``bound`` does."""
    if bound.memory is not None and (
        preset.memory is None or preset.memory.request > bound.memory.request
    ):
        return False
    return (
        bound.cpu is None
        or preset.cpu is None
        or float(preset.cpu.request) <= float(bound.cpu.request)
    )


def _line(preset: str | None, request: Resources) -> str:
    return f"%%task {preset}" if preset else f"%%task {request.to_options()}"


def _pct(share: float) -> str:
    return f"{share * 100:.0f}%"


def review(
    records: Iterable[TaskRecord] | None = None,
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
        usage = r.usage
        if usage is None or r.state != "finished":
            continue
        hints += _memory_hints(r, usage, catalogue, low, high)
        hints += _cpu_hints(r, usage, catalogue, low, high)
    return hints


def latest_hints(
    records: Iterable[TaskRecord] | None = None,
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
        if r.cell in seen or r.usage is None or r.state != "finished":
            continue
        seen.add(r.cell)
        found = review([r], catalogue)
        if found:
            message = " ".join(h.message for h in found)
            hints.append(dataclasses.replace(found[0], message=message))
    return hints


def _findings(
    r: TaskRecord, usage: Usage, low: float, high: float
) -> tuple[Literal["over", "near"] | None, Literal["over", "bound"] | None]:
    """What a run misjudged: its memory (far too much, or near its limit) and its cores (far
    too many, or all kept busy by work that uses more than one)."""
    asked = r.request
    memory: Literal["over", "near"] | None = None
    if asked.memory is not None and usage.peak_memory is not None:
        if usage.peak_memory < low * asked.memory.request:
            memory = "over"
        elif usage.peak_memory > high * asked.memory.limit:
            memory = "near"
    cpu: Literal["over", "bound"] | None = None
    if asked.cpu is not None and usage.wall >= MIN_WALL_FOR_CPU:
        requested, limit, cores = float(asked.cpu.request), float(asked.cpu.limit), usage.cores
        if cores < low * requested and cores_needed(cores) < requested:
            cpu = "over"
        elif cores > high * limit and (limit >= 2 or cores > 1.1 * limit):
            cpu = "bound"  # one busy core of one asked says nothing: the code may be serial
    return memory, cpu


def _right_size(
    r: TaskRecord, usage: Usage, catalogue: dict, low: float, high: float
) -> tuple[str | None, Resources]:
    """What would have fit one run: what it misjudged set from what it used, the rest as asked.

    Memory: the peak with :data:`HEADROOM` when it asked far too much or ran near its limit.
    Cores: those it kept busy when it asked far too many, one more than its limit when it was
    CPU-bound. The smallest preset that holds that, and never more memory than it asked unless
    it ran near its limit, nor more cores unless it was CPU-bound or needs a larger memory
    rung; else the run's request so changed.
    """
    asked = r.request
    # None where the platform could not tell the cell's peak apart: then no memory finding.
    needed = None if usage.peak_memory is None else memory_needed(usage.peak_memory)
    memory_finding, cpu_finding = _findings(r, usage, low, high)
    fields: dict[str, Any] = {}
    memory = asked.memory.request if asked.memory else 0
    if memory_finding and needed is not None:
        memory = needed
        fields["memory"] = round_up(memory)
    cpu = float(asked.cpu.request) if asked.cpu else 0.0
    if cpu_finding == "over":
        cpu = min(cores_needed(usage.cores), cpu)
        fields["cpu"] = cpu
    elif cpu_finding == "bound" and asked.cpu is not None:
        cpu = math.floor(float(asked.cpu.limit)) + 1
        fields["cpu"] = cpu
    bound_memory = asked.memory if memory_finding != "near" else None
    if (
        bound_memory is None
        and cpu_finding == "bound"
        and memory_finding is None
        and needed is not None
    ):
        bound_memory = Resources(memory=round_up(needed)).memory
    bound_cpu = asked.cpu if cpu_finding != "bound" and memory_finding != "near" else None
    if cpu_finding == "over" and asked.cpu is not None:  # fewer cores than asked, or no help
        bound_cpu = Resources(cpu=max(math.ceil(float(asked.cpu.request)) - 1, cpu)).cpu
    preset, request = fitting_preset(
        memory,
        cpu,
        asked,
        catalogue,
        at_most=Resources(memory=bound_memory, cpu=bound_cpu),
        by="cpu" if cpu_finding and not memory_finding else "memory",
    )
    shrinking = memory_finding != "near" and cpu_finding != "bound"
    if preset is not None and shrinking and not _smaller(request, asked):
        preset = None  # no preset asks for less than it did: the custom request does
    if preset is not None and asked.memory is None and needed is None:
        preset = None  # neither asked nor measured: any preset's memory would be a guess
    if preset is None:
        request = asked.override(Resources(**fields))
    return preset, request


def _smaller(preset: Resources, asked: Resources) -> bool:
    """Whether ``preset`` asks for less memory or fewer cores than ``asked``."""

    def less(mine: Any, theirs: Any) -> bool:
        return theirs is not None and (mine is None or float(mine.request) < float(theirs.request))

    return less(preset.memory, asked.memory) or less(preset.cpu, asked.cpu)


def _held_by(preset: str | None, request: Resources) -> str:
    """``m512 (512 MiB)`` or ``--memory 512Mi``: what holds a peak, with its memory."""
    if preset is None:
        return f"--memory {format_quantity(request.memory.request)}" if request.memory else "less"
    memory = f" ({show_bytes(request.memory.request)})" if request.memory else ""
    return f"{preset}{memory}"


def _memory_hints(
    r: TaskRecord, usage: Usage, catalogue: dict, low: float, high: float
) -> list[Hint]:
    asked, peak = r.request.memory, usage.peak_memory
    finding, _ = _findings(r, usage, low, high)
    if asked is None or finding is None or peak is None:
        return []
    preset, request = _right_size(r, usage, catalogue, low, high)
    if finding == "over":
        if request.memory is None or request.memory.request >= asked.request:
            return []  # nothing smaller holds it with room: it asked the least already
        message = (
            f"{r.cell} asked for {show_bytes(asked.request)} of memory and peaked at "
            f"{show_bytes(peak)} ({_pct(peak / asked.request)}); {_held_by(preset, request)} "
            f"is the smallest that holds that with {_pct(HEADROOM - 1)} to spare."
        )
    else:
        message = (
            f"{r.cell} peaked at {show_bytes(peak)}, {_pct(peak / asked.limit)} of its "
            f"{show_bytes(asked.limit)} memory limit; the next run may run out of memory. "
            f"Give it {_held_by(preset, request)}, which holds that with {_pct(HEADROOM - 1)} "
            "to spare."
        )
    return [
        Hint(
            key=r.key,
            cell=r.cell,
            kind="over-requested" if finding == "over" else "near-limit",
            resource="memory",
            requested=asked.request if finding == "over" else asked.limit,
            used=peak,
            message=message,
            preset=preset,
            line=_line(preset, request),
        )
    ]


def _cpu_hints(r: TaskRecord, usage: Usage, catalogue: dict, low: float, high: float) -> list[Hint]:
    _, finding = _findings(r, usage, low, high)
    asked = r.request.cpu
    if finding is None or asked is None:
        return []
    cores = usage.cores
    requested, limit = float(asked.request), float(asked.limit)
    preset, request = _right_size(r, usage, catalogue, low, high)
    if finding == "over":
        message = (
            f"{r.cell} asked for {requested:g} cores and kept {cores:.2f} busy "
            f"({_pct(cores / requested)}); {preset or 'fewer cores'} would have done."
        )
    else:
        message = (
            f"{r.cell} kept {cores:.2f} of its {limit:g} cores busy ({_pct(cores / limit)}): "
            f"it is CPU-bound and may run faster with more cores, e.g. "
            f"{preset or request.to_options()} (with no more memory)."
        )
    return [
        Hint(
            key=r.key,
            cell=r.cell,
            kind="over-requested" if finding == "over" else "near-limit",
            resource="cpu",
            requested=requested if finding == "over" else limit,
            used=cores,
            message=message,
            preset=preset,
            line=_line(preset, request),
        )
    ]
