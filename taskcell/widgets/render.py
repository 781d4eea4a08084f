"""A snapshot as HTML: the panel's totals, worker table, queue and right-sizing hints.

Pure functions of a :class:`~taskcell.planner.schema.Snapshot`, so they are tested without a
kernel and could serve any HTML view. Styles are inline (an ipywidgets ``HTML`` has no stylesheet)
and use colours that read on light and dark themes. Everything from the cluster is escaped.

Readable at 200 workers: workers with identical resources form one group with one header row;
within a group busy workers come first, and in a group of more than :data:`IDLE_ROWS` workers the
idle ones fold into a single line. The table sits in a scroll box the panel provides.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterable, Sequence
from typing import Any

from taskcell.planner.schema import ResourceUse, Snapshot, TaskInfo, WorkerSnapshot
from taskcell.planner.suggestion import show_amount

#: A group with more workers than this folds its idle ones into one row.
IDLE_ROWS = 8
#: Most tasks listed in the queue section; the rest are counted.
QUEUE_ROWS = 50

RUNNING = "#2f7ed8"
ASSIGNED = "#f28f43"
TRACK = "rgba(127,127,127,0.22)"
_HATCH = f"repeating-linear-gradient(135deg,{ASSIGNED} 0 3px,transparent 3px 6px)"

#: The styles every fragment carries (an ipywidgets HTML has no stylesheet of its own). The
#: ``tcw-`` prefix keeps them apart from the lab extension's ``jp-taskcell-`` classes.
STYLE = (
    "<style>"
    ".tcw-t{border-collapse:collapse;font-size:92%}"
    ".tcw-t td{padding:1px 8px 1px 0;vertical-align:middle;white-space:nowrap}"
    ".tcw-t td.tcw-w{white-space:normal}"
    ".tcw-t th{padding:4px 8px 2px 0;text-align:left;font-weight:600;"
    f"border-bottom:1px solid {TRACK}}}"
    ".tcw-t td.tcw-g{padding:6px 0 2px 0;font-weight:600}"
    ".tcw-s{font-size:90%;opacity:0.8}"
    ".tcw-a{color:" + ASSIGNED + "}"
    ".tcw-b{display:inline-flex;align-items:center;gap:4px}"
    f".tcw-k{{display:inline-block;position:relative;height:9px;background:{TRACK};"
    "border-radius:2px;overflow:hidden}"
    f".tcw-r{{position:absolute;top:0;bottom:0;left:0;background:{RUNNING}}}"
    f".tcw-h{{position:absolute;top:0;bottom:0;background:{_HATCH}}}"
    ".tcw-x{display:inline-block;width:10px;height:9px;margin:0 3px 0 8px;"
    "vertical-align:middle}"
    "</style>"
)

esc = html.escape


amount = show_amount


def duration(seconds: float) -> str:
    """``75`` -> ``"1m15s"``; ``4000`` -> ``"1h06m"``."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def bar(use: ResourceUse, width: int = 72) -> str:
    """One resource as a bar: running solid, assigned-and-waiting hatched, and the numbers."""
    total, running, assigned = use["total"], use["running"], use["assigned"]
    r = min(running / total, 1.0) if total else 0.0
    a = min(assigned / total, 1.0 - r) if total else 0.0
    name = use["resource"]
    tip = (
        f"{name}: {amount(name, running)} of {amount(name, total)} held by running tasks, "
        f"{amount(name, assigned)} asked for by tasks waiting on this worker"
    )
    text = f"{amount(name, running)}/{amount(name, total)}"
    if assigned:
        text += f" <span class='tcw-a'>+{esc(amount(name, assigned))}</span>"
    return (
        f"<span class='tcw-b' title='{esc(tip)}'><span class='tcw-k' style='width:{width}px'>"
        f"<span class='tcw-r' style='width:{r * 100:.0f}%'></span>"
        f"<span class='tcw-h' style='left:{r * 100:.0f}%;width:{a * 100:.0f}%'></span></span>"
        f"<span class='tcw-s'>{text}</span></span>"
    )


def legend() -> str:
    return (
        f"<span class='tcw-s'><span class='tcw-x' style='background:{RUNNING}'></span>running"
        f"<span class='tcw-x' style='background:{_HATCH}'></span>"
        "assigned, waiting on the worker</span>"
    )


def totals_html(snap: Snapshot) -> str:
    """The cluster's totals, one bar per resource, and counts of workers and tasks."""
    n = len(snap["workers"])
    running = sum(w["running_tasks"] for w in snap["workers"])
    waiting = sum(w["assigned_tasks"] for w in snap["workers"])
    counts = (
        f"{n} worker{'s' if n != 1 else ''} · {running} running · {waiting} waiting on workers"
        f" · {snap['queued']} queued"
    )
    bars = " ".join(
        f"<span style='margin-right:14px;white-space:nowrap'><b>{esc(u['resource'])}</b> "
        f"{bar(u, 90)}</span>"
        for u in snap["totals"]
    )
    return f"{STYLE}<div>{counts}{legend()}</div><div style='margin-top:3px'>{bars}</div>"


def _signature(w: WorkerSnapshot) -> tuple:
    return tuple((u["resource"], u["total"]) for u in w["resources"])


def groups(workers: Iterable[WorkerSnapshot]) -> list[list[WorkerSnapshot]]:
    """Workers with identical resources together, largest group first."""
    by: dict[tuple, list[WorkerSnapshot]] = {}
    for w in workers:
        by.setdefault(_signature(w), []).append(w)
    return sorted(by.values(), key=lambda g: (-len(g), g[0]["address"]))


def _busy(w: WorkerSnapshot) -> bool:
    return bool(w["running_tasks"] or w["assigned_tasks"])


def _tasks_cell(w: WorkerSnapshot, now: float) -> str:
    running = [t for t in w["tasks"] if t["state"] == "running"]
    shown = ", ".join(
        f"<span title='{esc(t['key'])}'>{esc(t['name'])} "
        f"<span class='tcw-s'>{duration(now - t['since'])}</span></span>"
        for t in running[:4]
    )
    if w["running_tasks"] > 4:
        shown += f" <span class='tcw-s'>+{w['running_tasks'] - 4} more</span>"
    if w["assigned_tasks"]:
        shown += f" <span class='tcw-a'>{w['assigned_tasks']} waiting</span>"
    return shown or "<span class='tcw-s'>idle</span>"


def _worker_row(w: WorkerSnapshot, now: float) -> str:
    cells = "".join(f"<td>{bar(u)}</td>" for u in w["resources"])
    return (
        f"<tr><td title='{esc(w['address'])}'>{esc(w['name'])}</td>{cells}"
        f"<td class='tcw-w'>{_tasks_cell(w, now)}</td></tr>"
    )


def _group_rows(group: Sequence[WorkerSnapshot], now: float) -> str:
    first = group[0]
    ncols = len(first["resources"]) + 2
    has = ", ".join(
        f"{u['resource']} {amount(u['resource'], u['total'])}" for u in first["resources"]
    )
    busy = sorted((w for w in group if _busy(w)), key=lambda w: w["name"])
    idle = sorted((w for w in group if not _busy(w)), key=lambda w: w["name"])
    n = len(group)
    title = f"{n} worker{'s' if n != 1 else ''} with {has}"
    if n > 1:
        title += f" · {len(busy)} busy"
    head = "".join(f"<th>{esc(u['resource'])}</th>" for u in first["resources"])
    rows = [
        f"<tr><td colspan='{ncols}' class='tcw-g'>{esc(title)}</td></tr>",
        f"<tr><th>worker</th>{head}<th>tasks</th></tr>",
    ]
    rows += [_worker_row(w, now) for w in busy]
    if len(group) > IDLE_ROWS and len(idle) > 1:
        names = ", ".join(w["name"] for w in idle[:12]) + (", ..." if len(idle) > 12 else "")
        rows.append(
            f"<tr><td colspan='{ncols}' class='tcw-w tcw-s'>"
            f"{len(idle)} idle: {esc(names)}</td></tr>"
        )
    else:
        rows += [_worker_row(w, now) for w in idle]
    return "".join(rows)


def workers_html(snap: Snapshot, now: float | None = None) -> str:
    """Every worker, grouped by identical resources, with its bars and running tasks."""
    now = time.time() if now is None else now
    if not snap["workers"]:
        return "<div>No worker is connected to the scheduler.</div>"
    body = "".join(_group_rows(g, now) for g in groups(snap["workers"]))
    return f"{STYLE}<table class='tcw-t'>{body}</table>"


def _request(t: TaskInfo) -> str:
    return ", ".join(f"{r}={amount(r, a)}" for r, a in t["request"].items()) or "a thread"


def waiting_tasks(snap: Snapshot) -> list[TaskInfo]:
    """Tasks waiting for something: queued on the scheduler, then assigned on a worker."""
    assigned = [t for w in snap["workers"] for t in w["tasks"] if t["state"] == "assigned"]
    return list(snap["queue"]) + sorted(assigned, key=lambda t: t["since"])


def queue_html(snap: Snapshot, now: float | None = None) -> str:
    """The tasks that wait, oldest first, with what each waits for."""
    now = time.time() if now is None else now
    tasks = waiting_tasks(snap)
    if not tasks:
        return "<div style='font-size:90%;opacity:0.8'>Nothing waits.</div>"
    rows = "".join(
        f"<tr><td title='{esc(t['key'])}'>{esc(t['name'])}</td>"
        f"<td>{esc(_request(t))}</td>"
        f"<td>{'on ' + esc(t['worker']) if t['worker'] else 'queued'}</td>"
        f"<td>{duration(now - t['since'])}</td>"
        f"<td class='tcw-w'>{esc(t['waiting_for'] or '')}</td></tr>"
        for t in tasks[:QUEUE_ROWS]
    )
    total = snap["queued"] + sum(w["assigned_tasks"] for w in snap["workers"])
    more = total - min(len(tasks), QUEUE_ROWS)
    tail = f"<div class='tcw-s'>and {more} more</div>" if more > 0 else ""
    head = "".join(f"<th>{h}</th>" for h in ("task", "asks", "where", "waited", "waiting for"))
    return f"{STYLE}<table class='tcw-t'><tr>{head}</tr>{rows}</table>{tail}"


def hints_html(hints: Sequence[Any]) -> str:
    """Right-sizing hints (:class:`~taskcell.planner.rightsize.Hint`), newest first."""
    if not hints:
        return ""
    items = "".join(
        f"<li>{esc(h.message)}"
        + (f" <code>{esc(h.line)}</code>" if getattr(h, "line", None) else "")
        + "</li>"
        for h in list(hints)[::-1][:10]
    )
    return f"<div><b>Right-sizing</b><ul style='margin:2px 0'>{items}</ul></div>"
