"""The record of every task this kernel ran, for ``%tasks`` and for right-sizing."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from taskcell.runner.job import Usage
from taskcell.spec import Resources

if TYPE_CHECKING:
    import pandas

#: queued: submitted, not started; running: a worker runs it; finished / error: it ended;
#: interrupted: stopped by the user; lost: its worker died and no retry was left.
State = Literal["queued", "running", "finished", "error", "interrupted", "lost"]


@dataclass
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
    #: The cell body as run (after IPython's transforms); ``--preset auto`` matches on it.
    source: str = field(default="", repr=False)

    def start(self, worker: str) -> None:
        self.state, self.worker, self.started = "running", worker, time.time()

    def finish(self, state: State, usage: Usage | None = None) -> None:
        self.state, self.ended, self.usage = state, time.time(), usage

    def elapsed(self) -> float:
        """Seconds since it started (or was submitted), up to its end."""
        return (self.ended or time.time()) - (self.started or self.submitted)


class TaskHistory(list[TaskRecord]):
    """Every task of this kernel, oldest first."""

    def frame(self) -> pandas.DataFrame:
        """One row per task: cell, request, worker, state, wall time and measured use."""
        import pandas as pd
        from dask.utils import format_bytes

        rows = [
            {
                "cell": r.cell,
                "request": repr(r.request),
                "worker": r.worker,
                "state": r.state,
                "wall_s": round(r.elapsed(), 3) if r.started else None,
                "cores_used": round(r.usage.cores, 2) if r.usage else None,
                "peak_memory": format_bytes(r.usage.peak_memory) if r.usage else None,
                "gpu_memory": (
                    format_bytes(r.usage.gpu_memory)
                    if r.usage and r.usage.gpu_memory is not None
                    else None
                ),
                "key": r.key,
            }
            for r in self
        ]
        columns = [
            "cell", "request", "worker", "state", "wall_s", "cores_used", "peak_memory",
            "gpu_memory",
        ]  # fmt: skip
        return pd.DataFrame(rows, columns=[*columns, "key"])
