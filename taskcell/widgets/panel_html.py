"""A snapshot's view as HTML: the panel's totals, worker groups, pools, waiting and ended tasks,
timeline, hints.

Pure functions of a :class:`~taskcell.planner.view.SnapshotView`, which has already grouped,
ordered and worded everything, as it has for the JupyterLab sidebar; this module only draws
it. Styles are inline (an ipywidgets ``HTML`` has no stylesheet) and use colours that read on
light and dark themes. Everything from the cluster is escaped. The worker table sits in a scroll
box the panel provides.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING

from taskcell.planner.view import (
    CELL_PALETTE,
    LEGEND_ASSIGNED,
    LEGEND_RUNNING,
    BarView,
    GroupView,
    PoolView,
    SnapshotView,
    StripView,
    TimelineView,
    WorkerView,
)

if TYPE_CHECKING:
    from taskcell.planner.rightsize import Hint

RUNNING = "#2f7ed8"
ASSIGNED = "#f28f43"
TRACK = "rgba(127,127,127,0.22)"
FAILED = "#d62728"
_HATCH = f"repeating-linear-gradient(135deg,{ASSIGNED} 0 3px,transparent 3px 6px)"

#: The styles every fragment carries (an ipywidgets HTML has no stylesheet of its own). The
#: ``tcw-`` prefix keeps them apart from the lab extension's ``jp-taskcell-`` classes.
STYLE = (
    "<style>"
    ".tcw-table{border-collapse:collapse;font-size:92%}"
    ".tcw-table td{padding:1px 8px 1px 0;vertical-align:middle;white-space:nowrap}"
    ".tcw-table td.tcw-wrap{white-space:normal}"
    ".tcw-table th{padding:4px 8px 2px 0;text-align:left;font-weight:600;"
    f"border-bottom:1px solid {TRACK}}}"
    ".tcw-table td.tcw-group{padding:6px 0 2px 0;font-weight:600}"
    ".tcw-soft{font-size:90%;opacity:0.8}"
    ".tcw-assigned{color:" + ASSIGNED + "}"
    ".tcw-bar{display:inline-flex;align-items:center;gap:4px}"
    f".tcw-track{{display:inline-block;position:relative;height:9px;background:{TRACK};"
    "border-radius:2px;overflow:hidden}"
    f".tcw-running{{position:absolute;top:0;bottom:0;left:0;background:{RUNNING}}}"
    f".tcw-hatched{{position:absolute;top:0;bottom:0;background:{_HATCH}}}"
    ".tcw-swatch{display:inline-block;width:10px;height:9px;margin:0 3px 0 8px;"
    "vertical-align:middle}"
    ".tcw-strip{display:inline-flex;align-items:flex-end;height:12px;gap:0;"
    f"border-bottom:1px solid {TRACK};vertical-align:middle}}"
    f".tcw-strip span{{display:inline-block;width:2px;background:{RUNNING}}}"
    f".tcw-failed{{color:{FAILED}}}"
    f".tcw-lane{{display:inline-block;position:relative;height:10px;background:{TRACK};"
    "vertical-align:middle}"
    ".tcw-lane span{position:absolute;top:1px;bottom:1px;min-width:2px;border-radius:1px}"
    "</style>"
)

esc = html.escape


def bar(view: BarView, width: int = 72) -> str:
    """One resource as a bar: running solid, assigned-and-waiting hatched, and its label."""
    r, a = view["running_share"] * 100, view["assigned_share"] * 100
    return (
        f"<span class='tcw-bar' title='{esc(view['title'])}'>"
        f"<span class='tcw-track' style='width:{width}px'>"
        f"<span class='tcw-running' style='width:{r:.0f}%'></span>"
        f"<span class='tcw-hatched' style='left:{r:.0f}%;width:{a:.0f}%'></span></span>"
        f"<span class='tcw-soft'>{esc(view['label'])}</span></span>"
    )


def legend() -> str:
    """What the solid and hatched parts of a bar stand for."""
    return (
        f"<span class='tcw-soft'><span class='tcw-swatch' style='background:{RUNNING}'></span>"
        f"{esc(LEGEND_RUNNING)}<span class='tcw-swatch' style='background:{_HATCH}'></span>"
        f"{esc(LEGEND_ASSIGNED)}</span>"
    )


def strip(view: StripView) -> str:
    """A resource's recent past as a row of thin columns, one per step (none where unknown)."""
    columns = "".join(
        "<span style='height:0'></span>"
        if share is None
        else f"<span style='height:{max(share * 100, 0):.0f}%'></span>"
        for share in view["shares"]
    )
    return f"<span class='tcw-strip' title='{esc(view['title'])}'>{columns}</span>"


def dashboard_link(view: SnapshotView) -> str:
    """A link to the cluster's Dask dashboard, or nothing when it serves none."""
    if not view["dashboard"]:
        return ""
    return (
        f" · <a href='{esc(view['dashboard'])}' target='_blank' rel='noopener'>Dask dashboard</a>"
    )


def totals_html(view: SnapshotView) -> str:
    """The cluster's counts, a legend, and per resource its bar and its recent past."""
    strips = {s["resource"]: s for s in view["strips"]}
    bars = " ".join(
        f"<span style='margin-right:14px;white-space:nowrap'><b>{esc(b['resource'])}</b> "
        f"{bar(b, 90)} {strip(strips[b['resource']])}</span>"
        for b in view["totals"]
    )
    return (
        f"{STYLE}<div>{esc(view['summary'])}{dashboard_link(view)}{legend()}</div>"
        f"<div style='margin-top:3px'>{bars}</div>"
    )


def _tasks_cell(w: WorkerView) -> str:
    shown = ", ".join(
        f"<span title='{esc(t['key'])}'>{esc(t['name'])} "
        f"<span class='tcw-soft'>{esc(t['request'])} · {esc(t['waited']['text'])}</span></span>"
        for t in w["running"]
    )
    if w["more_running"]:
        shown += f" <span class='tcw-soft'>{esc(w['more_running'])}</span>"
    if w["waiting"]:
        shown += f" <span class='tcw-assigned'>{esc(w['waiting'])}</span>"
    return shown or "<span class='tcw-soft'>idle</span>"


def _worker_row(w: WorkerView) -> str:
    cells = "".join(f"<td>{bar(b)}</td>" for b in w["bars"])
    return (
        f"<tr><td title='{esc(w['address'])}'>{esc(w['name'])}</td>{cells}"
        f"<td class='tcw-wrap'>{_tasks_cell(w)}</td></tr>"
    )


def _group_rows(group: GroupView) -> str:
    ncols = len(group["resources"]) + 2
    head = "".join(f"<th>{esc(r)}</th>" for r in group["resources"])
    rows = [
        f"<tr><td colspan='{ncols}' class='tcw-group'>{esc(group['title'])}</td></tr>",
        f"<tr><th>worker</th>{head}<th>tasks</th></tr>",
        *(_worker_row(w) for w in group["workers"]),
    ]
    if group["folded"]:
        rows.append(
            f"<tr><td colspan='{ncols}' class='tcw-wrap tcw-soft'>{esc(group['folded'])}</td></tr>"
        )
    return "".join(rows)


def workers_html(view: SnapshotView) -> str:
    """Every worker group, with its bars and running tasks."""
    if view["no_workers"]:
        return f"<div>{esc(view['no_workers'])}</div>"
    body = "".join(_group_rows(g) for g in view["groups"])
    return f"{STYLE}<table class='tcw-table'>{body}</table>"


#: How a pool worker's state is coloured: starting as what waits, failed as what failed.
_POOL_STATE_CLASS = {"starting": "tcw-assigned", "failed": "tcw-failed"}


def _pool_rows(pool: PoolView) -> str:
    rows = [
        f"<tr><td colspan='2' class='tcw-group'>{esc(pool['title'])} "
        f"<span class='tcw-soft'>{esc(pool['shape'])} · {esc(pool['detail'])}</span></td></tr>"
    ]
    rows += [
        f"<tr><td title='{esc(w['title'])}'>{esc(w['name'])}</td>"
        f"<td class='tcw-wrap {_POOL_STATE_CLASS.get(w['state'], 'tcw-soft')}'>"
        f"{esc(w['label']['text'])}</td>"
        "</tr>"
        for w in pool["workers"]
    ]
    return "".join(rows)


def pools_html(view: SnapshotView) -> str:
    """The kernels' pools, each worker they started with its state; nothing without pools."""
    if not view["pools"]:
        return ""
    body = "".join(_pool_rows(p) for p in view["pools"])
    return f"{STYLE}<b>{esc(view['pools_title'])}</b><table class='tcw-table'>{body}</table>"


def queue_html(view: SnapshotView) -> str:
    """The tasks that wait, with what each waits for."""
    title = f"<b>{esc(view['waiting_title'])}</b>"
    note = esc(view["waiting_note"] or "")
    if not view["waiting"]:
        return f"{title}<div style='font-size:90%;opacity:0.8'>{note}</div>"
    rows = "".join(
        f"<tr><td title='{esc(t['key'])}'>{esc(t['name'])}</td><td>{esc(t['request'])}</td>"
        f"<td>{esc(t['where'])}</td><td>{esc(t['waited']['text'])}</td>"
        f"<td class='tcw-wrap'>{esc(t['waiting_for'] or '')}</td></tr>"
        for t in view["waiting"]
    )
    tail = f"<div class='tcw-soft'>{note}</div>" if note else ""
    head = "".join(f"<th>{h}</th>" for h in ("task", "asks", "where", "waited", "waiting for"))
    return f"{STYLE}{title}<table class='tcw-table'><tr>{head}</tr>{rows}</table>{tail}"


def ended_html(view: SnapshotView) -> str:
    """The tasks that ended last: how, where, how long, their peak memory, their error."""
    title = f"<b>{esc(view['ended_title'])}</b>"
    if not view["ended"]:
        return f"{title}<div class='tcw-soft'>{esc(view['ended_note'] or '')}</div>"
    rows = "".join(
        f"<tr><td title='{esc(t['key'])}'>{esc(t['name'])}</td>"
        f"<td class='{_state_class(t['state'])}'>{esc(t['state'])}</td>"
        f"<td class='tcw-soft'>{esc(t['detail']['text'])}</td>"
        f"<td class='tcw-wrap tcw-failed'>{esc(t['error'] or '')}</td></tr>"
        for t in view["ended"]
    )
    return f"{STYLE}{title}<table class='tcw-table'>{rows}</table>"


def _state_class(state: str) -> str:
    return "tcw-failed" if state == "failed" else "tcw-soft"


def timeline_html(view: SnapshotView, width: int = 360) -> str:
    """Each worker's tasks over the last minutes, one coloured bar per task, and a legend of the
    cells' colours."""
    timeline: TimelineView = view["timeline"]
    title = f"<b>Timeline, last {timeline['seconds'] // 60} min</b>"
    if timeline["note"]:
        return f"{STYLE}{title}<div class='tcw-soft'>{esc(timeline['note'])}</div>"
    start, seconds = view["now"] - timeline["seconds"], timeline["seconds"]

    def place(span_start: float, span_end: float | None) -> str:
        left = max(0.0, (span_start - start) / seconds)
        right = min(1.0, ((span_end if span_end is not None else view["now"]) - start) / seconds)
        return f"left:{left * 100:.1f}%;width:{max(right - left, 0) * 100:.1f}%"

    rows = "".join(
        f"<tr><td title='{esc(row['address'])}'>{esc(row['worker'])}</td><td>"
        f"<span class='tcw-lane' style='width:{width}px'>"
        + "".join(
            f"<span title='{esc(s['title'])}' style='{place(s['start'], s['end'])};"
            f"background:{CELL_PALETTE[s['color']]}'></span>"
            for s in row["spans"]
        )
        + "</span></td></tr>"
        for row in timeline["rows"]
    )
    legend = " ".join(
        f"<span class='tcw-soft'><span class='tcw-swatch' "
        f"style='background:{CELL_PALETTE[c['color']]}'></span>{esc(c['name'])}</span>"
        for c in timeline["cells"]
    )
    more = f"<div class='tcw-soft'>{esc(timeline['more'])}</div>" if timeline["more"] else ""
    return f"{STYLE}{title}<table class='tcw-table'>{rows}</table>{more}<div>{legend}</div>"


def failure(text: str) -> str:
    """A line that says something went wrong."""
    return f"<span style='color:{FAILED}'>{esc(text)}</span>"


def live_tasks(view: SnapshotView) -> list[tuple[str, str]]:
    """The tasks one can cancel, as ``(label, key)``: running ones as listed per worker, then
    the waiting ones."""
    running = [t for g in view["groups"] for w in g["workers"] for t in w["running"]]
    how = {"running": "running ", "assigned": "waiting ", "queued": ""}
    return [
        (f"{t['name']} · {how[t['state']]}{t['where']}", t["key"])
        for t in running + view["waiting"]
    ]


def hints_html(hints: Sequence[Hint]) -> str:
    """Right-sizing hints (:class:`~taskcell.planner.rightsize.Hint`), in the order given."""
    if not hints:
        return ""
    items = "".join(
        f"<li>{esc(h.message)}" + (f" <code>{esc(h.line)}</code>" if h.line else "") + "</li>"
        for h in hints
    )
    return f"<div><b>Right-sizing</b><ul style='margin:2px 0'>{items}</ul></div>"
