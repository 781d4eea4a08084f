"""The tasks that ended last, as the scheduler plugin keeps them for ``Snapshot.recent``.

:class:`EndedTasks` follows taskcell's tasks (cells and decorated tasks, whose keys end in a
uuid, and any task that asks for resources) from the moment the scheduler holds them to their
end: ``memory`` is finished, ``erred`` failed (or cancelled, for a cell stopped on its worker,
which raises ``CellInterrupted``), ``forgotten`` before either cancelled. What a cell's worker
reports on its kernel's topic (:mod:`taskcell.runner.remote`: started, finished with its usage,
failed with its error line) completes the record, whichever arrives first. The scheduler keeps
those reports, so cells that ended before the plugin was added are taken over from them
(:meth:`EndedTasks.seed`).

It runs inside the scheduler, shipped by value with :mod:`taskcell.planner.plugin`, so it uses
only the standard library and :mod:`taskcell.planner.codec`'s encoders.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from distributed.metrics import time

from taskcell.planner.codec import ended_record, request_record
from taskcell.planner.schema import RECENT_LIMIT

#: The keys taskcell makes (``unique_key``): a name, a dash, a uuid4's hex.
_TASKCELL_KEY = re.compile(r"-[0-9a-f]{32}$")
#: What a cell's worker reports on its kernel's topic.
_CELL_EVENTS = ("started", "finished", "failed")
#: The longest error line kept.
_ERROR_CHARS = 300
#: An exception as Dask's ``exception_text`` writes it: ``ValueError('bad batch')``.
_EXCEPTION_REPR = re.compile(r"^(\w+)\((['\"])(.*)\2\)$", re.S)
# Positions in a wire record (see codec.ended_record).
_STATE, _WALL, _PEAK, _ERROR = 3, 6, 7, 8


def one_line(text: str | None) -> str | None:
    """An error in one bounded line, ``ValueError('bad batch')`` as ``ValueError: bad batch``."""
    if not text:
        return None
    match = _EXCEPTION_REPR.match(text)
    if match:
        text = f"{match[1]}: {match[3]}"
    line = " ".join(text.split())
    return line if len(line) <= _ERROR_CHARS else line[: _ERROR_CHARS - 1] + "…"


class EndedTasks:
    """Followed tasks until they end, and the ``RECENT_LIMIT`` that ended last (on the wire).

    ``changed`` is set whenever ``recent`` changes; the plugin clears it when it publishes.
    """

    def __init__(self) -> None:
        #: key -> what is known of a followed task that has not ended yet
        self.following: dict[Any, dict] = {}
        #: Wire records of the tasks that ended last, oldest first.
        self.recent: deque[list] = deque(maxlen=RECENT_LIMIT)
        self.changed = False

    def follow(self, ts: Any) -> None:
        """Follow the scheduler's task ``ts`` to its end, if it is one of taskcell's."""
        key = ts.key
        if key in self.following:
            return
        if ts.resource_restrictions or (isinstance(key, str) and _TASKCELL_KEY.search(key)):
            self.following[key] = {
                "prefix": ts.prefix.name,
                "request": request_record(ts.resource_restrictions),
                "worker": None,
                "usage": None,
                "error": None,
            }

    def transition(
        self, key: Any, finish: str, ts: Any, worker: str | None, started: float | None
    ) -> None:
        """A followed task moved to ``finish``; record it if that is an end. ``worker`` and
        ``started``: where and since when it ran, when it leaves ``processing``."""
        if finish == "memory":
            state, error = "finished", None
        elif finish == "erred":
            text = getattr(ts, "exception_text", "") or ""
            # A cell stopped on its worker (taskcell.runner.stopping) raises CellInterrupted.
            state = "cancelled" if text.startswith("CellInterrupted(") else "failed"
            error = text
        elif finish == "forgotten":
            state, error = "cancelled", None
        else:
            return
        entry = self.following.pop(key)
        usage = entry["usage"] or {}
        wall = usage.get("wall")
        if wall is None and started is not None:
            wall = max(time() - started, 0.0)
        error = one_line(entry["error"] or error) if state == "failed" else None
        self.recent.append(
            ended_record(
                key,
                entry["prefix"],
                entry["request"],
                state,
                time(),
                entry["worker"] or worker,
                wall,
                usage.get("peak_memory"),
                error,
            )
        )
        self.changed = True

    def event(self, msg: dict) -> bool:
        """Take what a cell's worker reported; False when ``msg`` is no such report."""
        if msg.get("kind") not in _CELL_EVENTS or "key" not in msg:
            return False
        key, kind = msg["key"], msg["kind"]
        entry = self.following.get(key)
        if entry is not None:
            field, value = {
                "started": ("worker", msg.get("worker")),
                "finished": ("usage", msg.get("usage")),
                "failed": ("error", msg.get("error")),
            }[kind]
            entry[field] = value
            return True
        # It ended before its worker's word arrived: complete its record.
        for record in reversed(self.recent):
            if record[0] == key:
                usage = msg.get("usage") or {}
                if kind == "finished" and record[_STATE] == "f":
                    record[_WALL] = usage.get("wall", record[_WALL])
                    record[_PEAK] = usage.get("peak_memory")
                    self.changed = True
                elif kind == "failed" and record[_STATE] == "x":
                    record[_ERROR] = one_line(msg.get("error")) or record[_ERROR]
                    self.changed = True
                break
        return True

    def seed(
        self, events: Mapping[str, Iterable[tuple[float, Any]]], tasks: Mapping[Any, Any]
    ) -> None:
        """Take over what cells' workers reported before this plugin was added (the
        scheduler's ``get_events()``): complete the tasks followed, and record the cells that
        ended already. ``tasks`` is the scheduler's, for the state of those it still holds."""
        reports: dict[Any, dict] = {}
        for log in events.values():
            for stamp, msg in log:
                if isinstance(msg, dict) and msg.get("kind") in _CELL_EVENTS and "key" in msg:
                    report = reports.setdefault(msg["key"], {"worker": None, "usage": None,
                                                            "error": None, "since": None,
                                                            "ended": None})  # fmt: skip
                    if msg["kind"] == "started":
                        report["worker"], report["since"] = msg.get("worker"), stamp
                    else:
                        report["usage"], report["error"] = msg.get("usage"), msg.get("error")
                        report["ended"] = stamp
        ended = []
        for key, report in reports.items():
            entry = self.following.get(key)
            if entry is not None:
                entry.update(worker=report["worker"], usage=report["usage"], error=report["error"])
            elif report["ended"] is not None:
                ended.append(self._taken_over(key, report, tasks.get(key)))
        for record in sorted(ended, key=lambda r: r[4])[-RECENT_LIMIT:]:
            self.recent.append(record)
        self.changed = self.changed or bool(ended)

    @staticmethod
    def _taken_over(key: Any, report: dict, ts: Any) -> list:
        """The record of a cell that ended before the plugin, from its worker's reports."""
        usage = report["usage"] or {}
        text = getattr(ts, "exception_text", "") or ""
        if report["usage"] is not None:
            state = "finished"
        else:
            state = "cancelled" if text.startswith("CellInterrupted(") else "failed"
        wall = usage.get("wall")
        if wall is None and report["since"] is not None:
            wall = max(report["ended"] - report["since"], 0.0)
        return ended_record(
            key,
            "",
            request_record(getattr(ts, "resource_restrictions", None)),
            state,
            report["ended"],
            report["worker"],
            wall,
            usage.get("peak_memory"),
            one_line(report["error"]) if state == "failed" else None,
        )

    def records(self) -> list[list]:
        """``recent`` as the wire sends it: copies, latest first."""
        return [list(r) for r in reversed(self.recent)]
