"""How a snapshot is shown: amounts, grouping, order, the words, and what ticks with the clock.

The notebook panel draws these views (checked at the end), and the Jupyter server sends the same
ones to the JupyterLab sidebar (tests/extension/test_sidebar_view.py, tests/e2e).
"""

from __future__ import annotations

import pytest

from taskcell.cluster.waits import lack, wait
from taskcell.planner.schema import (
    STRIP_SECONDS,
    EndedTask,
    PoolInfo,
    PoolWorker,
    ResourceUse,
    Snapshot,
    TaskInfo,
    UsageStrip,
    WorkerSnapshot,
)
from taskcell.planner.view import (
    CELL_PALETTE,
    TIMELINE_SECONDS,
    cell_color,
    duration,
    request_label,
    snapshot_view,
)
from taskcell.spec.amounts import show_amount, show_bytes, significant
from taskcell.widgets import panel_html

NOW = 1_000_000.0
GiB = 1 << 30
#: What a task asking for four GPUs waits for on a cluster whose workers have two at most.
NO_GPU4 = wait("no-capable-worker", lacking=[lack("GPU", 4, 2, on="tcp://w:1")])


def use(resource: str, total: float, running: float = 0, assigned: float = 0) -> ResourceUse:
    return ResourceUse(resource=resource, total=total, running=running, assigned=assigned)


def task(key: str, state: str, worker: str | None, ago: float, **extra) -> TaskInfo:
    record = TaskInfo(
        key=key,
        name=key.rsplit("-", 1)[0],
        request={"GPU": 1},
        state=state,  # type: ignore[typeddict-item]
        since=NOW - ago,
        worker=worker,
        wait=None,
    )
    record.update(extra)  # type: ignore[typeddict-item]
    return record


def worker(name: str, address: str, resources: list[ResourceUse], tasks=(), **extra):
    record = WorkerSnapshot(
        address=address,
        name=name,
        nthreads=2,
        memory_limit=0,
        resources=resources,
        tasks=list(tasks),
        running_tasks=sum(t["state"] == "running" for t in tasks),
        assigned_tasks=sum(t["state"] == "assigned" for t in tasks),
    )
    record.update(extra)  # type: ignore[typeddict-item]
    return record


def snapshot(workers, totals=(), queue=(), queued=None, **extra) -> Snapshot:
    record = Snapshot(
        scheduler="tcp://10.0.0.1:8786",
        time=NOW,
        seq=7,
        workers=list(workers),
        totals=list(totals),
        queue=list(queue),
        queued=len(queue) if queued is None else queued,
        recent=[],
        strips=[],
        dashboard=None,
        pools=[],
    )
    record.update(extra)  # type: ignore[typeddict-item]
    return record


def ended(key: str, state: str, worker: str | None, ago: float, **extra) -> EndedTask:
    record = EndedTask(
        key=key,
        name=key.rsplit("-", 1)[0],
        request={"GPU": 1},
        state=state,  # type: ignore[typeddict-item]
        worker=worker,
        ended=NOW - ago,
        wall=None,
        peak_memory=None,
        error=None,
    )
    record.update(extra)  # type: ignore[typeddict-item]
    return record


def the_e2e_cluster() -> Snapshot:
    address = "tcp://127.0.0.1:4001"
    tasks = [task("gpu-sleep-" + "a" * 32, "running", address, 3, name="gpu-sleep")]
    resources = [use("threads", 1, 1), use("GPU", 2, 1)]
    return snapshot([worker("gpu-box", address, resources, tasks)], resources)


def groups_and_folds() -> Snapshot:
    small = []
    for i in range(20):
        address, running, waiting = f"tcp://10.0.1.{i}:1", int(i < 3), int(i == 0)
        tasks = [task(f"train-{i}", "running", address, 75 + i)] * running
        tasks += [task(f"wait-{i}", "assigned", address, 20)] * waiting
        resources = [use("threads", 4, running, waiting), use("GPU", 2, running, waiting)]
        small.append(worker(f"w{i:03d}", address, resources, tasks))
    big = [
        worker(f"g{i}", f"tcp://10.0.2.{i}:1", [use("threads", 4), use("GPU", 8)])
        for i in range(10)
    ]
    odd = [
        worker("Zeta", "tcp://10.0.3.1:1", [use("threads", 1)]),
        worker("alpha", "tcp://10.0.3.2:1", [use("threads", 1)]),
        worker("", "tcp://10.0.3.0:1", [use("threads", 1)]),
    ]
    return snapshot(big + odd + small[::-1], [use("threads", 123, 3, 1), use("GPU", 120, 3, 1)])


def amounts_and_queue() -> Snapshot:
    address = "tcp://10.0.0.9:1"
    running = [
        task(f"run-{i}", "running", address, 4000 - i * 600, request={"CPU": 0.5}) for i in range(6)
    ]
    assigned = [
        task("anon-1", "assigned", address, 10, name="", request={}, wait=wait("worker-starting")),
        task("etl-b", "assigned", address, 30, request={"memory": 1.125 * GiB, "DISK": 102912}),
    ]
    queued = [
        task("big-1", "queued", None, 61, request={"GPU": 4}, wait=NO_GPU4),
        task("odd-1", "queued", None, 5, request={"tokens": 1234567, "SHM": 64 << 20}),
    ]
    resources = [
        use("threads", 8, 6, 2),
        use("CPU", 8, 0.1 + 0.2, 2.5),
        use("memory", 16 * GiB, 4.8 * GiB, 1.125 * GiB),
        use("DISK", 3 << 40, 200 * GiB),
        use("tokens", 1e6, 0.001),
    ]
    w = worker("etl", address, resources, running + assigned, running_tasks=7, assigned_tasks=9)
    return snapshot([w], resources, queued, queued=120)


def ended_strips_and_dashboard() -> Snapshot:
    """Tasks that ended every way, and strips that start late and stop before now."""
    address = "tcp://127.0.0.1:4001"
    resources = [use("threads", 2, 1), use("GPU", 2, 1), use("MEMORY", 8 * GiB)]
    recent = [
        ended("bad-1", "failed", address, 2, wall=0.25, peak_memory=14_200_000,
              error="ValueError: bad batch"),
        ended("fit-2", "finished", "tcp://10.9.9.9:1", 75, wall=4000.5, peak_memory=3 * GiB),
        ended("quick-3", "finished", address, 0, wall=4.25, name=""),
        ended("never-4", "cancelled", None, 3700),
        ended("stop-5", "cancelled", address, 30, wall=59.99),
    ]  # fmt: skip
    last = int(NOW // STRIP_SECONDS) - 3  # the snapshot is 15 s older than NOW
    strips = [
        UsageStrip(resource="threads", start=(last - 4) * STRIP_SECONDS,
                   shares=[0.5, 1.0, None, 0.0, 0.5]),
        UsageStrip(resource="GPU", start=(last - 59) * STRIP_SECONDS,
                   shares=[0.0] * 58 + [0.5, 0.125]),
        UsageStrip(resource="tokens", start=(last - 1) * STRIP_SECONDS, shares=[1.0, 1.0]),
    ]  # fmt: skip
    w = worker("gpu-box", address, resources, [task("hold-" + "a" * 32, "running", address, 9)])
    return snapshot(
        [w], resources, recent=recent, strips=strips, dashboard="http://127.0.0.1:8787/status"
    )


def pool_worker(name: str, state: str, ago: float, **extra) -> PoolWorker:
    record = PoolWorker(
        name=name,
        state=state,  # type: ignore[typeddict-item]
        started="",
        address=None,
        since=NOW - ago,
        idle_since=None,
        error=None,
    )
    record.update(extra)  # type: ignore[typeddict-item]
    return record


def pool(kernel: str, name: str, backend: str, max_workers: int, waiting: int, *workers):
    gpu = {"GPU": 2, "GPU-A100": 2} if name.startswith("a100") else {}
    return PoolInfo(
        kernel=kernel,
        name=name,
        backend=backend,
        resources={"CPU": 8, "MEMORY": 32 * GiB, **gpu},
        max_workers=max_workers,
        waiting=waiting,
        workers=list(workers),
    )


def pools_in_every_state() -> Snapshot:
    """Two kernels, each with a pool named a100x2, and a worker in every state."""
    first, second = "1f2e3d4c-5b6a-4789-9abc-def012345678", "9a8b7c6d-0000-4111-8222-333344445555"
    address = "tcp://10.0.4.1:1"
    a100 = pool(
        first, "a100x2", "slurm", 2, 3,
        pool_worker("a100x2-1a2b3c", "starting", 12.5, started="SLURM job 17"),
        pool_worker("a100x2-4d5e6f", "running", 300, started="SLURM job 15", address=address),
        pool_worker("a100x2-777777", "retired", 4000, started="SLURM job 3"),
        pool_worker("a100x2-999999", "failed", 75, started="SLURM job 9",
                    error="the worker of pool a100x2 (SLURM job 9) failed to start: its job ended"),
    )  # fmt: skip
    cpu = pool(
        first, "cpu16", "local", 2, 0,
        pool_worker("cpu16-aaaaaa", "running", 200, started="pid 4242",
                    address="tcp://10.0.4.2:1", idle_since=NOW - 65),
        pool_worker("cpu16-bbbbbb", "retiring", 2, started="pid 4243", address="tcp://10.0.4.3:1"),
        pool_worker("cpu16-cccccc", "retired", 30, started="pid 4200",
                    error="it left the scheduler"),
    )  # fmt: skip
    other = pool(second, "a100x2", "local", 1, 1, pool_worker("a100x2-000000", "starting", 0.5))
    return snapshot([], pools=[a100, cpu, other])


def empty() -> Snapshot:
    return snapshot([])


CASES = {
    f.__name__: f
    for f in (
        the_e2e_cluster,
        groups_and_folds,
        amounts_and_queue,
        ended_strips_and_dashboard,
        pools_in_every_state,
        empty,
    )
}


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [
        ("GPU", 1, "1"),
        ("GPU", 0.5, "0.5"),
        ("threads", 0.1 + 0.2, "0.3"),
        ("tokens", 1234567, "1234570"),
        ("tokens", 1e-5, "0.00001"),
        ("MEMORY", 512, "512 B"),
        ("memory", 1.5 * GiB, "1.5 GiB"),
        ("SHM", 64 << 20, "64 MiB"),
        ("DISK", 200 * GiB, "200 GiB"),
        ("DISK", 1.125 * GiB, "1.13 GiB"),  # a tie rounds up, as JavaScript's toPrecision does
        ("DISK", 100.5 * 1024, "101 KiB"),
        ("memory limit", 3 << 40, "3 TiB"),
    ],
    ids=lambda v: str(v),
)
def test_amounts(resource, amount, text):
    assert show_amount(resource, amount) == text


def test_bytes_and_digits():
    assert show_bytes(1536) == "1.5 KiB" and show_bytes(0) == "0 B"
    assert [significant(v, 3) for v in (99.96, 0.125, -2.5, 7)] == ["100", "0.125", "-2.5", "7"]


def test_durations_and_requests():
    assert [duration(s) for s in (0, 59, 75, 4000, -3)] == ["0s", "59s", "1m15s", "1h06m", "0s"]
    assert request_label({"GPU": 1, "MEMORY": 4 * GiB}) == "GPU=1, MEMORY=4 GiB"
    assert request_label({}) == "a thread"


def test_largest_group_first_busy_workers_first_idle_ones_folded():
    view = snapshot_view(groups_and_folds(), NOW)
    titles = [g["title"] for g in view["groups"]]
    assert titles == [
        "20 workers with threads 4, GPU 2 · 3 busy",
        "10 workers with threads 4, GPU 8 · 0 busy",
        "3 workers with threads 1 · 0 busy",
    ]
    first, second, third = view["groups"]
    assert [w["name"] for w in first["workers"]] == ["w000", "w001", "w002"]
    assert first["folded"].startswith("17 idle: w003, w004") and first["folded"].endswith(", ...")
    assert second["workers"] == [] and second["folded"].startswith("10 idle: g0, g1")
    # A small group lists everyone, by name (code points, so "Zeta" < "alpha"), else address.
    assert [w["name"] for w in third["workers"]] == ["Zeta", "alpha", "tcp://10.0.3.0:1"]
    assert first["workers"][0]["running"][0]["waited"]["text"] == "1m15s"
    assert first["workers"][0]["waiting"] == "1 waiting"


def test_waiting_lists_queued_then_assigned_oldest_first_and_counts_the_rest():
    address = "tcp://w:1"
    tasks = [task("late-1", "assigned", address, 5), task("early-1", "assigned", address, 50)]
    queued = [task("big-1", "queued", None, 1, wait=NO_GPU4)]
    snap = snapshot([worker("w", address, [use("GPU", 1)], tasks)], queue=queued, queued=3)
    view = snapshot_view(snap, NOW)
    assert [t["name"] for t in view["waiting"]] == ["big", "early", "late"]
    assert [t["where"] for t in view["waiting"]] == ["queued", f"on {address}", f"on {address}"]
    assert (view["waiting_title"], view["waiting_note"]) == ("Waiting: 5", "and 2 more")
    assert snapshot_view(snapshot([]), NOW)["waiting_note"] == "Nothing waits."


def test_pools_say_their_shape_counts_and_each_workers_state():
    first, cpu, second = snapshot_view(pools_in_every_state(), NOW)["pools"]
    assert [first["title"], cpu["title"], second["title"]] == [
        "a100x2 · slurm · kernel 1f2e3d4c",  # another kernel has an a100x2: each names its own
        "cpu16 · local",
        "a100x2 · local · kernel 9a8b7c6d",
    ]
    assert first["shape"] == "CPU=8, MEMORY=32 GiB, GPU=2, GPU-A100=2"
    assert first["detail"] == "2 of 2 workers · 3 tasks waiting"  # retired and failed: not up
    assert second["detail"] == "1 of 1 worker · 1 task waiting"
    labels = [w["label"]["text"] for pool in (first, cpu, second) for w in pool["workers"]]
    assert labels == [
        "starting for 12s (SLURM job 17)",
        "running",
        "retired",
        "failed: the worker of pool a100x2 (SLURM job 9) failed to start: its job ended",
        "idle 1m05s",
        "retiring",
        "retired: it left the scheduler",
        "starting for 0s",
    ]
    assert first["workers"][1]["title"] == "SLURM job 15 · tcp://10.0.4.1:1"
    assert second["workers"][0]["title"] == "a100x2-000000"  # nothing started yet to name


@pytest.mark.parametrize("case", CASES)
def test_the_panel_draws_the_groups_workers_and_labels_in_order(case):
    view = snapshot_view(CASES[case](), NOW)
    parts = ("workers_html", "totals_html", "queue_html", "ended_html", "pools_html")
    html = "".join(getattr(panel_html, part)(view) for part in parts)
    expected = [g["title"] for g in view["groups"]]
    expected += [p["title"] for p in view["pools"]] + [p["shape"] for p in view["pools"]]
    expected += [p["detail"] for p in view["pools"]]
    expected += [w["label"]["text"] for p in view["pools"] for w in p["workers"]]
    expected += [w["name"] for g in view["groups"] for w in g["workers"]]
    expected += [b["label"] for b in view["totals"]]
    expected += [s["title"] for s in view["strips"]]
    expected += [t["detail"]["text"] for t in view["ended"]] + [view["ended_title"]]
    positions = [html.find(panel_html.esc(label)) for label in expected]
    assert -1 not in positions
    titles = [html.find(panel_html.esc(g["title"])) for g in view["groups"]]
    assert titles == sorted(titles)
    pools = panel_html.pools_html(view)
    states = [
        pools.find(f">{panel_html.esc(w['label']['text'])}<")
        for p in view["pools"]
        for w in p["workers"]
    ]
    assert -1 not in states and states == sorted(states)


# -- what ticks, what waits for a pool, the timeline, the filters -----------------------------


def test_every_duration_shown_ticks_from_a_moment_of_the_schedulers_clock():
    view = snapshot_view(ended_strips_and_dashboard(), NOW)
    later = snapshot_view(ended_strips_and_dashboard(), NOW + 61)
    assert view["now"] == NOW
    running = view["groups"][0]["workers"][0]["running"][0]["waited"]
    assert running == {"text": "9s", "since": NOW - 9, "before": "", "after": ""}
    assert later["groups"][0]["workers"][0]["running"][0]["waited"]["text"] == "1m10s"
    failed = view["ended"][0]["detail"]
    assert failed["text"] == "gpu-box · 0.2s · peak 13.5 MiB · 2s ago"
    assert (failed["before"], failed["since"], failed["after"]) == (
        "gpu-box · 0.2s · peak 13.5 MiB · ",
        NOW - 2,
        " ago",
    )
    # The words are the ticking parts around the duration, whatever the moment.
    for ticking in (running, failed):
        assert (
            ticking["text"]
            == ticking["before"] + duration(NOW - ticking["since"]) + ticking["after"]
        )
    starting, running_worker, retired, _ = snapshot_view(pools_in_every_state(), NOW)["pools"][0][
        "workers"
    ]
    assert starting["label"]["before"] == "starting for "
    assert starting["label"]["after"] == " (SLURM job 17)"
    assert running_worker["label"] == {
        "text": "running",
        "since": None,
        "before": "running",
        "after": "",
    }
    assert retired["label"]["since"] is None


def test_a_task_no_live_worker_runs_waits_for_the_pool_worker_that_starts_for_it():
    waiting = wait("no-capable-worker", lacking=[lack("GPU-A100", 1, 0, on="tcp://w:1")])
    words = "no live worker can ever run it: asks GPU-A100=1; the most any worker has is 0"
    # names compared in any case (resource_key)
    queued = task("fit-1", "queued", None, 5, request={"gpu": 1, "GPU-A100": 1}, wait=waiting)
    odd = task("odd-1", "queued", None, 5, request={"TPU": 1}, wait=waiting)
    a100 = pool("k1", "a100", "local", 1, 1, pool_worker("a100-1", "starting", 3, started="pid 7"))
    snap = snapshot(
        [worker("cpu", "tcp://w:1", [use("threads", 2)])], queue=[queued, odd], pools=[a100]
    )
    fit, other = snapshot_view(snap, NOW)["waiting"]
    assert fit["waiting_for"] == "starting a worker of pool a100 (pid 7)"
    assert other["waiting_for"] == words  # no pool has a TPU: it is as the scheduler says
    a100["workers"] = []
    a100["waiting"] = 0  # nothing starts and nothing is claimed: no pool will run it
    assert snapshot_view(snap, NOW)["waiting"][0]["waiting_for"] == words


def test_the_timeline_shows_each_workers_tasks_of_the_last_minutes_coloured_by_cell():
    snap = ended_strips_and_dashboard()
    view = snapshot_view(snap, NOW)
    timeline = view["timeline"]
    assert timeline["seconds"] == TIMELINE_SECONDS
    # By name: gpu-box is connected; the other worker is gone, named by its address.
    assert [r["worker"] for r in timeline["rows"]] == ["gpu-box", "tcp://10.9.9.9:1"]
    gpu_box = timeline["rows"][0]["spans"]
    assert [(s["name"], s["state"]) for s in gpu_box] == [
        ("stop", "cancelled"),
        ("hold", "running"),
        ("quick-3", "finished"),  # no name: its key
        ("bad", "failed"),
    ]
    stop = gpu_box[0]
    assert (stop["start"], stop["end"]) == (NOW - 30 - 59.99, NOW - 30)
    assert stop["title"] == "stop · cancelled · 59.9s"
    assert gpu_box[1]["end"] is None and gpu_box[1]["start"] == NOW - 9
    # fit-2 ran 4000 s and ended 75 s ago: it is shown from before the window; never-4 never
    # ran and ended an hour ago: not shown.
    assert [s["name"] for s in timeline["rows"][1]["spans"]] == ["fit"]
    assert {c["name"]: c["color"] for c in timeline["cells"]} == {
        name: cell_color(name) for name in ("bad", "fit", "hold", "quick-3", "stop")
    }
    assert all(0 <= c["color"] < len(CELL_PALETTE) for c in timeline["cells"])
    assert cell_color("stop") == cell_color("stop")
    assert snapshot_view(empty(), NOW)["timeline"]["note"] == "No task ran in the last 5 min."
    assert snapshot_view(ended_strips_and_dashboard(), NOW + 2 * TIMELINE_SECONDS)["timeline"][
        "rows"
    ] == [{"worker": "gpu-box", "address": "tcp://127.0.0.1:4001", "spans": [gpu_box[1]]}]


def test_the_ended_tasks_can_be_filtered_by_cell_worker_and_state():
    view = snapshot_view(ended_strips_and_dashboard(), NOW)
    assert [t["worker"] for t in view["ended"]] == [
        "gpu-box",
        "tcp://10.9.9.9:1",
        "gpu-box",
        "never started",
        "gpu-box",
    ]
    assert view["ended_filters"] == {
        "cells": ["bad", "fit", "never", "quick-3", "stop"],
        "workers": ["gpu-box", "never started", "tcp://10.9.9.9:1"],
        "states": ["cancelled", "failed", "finished"],
    }


def test_the_panel_draws_the_timeline_with_a_legend_of_cells():
    view = snapshot_view(ended_strips_and_dashboard(), NOW)
    html = panel_html.timeline_html(view)
    assert "Timeline, last 5 min" in html
    assert html.count(CELL_PALETTE[cell_color("stop")]) >= 2  # its bar and its legend swatch
    assert panel_html.esc("stop · cancelled · 59.9s") in html
    assert "No task ran" in panel_html.timeline_html(snapshot_view(empty(), NOW))
