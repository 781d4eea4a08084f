"""A cell that failed for lack of memory: recognising it, and the request one rung up.

:func:`memory_failure` reads what the runner knows of a failed cell: the exception's type name
and text (``MemoryError``, numpy's "Unable to allocate 3.73 GiB for an array", pyarrow's
"malloc of size ... failed", ``std::bad_alloc``), the text of a worker that Dask's nanny
restarted over its memory limit ("exceeded 95% memory budget"), or the exit status of the
process that ran it (the kernel's OOM killer ends a process with SIGKILL: ``-9`` as
:class:`subprocess.Popen` reports it, ``137`` as a shell does). A GPU out of memory
(``torch.cuda.OutOfMemoryError``) is not a failure more host memory mends.

:func:`escalate` chooses what the next attempt asks for, as Snakemake's attempt-scaled
resources (``mem_mb=lambda wildcards, attempt: 2000 * attempt``) and nf-core's
retry-with-more-memory (``memory = { 6.GB * task.attempt }`` on exit status 137) do: one rung
up, the memory of the smallest preset with more than the attempt had (and at least what the
failed allocation asked for, where the error says), every other field as the cell asked; where
no preset has more, the memory doubled, as people ask for it. Both are pure: the runner calls
them (through :func:`next_attempt`) and starts the next attempt (see ``--retries``); nothing of
a failed attempt is written back.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from taskcell.planner.rightsize import HEADROOM, _presets, memory_needed, presets_holding
from taskcell.planner.suggestion import round_up
from taskcell.spec import Resources
from taskcell.spec.amounts import show_bytes

#: Exception type names that mean the process could not get memory.
MEMORY_ERRORS = frozenset(
    {"MemoryError", "ArrayMemoryError", "_ArrayMemoryError", "ArrowMemoryError", "bad_alloc"}
)
#: What a failure's text says when memory ran out, without the type saying so.
_MEMORY_TEXT = re.compile(
    r"memory budget|exceeded \d+% memory|out of memory|cannot allocate memory|bad_alloc"
    r"|unable to allocate|malloc of size \d+ failed|oom.?kill",
    re.IGNORECASE,
)
#: Failures of GPU memory: more host memory does not mend them.
_GPU_TEXT = re.compile(r"cuda out of memory|cuda error: out of memory|OutOfMemoryError: CUDA", re.I)
#: A cell the runner stopped past its memory limit names what it held (runner.remote).
_PEAK = re.compile(
    r"(?:peaked at|grew past) (\d+(?:\.\d+)?) ?(B|KiB|MiB|GiB|TiB|PiB|EiB)", re.IGNORECASE
)
_ALLOCATION = re.compile(
    r"allocate (\d+(?:\.\d+)?) ?(B|KiB|MiB|GiB|TiB|PiB|EiB)|malloc of size (\d+)", re.IGNORECASE
)
_UNITS = {"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40, "pib": 1 << 50}
_UNITS["eib"] = 1 << 60
#: Exit statuses of a process the kernel's OOM killer ended (SIGKILL).
_KILLED = (-signal.SIGKILL, 128 + signal.SIGKILL)


@dataclass(frozen=True)
class MemoryFailure:
    """A cell that ran out of memory.

    Attributes
    ----------
    how
        ``error``: the cell's code could not allocate (``MemoryError`` and kin); ``worker``:
        its worker went over its memory limit; ``killed``: its process was killed (SIGKILL),
        as the kernel's OOM killer does.
    detail
        What was seen, in one line.
    wanted
        The bytes the failed allocation asked for, where the error says; else None.
    peak
        What the cell held when the runner stopped it past its limit, where it says.
    stopped
        True where the runner stopped it while it grew: ``peak`` is then a lower bound.
    """

    how: Literal["error", "worker", "killed"]
    detail: str
    wanted: int | None = None
    peak: int | None = None
    stopped: bool = False


def memory_failure(
    type_name: str | None = None,
    text: str | None = None,
    exit_code: int | None = None,
    *,
    forced: bool = False,
) -> MemoryFailure | None:
    """Whether a failed cell ran out of memory, from what the runner knows of it.

    Parameters
    ----------
    type_name
        The exception's type name, as the cell process reports it (``"MemoryError"``).
    text
        The error's text: the cell's traceback, or the worker's or Dask's message.
    exit_code
        The exit status of the process that ran the cell, where it died: negative for a
        signal (``Popen.returncode``), or 128 plus the signal.
    forced
        True when taskcell itself killed the process (an interrupt it ignored): not memory.

    Returns
    -------
    MemoryFailure or None
        None for a failure memory did not cause, or a GPU out of memory.
    """
    text = text or ""
    if _GPU_TEXT.search(text) or (type_name or "").endswith("OutOfMemoryError"):
        return None
    wanted = _wanted(text)
    measured = _PEAK.search(text)
    peak, stopped = _bytes(measured), bool(measured and measured[0].lower().startswith("grew"))
    line = _one_line(text)
    if type_name in MEMORY_ERRORS:
        detail = line if type_name in line else f"{type_name}: {line}".rstrip(": ")
        return MemoryFailure("error", detail, wanted, peak, stopped)
    if _MEMORY_TEXT.search(text):
        how: Literal["error", "worker"] = "worker" if "budget" in text else "error"
        return MemoryFailure(how, line, wanted)
    if exit_code in _KILLED and not forced:
        return MemoryFailure(
            "killed", f"its process was killed, exit status {exit_code}, as the OOM killer does"
        )
    return None


def _wanted(text: str) -> int | None:
    match = _ALLOCATION.search(text)
    if match is not None and match[3]:
        return int(match[3])
    return _bytes(match)


def _bytes(match: re.Match[str] | None) -> int | None:
    """The amount a match's number and unit groups say, in bytes."""
    if match is None:
        return None
    return round(float(match[1]) * _UNITS[match[2].lower()])


def _one_line(text: str) -> str:
    """The error's last non-empty line (a traceback's), bounded."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    line = lines[-1] if lines else ""
    return line if len(line) <= 200 else line[:199] + "…"


@dataclass(frozen=True, kw_only=True)
class Escalation:
    """The next attempt's request after a memory failure, and what to tell the user."""

    preset: str | None
    request: Resources
    memory: int
    message: str


def escalate(
    request: Resources,
    failure: MemoryFailure,
    *,
    attempt: int = 1,
    held: int | None = None,
    presets: Mapping[str, Resources] | None = None,
) -> Escalation:
    """The request one rung up from ``request`` after ``failure``.

    Parameters
    ----------
    request
        What the failed attempt asked for.
    failure
        What :func:`memory_failure` found.
    attempt
        The attempt that failed (1 for the first run): said in the message.
    held
        The memory the attempt had where its request names none (its worker's memory limit).
    presets
        The presets to climb; every preset you can name by default.

    Returns
    -------
    Escalation
        The request with the memory of the smallest preset that has more than the attempt
        had (and where the error says what the failed allocation wanted, enough for that on
        top of what it had, with room); every other field as asked. Where no preset has more,
        the memory doubled. ``message`` names it and says why.
    """
    asked = request.memory.limit if request.memory is not None else None
    had = min((m for m in (asked, held) if m), default=None)  # a worker may have had less
    need, why = _need(failure, had)
    least = max((had or 0) + 1, memory_needed(need) if need else 0)
    cores = float(request.cpu.request) if request.cpu is not None else 0.0
    found = presets_holding(least, cores, request, _presets(presets), by="memory")
    if found and found[0][1].memory is not None:
        preset: str | None = found[0][0]
        memory = found[0][1].memory.request
    else:
        preset = None
        memory = round_up(max(2 * (had or 0), least))
    # Only the memory climbs: the cores, GPUs and the rest stay as the cell asked them.
    chosen = request.override(Resources(memory=memory))
    had_text = f"with {show_bytes(had)}" if had else "with no memory asked"
    target = f"{preset}'s {show_bytes(memory)}" if preset else chosen.to_options()
    if need:
        verdict = (
            f"it needs at least {show_bytes(need)} ({why}); with {HEADROOM - 1:.0%} to spare "
            f"that is {show_bytes(memory_needed(need))}: {target}"
        )
    elif had:
        verdict = f"it needs more than {show_bytes(had)}; {target} is the next rung up"
    else:
        verdict = f"ask for its memory: {target} is a start"
    message = f"attempt {attempt} ran out of memory {had_text} ({failure.detail}): {verdict}"
    return Escalation(preset=preset, request=chosen, memory=memory, message=message)


def _need(failure: MemoryFailure, had: int | None) -> tuple[int | None, str]:
    """The memory the cell needs at least, and how that is known: the peak the runner
    measured when it stopped the cell, else what it had plus the allocation that failed."""
    if failure.peak and failure.stopped:
        need = max(failure.peak, 2 * (had or 0))
        return need, "it was stopped while it grew: at least twice what it had"
    if failure.peak:
        return failure.peak, "its measured peak"
    if failure.wanted:
        what = f"the {show_bytes(failure.wanted)} it could not allocate"
        return (had or 0) + failure.wanted, (
            f"the {show_bytes(had)} it had and " if had else ""
        ) + what
    return None, ""


def next_attempt(
    error: BaseException,
    request: Resources,
    attempt: int,
    held: int | None,
    presets: Mapping[str, Resources] | None = None,
) -> Escalation | None:
    """What a cell that failed with ``error`` asks for next, where memory failed it; None
    where it did not. The runner's errors say what :func:`memory_failure` reads: the user's
    exception type and traceback (``type_name``, ``traceback_text``), or the exit status of
    the process that died (``exit_code``); ``forced`` where taskcell ended it itself."""
    text = getattr(error, "traceback_text", None) or str(error)
    failure = memory_failure(
        getattr(error, "type_name", None),
        text,
        getattr(error, "exit_code", None),
        forced=bool(getattr(error, "forced", False)),
    )
    if failure is None:
        return None
    return escalate(request, failure, attempt=attempt, held=held, presets=presets)
