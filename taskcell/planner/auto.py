"""``%%task auto``: the request for a cell's next run, learned from its past runs.

With past runs of the same cell (same ``--name``, or the same source), their measured peaks
are scaled to the input the cell reads now: memory is a fixed base (the interpreter and its
libraries) plus the memory each past run used per byte of its input, so four times the data
asks for about four times the memory above the base, an eighth of it far less, and a cell that
streams its input stays small however large it grows. Runs whose inputs differ at least
:data:`SPREAD` times fit their own base and slope; runs too small to show how the memory grows
take the planner's factor for the growth. Arrays the planner sizes by their shapes scale as their
shapes grow (a pairwise product of four times the rows needs sixteen times the memory), and a
cell that reads more now than every past run counts only the least base a recorded peak holds.
Without past runs, the planner's estimate of what the cell reads (:mod:`.estimate`) decides.
Either way the request holds the expected peak with :data:`~taskcell.planner.rightsize.HEADROOM`
to spare.

The runner's task records carry no input size, so the size each run read is noted when its
request is chosen (:func:`note_input`) and found again by the record's source and submission
time (:func:`run_input`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from taskcell.errors import SpecError
from taskcell.planner.estimate import FLOOR, Estimate
from taskcell.planner.rightsize import (
    HEADROOM,
    _presets,
    cores_needed,
    fitting_preset,
    memory_needed,
    presets_holding,
)
from taskcell.planner.sizing import input_size
from taskcell.planner.suggestion import round_up, suggest, verdicts
from taskcell.planner.workloads import get_profile
from taskcell.runner.history import TaskRecord, kernel_history
from taskcell.spec import Resources
from taskcell.spec.amounts import show_bytes

#: Past runs of a cell that ``auto`` looks at, newest first.
RECENT_RUNS = 5
#: Runs whose inputs differ this many times or more fit their own base and slope.
SPREAD = 2.0
#: Input sizes remembered per cell source.
_REMEMBERED = 2 * RECENT_RUNS
#: source -> [(when its request was chosen, input bytes)], oldest first.
_noted: dict[str, list[tuple[float, int]]] = {}


def note_input(source: str, size: int, when: float | None = None) -> None:
    """Remember that the run of ``source`` about to be submitted reads ``size`` bytes: the
    task record made next for that source takes it (see :func:`run_input`)."""
    entries = _noted.setdefault(source, [])
    entries.append((time.time() if when is None else when, size))
    del entries[:-_REMEMBERED]


def note_run(source: str, namespace: Mapping[str, Any], transform: Any = None) -> None:
    """Note what a run of ``source`` reads, whatever it asks for (``%%task m1g`` as much as
    ``%%task auto``), so that ``auto`` scales from any past run: its files' sizes and its
    values' bytes, without parsing a sample (:func:`~taskcell.planner.estimate.cell_input`)."""
    from taskcell.planner.estimate import cell_input

    note_input(source, cell_input(source, namespace, transform, sample=False).size)


def run_input(record: TaskRecord) -> int | None:
    """The input bytes a past run read: the size noted last for its source before it was
    submitted; None when unknown."""
    for when, noted in reversed(_noted.get(record.source, [])):
        if when <= record.submitted:
            return noted
    return None


@dataclass(frozen=True, kw_only=True)
class AutoChoice:
    """What ``%%task auto`` runs a cell with, and why.

    ``preset`` is the preset's name, or None for a custom request; ``request`` is what to
    ask for either way; ``basis`` says whether past runs, the planner or a probe
    (``--probe``, :mod:`.probe`) decided; ``memory`` is
    the peak expected, which ``request`` holds with room.
    """

    preset: str | None
    request: Resources
    basis: Literal["history", "planner", "probe"]
    reason: str
    memory: int = 0


@dataclass(frozen=True, kw_only=True)
class _Run:
    """A past finished run of the cell, with the peak memory and the cores it measured."""

    record: TaskRecord
    peak: int
    cores: float


def _same_cell(r: TaskRecord, name: str | None, source: str | None) -> bool:
    if source is not None and r.source == source:
        return True
    return name is not None and r.cell == name


def scaled_peak(
    runs: Sequence[tuple[int, int]], size: int, base: int, per_byte: float
) -> tuple[int, str]:
    """The peak a run reading ``size`` bytes should reach, from past ``(input, peak)`` pairs,
    and how it was found.

    ``base`` is the memory that does not grow with the input; ``per_byte`` the growth to use
    when no run read enough to show its own (its input under ``base`` and its peak within a
    quarter of it).
    """
    telling = [(s, p) for s, p in runs if s > 0 and (s >= base or p - base >= base / 4)]
    sizes = [s for s, _ in telling]
    if len(telling) >= 2 and max(sizes) >= SPREAD * min(sizes):
        slope, intercept = fit_line(telling)
        need = intercept + slope * size
        how = f"they grew {slope:.2f} bytes per input byte over {show_bytes(intercept)}"
    elif telling:
        slope = max(max(p - base, 0) / s for s, p in telling)
        need = base + slope * size
        how = f"they used {slope:.2f} bytes per input byte over a {show_bytes(base)} base"
    else:  # too small to show how it grows: the planner's growth, from the largest run
        largest, peak = max(runs)
        need = max(peak + per_byte * (size - largest), min(peak, base))
        how = (
            f"the largest read {show_bytes(largest)} and peaked at {show_bytes(peak)}, too "
            f"little to show how it grows; the planner adds {per_byte:.2f} bytes per input byte"
        )
    return max(math.ceil(need), FLOOR), how


def fit_line(points: Sequence[tuple[float, float]]) -> tuple[float, int]:
    """Least squares slope (at least 0) and intercept (at least 0) of ``points``."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    slope = max(sum((x - mean_x) * (y - mean_y) for x, y in points) / spread, 0.0)
    return slope, max(round(mean_y - slope * mean_x), 0)


def auto_preset(
    history: Sequence[TaskRecord] | None = None,
    *,
    name: str | None = None,
    source: str | None = None,
    inputs_size: Any = None,
    estimate: Estimate | None = None,
    profile: str = "default",
    presets: Mapping[str, Resources] | None = None,
    workers: Any = None,
) -> AutoChoice:
    """Choose the request for ``%%task auto``.

    Parameters
    ----------
    history : sequence of TaskRecord, optional
        Task records, oldest first; this kernel's history by default.
    name : str, optional
        The task's ``--name``.
    source : str, optional
        The cell's source, matched against records that carry theirs.
    inputs_size : int, str, DataFrame, ..., optional
        The size of what the cell reads (anything
        :func:`~taskcell.planner.sizing.input_size` reads), where no ``estimate`` is given.
    estimate : Estimate, optional
        The planner's estimate for the cell (:func:`taskcell.planner.estimate.estimate_memory`): its
        input's size and base scale past runs, and without them it decides.
    profile, presets, workers
        As for :func:`~taskcell.planner.suggestion.suggest`, used without an estimate or
        past runs.

    Returns
    -------
    AutoChoice

    Raises
    ------
    SpecError
        When nothing the platform accepts holds what the cell needs.
    """
    catalogue = _presets(presets)
    history = kernel_history() if history is None else history
    runs = [
        _Run(record=r, peak=r.usage.peak_memory, cores=r.usage.cores)
        for r in reversed(history)
        if r.usage is not None
        and r.usage.peak_memory is not None
        and r.state == "finished"
        and _same_cell(r, name, source)
    ][:RECENT_RUNS]
    if estimate is not None:
        size: int | None = estimate.size
    else:
        size = input_size(inputs_size) if inputs_size is not None else None
    if runs:
        return _from_history(runs, size, estimate, profile, catalogue)
    if estimate is not None:
        return _from_estimate(estimate, catalogue, workers)
    planned = suggest(inputs_size or 0, profile, workers=workers, presets=catalogue)
    if planned.request is None:
        raise SpecError(f"--preset auto: {planned.message}")
    reason = f"no past run of this cell; planner: {planned.message}"
    return AutoChoice(
        preset=planned.preset,
        request=planned.request,
        basis="planner",
        reason=reason,
        memory=planned.memory,
    )


def _from_history(
    runs: list[_Run],
    size: int | None,
    estimate: Estimate | None,
    profile: str,
    catalogue: dict[str, Resources],
) -> AutoChoice:
    cores = max(r.cores for r in runs)
    sized = [(s, r.peak) for r in runs if (s := run_input(r.record)) is not None]
    n = len(runs)
    runs_text = f"{n} past run{'s' if n != 1 else ''} of this cell"
    if size is not None and any(s > 0 for s, _ in sized):
        if estimate is not None:
            sized, base, said = _scaling(estimate, sized, size)
            per_byte = (estimate.memory - estimate.base) / max(estimate.size, 1)
            runs_text += said
        else:
            prof = get_profile(profile)
            base, per_byte = prof.base_memory, prof.memory_per_byte
        need, how = scaled_peak(sized, size, base, per_byte)
        how = f"{runs_text}: {how}; {show_bytes(size)} of input now comes to {show_bytes(need)}"
    else:
        need = max(r.peak for r in runs)
        how = f"{runs_text} peaked at {show_bytes(need)}"
    preset, request = fitting_preset(
        memory_needed(need), cores_needed(cores), runs[0].record.request, catalogue
    )
    reason = (
        f"{how} and kept {cores:.2f} cores busy; {preset or request.to_options()} holds that "
        f"with {HEADROOM - 1:.0%} to spare"
    )
    return AutoChoice(preset=preset, request=request, basis="history", reason=reason, memory=need)


def _scaling(
    estimate: Estimate, sized: list[tuple[int, int]], size: int
) -> tuple[list[tuple[int, int]], int, str]:
    """Past runs' ``(input, peak)`` as the estimate grows, the memory that does not grow, and
    words for how that differs from the input and the estimate's base.

    Each input counts as the input whose memory grows in proportion to what the cell's
    operations need at it (:meth:`~taskcell.planner.estimate.Estimate.in_proportion`). Where
    the cell reads more now than every past run, the base is the least one
    (:attr:`~taskcell.planner.estimate.Estimate.least_base`): each byte a base overstates
    would take one from the memory grown for every time the input grew."""
    grown = [(estimate.in_proportion(s), p) for s, p in sized]
    said = " (scaled as its arrays sized by their shapes grow)" if grown != sized else ""
    if size > max(s for s, _ in sized):
        return grown, estimate.least_base, said
    return grown, estimate.base, said


def _from_estimate(estimate: Estimate, catalogue: dict[str, Resources], workers: Any) -> AutoChoice:
    """The smallest preset that holds the estimate with room (and that a live worker can run,
    where workers are known), else a custom request."""
    said = estimate.describe()
    preset, request = _holding(estimate.memory, catalogue, workers, f"the cell {said}")
    holder = preset or request.to_options()
    reason = (
        f"no past run of this cell; it {said}; {holder} holds that with {HEADROOM - 1:.0%} to spare"
    )
    return AutoChoice(
        preset=preset, request=request, basis="planner", reason=reason, memory=estimate.memory
    )


def from_probe(
    peak: int,
    how: str,
    presets: Mapping[str, Resources] | None = None,
    workers: Any = None,
) -> AutoChoice:
    """The request for a cell whose ``peak`` at full size a probe found (``how``: the words for
    it, :class:`~taskcell.planner.probe.Probed`), chosen as from the planner's estimate."""
    preset, request = _holding(peak, _presets(presets), workers, f"the cell was {how}")
    holder = preset or request.to_options()
    reason = f"{how}; {holder} holds that with {HEADROOM - 1:.0%} to spare"
    return AutoChoice(preset=preset, request=request, basis="probe", reason=reason, memory=peak)


def _holding(
    peak: int, catalogue: dict[str, Resources], workers: Any, why: str
) -> tuple[str | None, Resources]:
    """The smallest preset that holds ``peak`` with room (and that a live worker can run, where
    workers are known), else a custom request; ``why`` the cell needs that much, for the error
    where the platform takes no such request."""
    from taskcell.planner.suggestion import _live_workers, _platform_ok

    memory = memory_needed(peak)
    candidates = presets_holding(memory, 0, Resources(), catalogue)
    live = _live_workers(workers)
    if live and candidates:
        runnable = [c for c in candidates if any(v["able"] for v in verdicts(c[1], live))]
        candidates = runnable or candidates
    if candidates:
        return candidates[0]
    request = Resources(memory=round_up(memory))
    refused = _platform_ok(request)
    if refused:
        raise SpecError(f"--preset auto: {why}; {refused}")
    return None, request
