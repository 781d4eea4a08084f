"""What ``%tasks`` shows: this kernel's tasks as a compact table, the full records a click away.

One row per task: the cell's name, its request as ``%%task`` options, the worker's short
address, the state, the wall time (the figure the cell's own "ran on W in 1.23 s" showed), the
cores it kept busy, its peak memory and the right-sizing hint. The notebook shows HTML, each
name opening that task's full record (key, error, GPU memory, the whole hint); a terminal shows
aligned text. :attr:`TaskTable.frame` is the pandas DataFrame ``%tasks`` used to return, and the
table answers DataFrame-style reads (``t[t.cell == "train"]``, ``t.state``) from it.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from taskcell.planner.rightsize import Hint, review
from taskcell.runner.history import TaskRecord, kernel_history
from taskcell.spec.amounts import show_bytes, show_number

if TYPE_CHECKING:
    import pandas

#: The table's columns: (heading, field of :class:`TaskRow`).
COLUMNS = (
    ("name", "name"),
    ("request", "request"),
    ("worker", "worker"),
    ("state", "state"),
    ("wall", "wall"),
    ("cores", "cores"),
    ("peak", "peak"),
    ("hint", "hint"),
)

#: What an empty kernel shows.
NO_TASKS = "No %%task has run in this kernel yet."


@dataclass(frozen=True, kw_only=True)
class TaskRow:
    """One task as the table shows it: every field text, empty where there is nothing to say."""

    name: str
    request: str
    worker: str
    state: str
    wall: str
    cores: str
    peak: str
    hint: str
    #: The full record, for the row's details: (label, text) pairs, only those with a value.
    details: tuple[tuple[str, str], ...]


def wall_text(record: TaskRecord) -> str:
    """The wall time as the cell said it: ``"1.23 s"`` (its measured run, two decimals, as in
    "ran on W in 1.23 s") once it finished; seconds since it started, one decimal, as "running
    for" and "failed after" say, for the rest; empty before it started."""
    if record.usage is not None:
        return f"{record.usage.wall:.2f} s"
    if record.started is None:
        return ""
    return f"{record.elapsed():.1f} s"


def short_worker(worker: str | None) -> str:
    """``"tcp://10.0.0.5:40123"`` -> ``"10.0.0.5:40123"``; a name is kept as it is."""
    if not worker:
        return ""
    return worker.split("://", 1)[1] if "://" in worker else worker


def hint_text(hints: Sequence[Hint]) -> str:
    """The hints of one task in a few words: ``"memory over-requested: %%task small_task"``."""
    if not hints:
        return ""
    found = ", ".join(f"{h.resource} {h.kind}" for h in hints)
    lines = list(dict.fromkeys(h.line for h in hints if h.line))
    return f"{found}: {' / '.join(lines)}" if lines else found


def task_row(record: TaskRecord, hints: Sequence[Hint] = ()) -> TaskRow:
    """What the table shows of ``record``, with the right-sizing ``hints`` about it."""
    usage = record.usage
    peak = ""
    gpu = ""
    if usage is not None:
        peak = "not measured" if usage.peak_memory is None else show_bytes(usage.peak_memory)
        gpu = "" if usage.gpu_memory is None else show_bytes(usage.gpu_memory)
    details = [
        ("key", record.key),
        ("request", repr(record.request)),
        ("worker", record.worker or ""),
        ("error", record.error or ""),
        (
            "elapsed",
            f"{record.elapsed():.2f} s from start to end (a result's transfer included)"
            if record.started
            else "",
        ),
        ("cpu time", f"{usage.cpu:.2f} s" if usage is not None else ""),
        ("peak memory", "not measured on this platform" if peak == "not measured" else peak),
        ("gpu memory", gpu),
        *(("hint", str(h)) for h in hints),
    ]
    return TaskRow(
        name=record.cell,
        request=record.request.to_options(),
        worker=short_worker(record.worker),
        state=record.state,
        wall=wall_text(record),
        cores=show_number(round(usage.cores, 2)) if usage is not None else "",
        peak=peak,
        hint=hint_text(hints),
        details=tuple((label, text) for label, text in details if text),
    )


def hints_by_key(hints: Iterable[Hint]) -> dict[str, list[Hint]]:
    """Hints grouped by the key of the task they are about, in their order."""
    grouped: dict[str, list[Hint]] = {}
    for hint in hints:
        grouped.setdefault(hint.key, []).append(hint)
    return grouped


class TaskTable:
    """This kernel's tasks, as ``%tasks`` returns them.

    Shown as an HTML table in a notebook and as aligned text in a terminal. :attr:`frame` (or
    :meth:`to_dataframe`) is the DataFrame: one row per task with the columns of
    :meth:`~taskcell.runner.history.TaskHistory.frame` and ``hint``. DataFrame reads also work
    on the table itself (``t[t.cell == "train"]``, ``t.state``, ``t.iloc[-1]``, ``len(t)``).

    Parameters
    ----------
    records : sequence of TaskRecord
        The tasks, oldest first.
    hints : mapping of str to list of Hint, optional
        The right-sizing hints by task key; :func:`~taskcell.planner.rightsize.review` of
        ``records`` by default.
    """

    def __init__(
        self, records: Sequence[TaskRecord], hints: Mapping[str, Sequence[Hint]] | None = None
    ) -> None:
        self._records = list(records)
        self._hints = dict(hints_by_key(review(self._records)) if hints is None else hints)
        self._frame: pandas.DataFrame | None = None

    @property
    def rows(self) -> list[TaskRow]:
        """The rows as shown, oldest task first."""
        return [task_row(r, self._hints.get(r.key, ())) for r in self._records]

    @property
    def frame(self) -> pandas.DataFrame:
        """The tasks as a pandas DataFrame (built once, on first use)."""
        if self._frame is None:
            from taskcell.runner.history import TaskHistory

            frame = TaskHistory(self._records).frame()
            frame["hint"] = [
                " / ".join(f"{h.kind} {h.resource}: {h.line}" for h in self._hints.get(key, []))
                for key in frame["key"]
            ]
            self._frame = frame
        return self._frame

    def to_dataframe(self) -> pandas.DataFrame:
        """The tasks as a pandas DataFrame (a copy: change it freely)."""
        return self.frame.copy()

    # DataFrame reads, so code written when %tasks returned the DataFrame keeps working.
    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # IPython's _repr_*_ probes, copy and pickle: not the frame's
            raise AttributeError(name)
        return getattr(self.frame, name)

    def __getitem__(self, key: Any) -> Any:
        return self.frame[key]

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Any:
        return iter(self.frame)

    def text(self) -> str:
        """The table as aligned text, one line per task under a heading line."""
        rows = self.rows
        if not rows:
            return NO_TASKS
        cells = [[heading for heading, _ in COLUMNS]]
        cells += [[getattr(row, field) for _, field in COLUMNS] for row in rows]
        widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
        return "\n".join(
            "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
            for line in cells
        )

    def __repr__(self) -> str:
        return self.text()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.text())

    def _repr_html_(self) -> str:
        rows = self.rows
        if not rows:
            return f"<p>{html.escape(NO_TASKS)}</p>"
        head = "".join(f"<th>{heading}</th>" for heading, _ in COLUMNS)
        body = "".join(_html_row(row) for row in rows)
        return (
            '<table class="taskcell-tasks">'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        )


def _html_row(row: TaskRow) -> str:
    record = "".join(
        f"<dt>{html.escape(label)}</dt><dd>{html.escape(text)}</dd>" for label, text in row.details
    )
    name = (
        f"<details><summary>{html.escape(row.name)}</summary>"
        f'<dl style="margin:0.2em 0 0 1em">{record}</dl></details>'
    )
    cells = [
        f"<td><code>{html.escape(row.request)}</code></td>" if row.request else "<td></td>",
        f"<td>{html.escape(row.worker)}</td>",
        f"<td>{html.escape(row.state)}</td>",
        *(
            f'<td style="text-align:right">{html.escape(text)}</td>'
            for text in (row.wall, row.cores, row.peak)
        ),
        f"<td>{html.escape(row.hint)}</td>",
    ]
    return f'<tr><td style="text-align:left">{name}</td>{"".join(cells)}</tr>'


def kernel_tasks() -> TaskTable:
    """This kernel's tasks, as ``%tasks`` shows them."""
    return TaskTable(kernel_history())


def tasks_frame() -> pandas.DataFrame:
    """This kernel's tasks as a pandas DataFrame: cell, request, worker, state, wall time
    (``wall_s``), cores used, peak and GPU memory, error, key, and a right-sizing hint.

    Returns
    -------
    pandas.DataFrame
        One row per task, oldest first; what ``%tasks`` shows as a table.
    """
    return kernel_tasks().to_dataframe()
