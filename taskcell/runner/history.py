"""The record of every task this kernel ran, for ``%tasks`` and for right-sizing.

One :class:`TaskHistory` per kernel (a kernel is one process): ``%%task`` appends to it, and
``%tasks``, the panel and the planner read it through :func:`kernel_history`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from taskcell.runner.job import Usage
from taskcell.spec import Resources
from taskcell.spec.amounts import show_bytes

if TYPE_CHECKING:
    import pandas

#: queued: submitted, not started; running: a worker runs it; finished / error: it ended;
#: interrupted: stopped by an interrupt; cancelled: cancelled (``handle.cancel()``,
#: ``%task_cancel``, the panel); lost: its worker or scheduler went away.
State = Literal["queued", "running", "finished", "error", "interrupted", "cancelled", "lost"]


@dataclass(kw_only=True)
class TaskRecord:
    """One task: which cell, what it asked for, where and how long it ran, what it used."""

    key: str
    cell: str
    request: Resources
    state: State = "queued"
    worker: str | None = None
    submitted: float = field(default_factory=time.time)
    started: float | None = None
    ended: float | None = None
    usage: Usage | None = None
    #: Why it did not finish, in one line.
    error: str | None = None
    #: The cell body as run (after IPython's transforms); ``--preset auto`` matches on it.
    source: str = field(default="", repr=False)

    def start(self, worker: str) -> None:
        self.state, self.worker, self.started = "running", worker, time.time()

    def finish(self, state: State, usage: Usage | None = None, error: str | None = None) -> None:
        self.state, self.ended, self.usage, self.error = state, time.time(), usage, error

    def elapsed(self) -> float:
        """Seconds since it started (or was submitted), up to its end."""
        return (self.ended or time.time()) - (self.started or self.submitted)

    def wall(self) -> float | None:
        """Its wall time as the cell showed it: the run the worker measured once it finished
        (the cell's "ran on W in 1.23 s"), else :meth:`elapsed`; None before it started."""
        if self.usage is not None:
            return self.usage.wall
        return self.elapsed() if self.started else None


#: The columns of :meth:`TaskHistory.frame`, in order.
_COLUMNS = [
    "cell",
    "request",
    "worker",
    "state",
    "wall_s",
    "cores_used",
    "peak_memory",
    "gpu_memory",
    "error",
    "key",
]


class TaskHistory(list[TaskRecord]):
    """Every task of this kernel, oldest first."""

    def frame(self) -> pandas.DataFrame:
        """One row per task: cell, request, worker, state, wall time and measured use."""
        import pandas as pd

        rows = [
            {
                "cell": r.cell,
                "request": repr(r.request),
                "worker": r.worker,
                "state": r.state,
                "wall_s": None if (wall := r.wall()) is None else round(wall, 3),
                "cores_used": round(r.usage.cores, 2) if r.usage else None,
                "peak_memory": _peak(r.usage),
                "gpu_memory": (
                    show_bytes(r.usage.gpu_memory)
                    if r.usage and r.usage.gpu_memory is not None
                    else None
                ),
                "error": r.error,
                "key": r.key,
            }
            for r in self
        ]
        return pd.DataFrame(rows, columns=_COLUMNS)


def _peak(usage: Usage | None) -> str | None:
    if usage is None:
        return None
    if usage.peak_memory is None:  # the platform cannot reset a process's high-water mark
        return "not measured on this platform"
    return show_bytes(usage.peak_memory)


_KERNEL_HISTORY = TaskHistory()


def kernel_history() -> TaskHistory:
    """This kernel's task records: the one list ``%%task`` appends to and ``%tasks`` shows."""
    return _KERNEL_HISTORY
