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
only the standard library and :mod:`taskcell.planner.codec`'s encoders. It keeps its own
records (:class:`Followed`, :class:`Report`, and :class:`~taskcell.planner.codec.EndedEntry`,
which the codec encodes) and writes wire records only when the plugin publishes
(:meth:`EndedTasks.records`).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from distributed.metrics import time

from taskcell.planner.codec import EndedEntry, WireEnded, ended_record, request_record
from taskcell.planner.schema import RECENT_LIMIT, EndState

#: The keys taskcell makes (``unique_key``): a name, a dash, a uuid4's hex.
_TASKCELL_KEY = re.compile(r"-[0-9a-f]{32}$")
#: What a cell's worker reports on its kernel's topic.
_CELL_EVENTS = ("started", "finished", "failed")
#: The longest error line kept.
_ERROR_CHARS = 300
#: An exception as Dask's ``exception_text`` writes it: ``ValueError('bad batch')``.
_EXCEPTION_REPR = re.compile(r"^(\w+)\((['\"])(.*)\2\)$", re.S)


@dataclass(kw_only=True)
class Followed:
    """A followed task that has not ended: what the scheduler and its cell's worker told."""

    #: Dask's key prefix, its name where its key implies none.
    prefix: str
    request: dict[str, float]
    #: Where its cell reported it started, and when that report arrived.
    worker: str | None = None
    since: float | None = None
    #: What its cell measured (``wall``, ``peak_memory``), once it finished.
    usage: dict | None = None
    #: The error its cell reported, once it failed.
    error: str | None = None


@dataclass(kw_only=True)
class Report:
    """What a cell's worker reported on its kernel's topic, read back from the scheduler's log."""

    worker: str | None = None
    usage: dict | None = None
    error: str | None = None
    #: When it was reported started, and ended (the log's times).
    since: float | None = None
    ended: float | None = None


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
    """Followed tasks until they end, and the ``RECENT_LIMIT`` that ended last.

    ``changed`` is set whenever ``recent`` changes; the plugin clears it when it publishes.
    """

    def __init__(self) -> None:
        #: key -> what is known of a followed task that has not ended yet
        self.following: dict[Any, Followed] = {}
        #: The tasks that ended last, oldest first.
        self.recent: deque[EndedEntry] = deque(maxlen=RECENT_LIMIT)
        self.changed = False

    def follow(self, ts: Any) -> None:
        """Follow the scheduler's task ``ts`` to its end, if it is one of taskcell's."""
        key = ts.key
        if key in self.following:
            return
        if ts.resource_restrictions or (isinstance(key, str) and _TASKCELL_KEY.search(key)):
            self.following[key] = Followed(
                prefix=ts.prefix.name, request=request_record(ts.resource_restrictions)
            )

    def transition(
        self,
        key: Any,
        finish: str,
        ts: Any,
        worker: str | None,
        started: float | None,
        assigned: float | None = None,
    ) -> None:
        """A followed task moved to ``finish``; record it if that is an end. ``worker`` and
        ``started``: where and since when it ran, when it leaves ``processing``; ``assigned``:
        since when it was there, for a task whose start was never reported."""
        state: EndState
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
        usage = entry.usage or {}
        wall = usage.get("wall")
        began = next((t for t in (started, entry.since, assigned) if t is not None), None)
        if wall is None and began is not None:  # a failed cell reports no usage
            wall = max(time() - began, 0.0)
        self.recent.append(
            EndedEntry(
                key=key,
                prefix=entry.prefix,
                request=entry.request,
                state=state,
                ended=time(),
                worker=entry.worker or worker,
                wall=wall,
                peak_memory=usage.get("peak_memory"),
                error=one_line(entry.error or error) if state == "failed" else None,
            )
        )
        self.changed = True

    def forget_following(self) -> None:
        """Follow no task any more (a restarted scheduler forgets its tasks); ``recent``
        stays."""
        self.following.clear()

    def event(self, msg: dict) -> bool:
        """Take what a cell's worker reported; False when ``msg`` is no such report."""
        if msg.get("kind") not in _CELL_EVENTS or "key" not in msg:
            return False
        key, kind = msg["key"], msg["kind"]
        entry = self.following.get(key)
        if entry is not None:
            if kind == "started":
                entry.worker, entry.since = msg.get("worker"), time()
            elif kind == "finished":
                entry.usage = msg.get("usage")
            else:
                entry.error = msg.get("error")
            return True
        # It ended before its worker's word arrived: complete its record.
        for record in reversed(self.recent):
            if record.key == key:
                usage = msg.get("usage") or {}
                if kind == "finished" and record.state == "finished":
                    record.wall = usage.get("wall", record.wall)
                    record.peak_memory = usage.get("peak_memory")
                    self.changed = True
                elif kind == "failed" and record.state == "failed":
                    record.error = one_line(msg.get("error")) or record.error
                    self.changed = True
                break
        return True

    def seed(
        self, events: Mapping[str, Iterable[tuple[float, Any]]], tasks: Mapping[Any, Any]
    ) -> None:
        """Take over what cells' workers reported before this plugin was added (the
        scheduler's ``get_events()``): complete the tasks followed, and record the cells that
        ended already. ``tasks`` is the scheduler's, for the state of those it still holds."""
        reports: dict[Any, Report] = {}
        for log in events.values():
            for stamp, msg in log:
                if isinstance(msg, dict) and msg.get("kind") in _CELL_EVENTS and "key" in msg:
                    report = reports.setdefault(msg["key"], Report())
                    if msg["kind"] == "started":
                        report.worker, report.since = msg.get("worker"), stamp
                    else:
                        report.usage, report.error = msg.get("usage"), msg.get("error")
                        report.ended = stamp
        ended = []
        for key, report in reports.items():
            entry = self.following.get(key)
            if entry is not None:
                entry.worker, entry.since = report.worker, report.since
                entry.usage, entry.error = report.usage, report.error
            elif report.ended is not None:
                ended.append(self._taken_over(key, report, report.ended, tasks.get(key)))
        for record in sorted(ended, key=lambda r: r.ended)[-RECENT_LIMIT:]:
            self.recent.append(record)
        self.changed = self.changed or bool(ended)

    @staticmethod
    def _taken_over(key: Any, report: Report, ended: float, ts: Any) -> EndedEntry:
        """The record of a cell that ended (at ``ended``) before the plugin, from its worker's
        reports."""
        usage = report.usage or {}
        text = getattr(ts, "exception_text", "") or ""
        state: EndState
        if report.usage is not None:
            state = "finished"
        else:
            state = "cancelled" if text.startswith("CellInterrupted(") else "failed"
        wall = usage.get("wall")
        if wall is None and report.since is not None:
            wall = max(ended - report.since, 0.0)
        return EndedEntry(
            key=key,
            prefix="",
            request=request_record(getattr(ts, "resource_restrictions", None)),
            state=state,
            ended=ended,
            worker=report.worker,
            wall=wall,
            peak_memory=usage.get("peak_memory"),
            error=one_line(report.error) if state == "failed" else None,
        )

    def records(self) -> list[WireEnded]:
        """``recent`` as the wire sends it, latest first."""
        return [ended_record(r) for r in reversed(self.recent)]
