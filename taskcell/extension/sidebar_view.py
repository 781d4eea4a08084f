"""What the server sends the sidebar to draw: :func:`taskcell.planner.view.snapshot_view`, with
the tasks that ended while the server watched and the dashboard through the server.

The scheduler's plugin publishes the last ``RECENT_LIMIT`` tasks that ended; the server keeps
every one it saw, up to :data:`ENDED_KEPT`, so the sidebar can search more of them than one
snapshot holds. The Dask dashboard's own address (``http://127.0.0.1:8787/status``) means
nothing to a browser on another machine; the sidebar links to it through this server
(:mod:`taskcell.extension.dashboard`).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from jupyter_server.utils import url_path_join

from taskcell.planner.schema import EndedTask, Snapshot
from taskcell.planner.view import SnapshotView, snapshot_view

#: Most ended tasks the server keeps per cluster, the latest.
ENDED_KEPT = 200


def merge_ended(kept: dict[str, EndedTask], recent: list[EndedTask]) -> None:
    """Add a snapshot's ended tasks to ``kept`` (by key, the latest record of each), keeping
    the :data:`ENDED_KEPT` that ended last."""
    for task in recent:
        kept[task["key"]] = task
    if len(kept) > ENDED_KEPT:
        latest = sorted(kept.values(), key=lambda t: t["ended"], reverse=True)[:ENDED_KEPT]
        kept.clear()
        kept.update((t["key"], t) for t in latest)


def dashboard_target(link: str | None, scheduler: str) -> tuple[str, int] | None:
    """The host and port of a dashboard link (``http://host:port/status``) on the machine of
    the ``scheduler`` that announced it; None for no link, one that names no host and port (a
    ``distributed.dashboard.link`` template that already goes through a proxy), or one on
    another machine: the server relays to a cluster's own dashboard, never to an address a
    scheduler names elsewhere."""
    if not link:
        return None
    try:
        parts = urlsplit(link)
        port = parts.port
        home = urlsplit(scheduler if "://" in scheduler else f"tcp://{scheduler}").hostname
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname or port is None:
        return None
    if not _same_machine(parts.hostname, home or ""):
        return None
    return parts.hostname, port


def _same_machine(host: str, scheduler_host: str) -> bool:
    """Whether ``host`` names the scheduler's machine: the same name, or both loopback."""
    return host == scheduler_host or (_loopback(host) and _loopback(scheduler_host))


def _loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def proxied_dashboard(link: str | None, scheduler: str, cluster_id: str) -> str | None:
    """The dashboard's page through this server, relative to its base URL
    (``taskcell/dashboard/<id>/status``); a link it cannot proxy as it is, and None without
    one."""
    if dashboard_target(link, scheduler) is None:
        return link
    assert link is not None
    path = urlsplit(link).path.lstrip("/") or "status"
    return url_path_join("taskcell", "dashboard", cluster_id, path)


def cluster_view(
    snapshot: Snapshot, ended: dict[str, EndedTask], now: float, dashboard: str | None
) -> SnapshotView:
    """The snapshot as shown, its ended tasks those ``ended`` holds (latest first), its
    dashboard link ``dashboard``."""
    shown = dict(snapshot)
    shown["recent"] = sorted(ended.values(), key=lambda t: t["ended"], reverse=True)
    shown["dashboard"] = dashboard
    return snapshot_view(Snapshot(**shown), now)  # type: ignore[typeddict-item]
