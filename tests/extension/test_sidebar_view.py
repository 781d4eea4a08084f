"""What the server adds to the view it sends: the tasks that ended while it watched, and the
dashboard through the server (pure functions; the server's use of them is in test_control.py)."""

from __future__ import annotations

import pytest

from taskcell.extension.sidebar_view import (
    ENDED_KEPT,
    dashboard_target,
    merge_ended,
    proxied_dashboard,
)
from taskcell.planner.schema import EndedTask


def ended(key: str, at: float) -> EndedTask:
    return EndedTask(
        key=key,
        name=key,
        request={},
        state="finished",
        worker="tcp://w:1",
        ended=at,
        wall=1.0,
        peak_memory=None,
        error=None,
    )


def test_the_tasks_seen_to_end_are_kept_beyond_one_snapshot_the_latest_first_out():
    kept: dict[str, EndedTask] = {}
    for start in range(0, ENDED_KEPT + 40, 20):  # snapshots of 20, as the plugin sends them
        merge_ended(kept, [ended(f"t{i}", i) for i in range(start, start + 20)])
    assert len(kept) == ENDED_KEPT
    assert min(t["ended"] for t in kept.values()) == 40  # 240 seen: the 40 oldest went
    merge_ended(kept, [{**ended("t239", 239), "state": "failed"}])  # type: ignore[typeddict-item]
    assert kept["t239"]["state"] == "failed" and len(kept) == ENDED_KEPT


@pytest.mark.parametrize(
    ("link", "scheduler", "target", "proxied"),
    [
        (
            "http://127.0.0.1:8787/status",
            "tcp://127.0.0.1:8786",
            ("127.0.0.1", 8787),
            "taskcell/dashboard/abc/status",
        ),
        (
            "http://localhost:8787/status",
            "tls://127.0.0.1:8786",
            ("localhost", 8787),
            "taskcell/dashboard/abc/status",
        ),
        (
            "http://gpu-node:40001/",
            "tcp://gpu-node:8786",
            ("gpu-node", 40001),
            "taskcell/dashboard/abc/status",
        ),
        # A scheduler naming another machine's port: shown as it is, never relayed.
        ("http://10.0.0.9:22/", "tcp://gpu-node:8786", None, "http://10.0.0.9:22/"),
        ("http://127.0.0.1:8787/", "tcp://gpu-node:8786", None, "http://127.0.0.1:8787/"),
        # Dask's distributed.dashboard.link may already go through a proxy: left as it is.
        ("/user/me/proxy/8787/status", "tcp://h:1", None, "/user/me/proxy/8787/status"),
        ("http://host/status", "tcp://host:1", None, "http://host/status"),
        ("http://host:99999/status", "tcp://host:1", None, "http://host:99999/status"),
        (None, "tcp://host:1", None, None),
    ],
)
def test_the_dashboard_is_relayed_when_it_is_on_the_schedulers_machine(
    link, scheduler, target, proxied
):
    assert dashboard_target(link, scheduler) == target
    assert proxied_dashboard(link, scheduler, "abc") == proxied
