"""The panel's HTML, from snapshot views: bars, groups of identical workers, the queue, escaping.

Grouping, order and wording are :mod:`taskcell.planner.view`'s (tested in tests/planner); these
tests check that the panel draws them.
"""

from __future__ import annotations

import re

from taskcell.cluster.waits import Wait, lack, wait
from taskcell.planner.schema import (
    EndedTask,
    PoolInfo,
    PoolWorker,
    ResourceUse,
    Snapshot,
    TaskInfo,
    UsageStrip,
    WorkerSnapshot,
)
from taskcell.planner.view import bar_view, snapshot_view
from taskcell.widgets import panel_html

NOW = 1_000_000.0
#: What a task asking for four GPUs waits for on a cluster whose workers have two at most.
NO_GPU4 = wait("no-capable-worker", lacking=[lack("GPU", 4, 2, on="tcp://10.0.0.1:8786")])


def use(resource: str, total: float, running: float = 0, assigned: float = 0) -> ResourceUse:
    return ResourceUse(resource=resource, total=total, running=running, assigned=assigned)


def task(name: str, state: str, worker: str | None, why: Wait | None = None) -> TaskInfo:
    return TaskInfo(
        key=f"{name}-0123",
        name=name,
        request={"GPU": 1},
        state=state,  # type: ignore[typeddict-item]
        since=NOW - 75,
        worker=worker,
        wait=why,
    )


def worker(i: int, gpus: int = 2, running: int = 0, assigned: int = 0) -> WorkerSnapshot:
    address = f"tcp://10.0.{i // 250}.{i % 250}:8786"
    tasks = [task(f"train-{i}-{j}", "running", address) for j in range(running)]
    held = wait("worker-resources", lacking=[lack("GPU", 1, gpus, held=gpus)])
    tasks += [task(f"wait-{i}-{j}", "assigned", address, held) for j in range(assigned)]
    return WorkerSnapshot(
        address=address,
        name=f"w{i:03d}",
        nthreads=4,
        memory_limit=0,
        resources=[use("threads", 4, running, assigned), use("GPU", gpus, running, assigned)],
        tasks=tasks,
        running_tasks=running,
        assigned_tasks=assigned,
    )


def snapshot(workers: list[WorkerSnapshot], queue: list[TaskInfo] = ()) -> Snapshot:
    return Snapshot(
        scheduler="tcp://10.0.0.1:8786",
        time=NOW,
        seq=7,
        workers=workers,
        totals=[use("GPU", sum(2 for _ in workers), 3, 1)],
        queue=list(queue),
        queued=len(queue),
        recent=[],
        strips=[],
        dashboard=None,
        pools=[],
    )


def view(workers: list[WorkerSnapshot], queue: list[TaskInfo] = ()):
    return snapshot_view(snapshot(workers, queue), NOW)


def test_bar_tells_running_from_assigned():
    html = panel_html.bar(bar_view(use("GPU", 4, 1, 2)))
    assert "width:25%" in html  # running: 1 of 4
    assert "left:25%;width:50%" in html  # assigned: 2 more, hatched
    assert "1 of 4 GPU in use, 2 waiting" in html
    assert "1 of 4 held by running tasks, 2 asked for by tasks waiting" in html


def test_bar_never_overflows_and_shows_bytes():
    html = panel_html.bar(bar_view(use("MEMORY", 8 << 30, 6 << 30, 10 << 30)))
    assert "width:75%" in html and "left:75%;width:25%" in html
    assert "6 GiB of 8 GiB MEMORY in use, 10 GiB waiting" in html
    assert "width:0%" in panel_html.bar(bar_view(use("GPU", 0, 0, 0)))


def test_two_hundred_workers_fold_into_groups():
    workers = [
        worker(i, running=1 if i < 3 else 0, assigned=1 if i == 0 else 0) for i in range(150)
    ]
    workers += [worker(150 + i, gpus=8) for i in range(50)]
    html = panel_html.workers_html(view(workers))
    assert "150 workers with threads 4, GPU 2 · 3 busy" in html
    assert "50 workers with threads 4, GPU 8 · 0 busy" in html
    assert "147 idle: w003, w004" in html and "50 idle: w150" in html
    # One row per busy worker, not one per worker: 2 group titles, 2 headers, 3 busy, 2 folds.
    assert html.count("<tr>") == 9
    assert "train-0-0 <span class='tcw-soft'>GPU=1 · 1m15s</span>" in html
    assert "1 waiting" in html
    assert len(html) < 20_000


def test_small_groups_list_every_worker():
    html = panel_html.workers_html(view([worker(1), worker(2, running=1)]))
    assert "w001" in html and "w002" in html and "idle" in html
    assert html.index("w002") < html.index("w001")  # busy first


def test_queue_lists_queued_then_assigned_with_reasons():
    queued = task("big", "queued", None, NO_GPU4)
    html = panel_html.queue_html(view([worker(1, running=1, assigned=1)], [queued]))
    rows = re.findall(r"<tr><td title='[^']*'>([^<]*)</td>", html)
    assert rows == ["big", "wait-1-0"]
    assert "no live worker can ever run it: asks GPU=4" in html
    assert "waiting on this worker for GPU=1 (2 of 2 held by running tasks)" in html
    assert "queued" in html and "on tcp://10.0.0.1:8786" in html
    assert "<b>Waiting: 2</b>" in html
    assert panel_html.queue_html(view([worker(1)])).endswith("Nothing waits.</div>")


def test_everything_from_the_cluster_is_escaped():
    w = worker(1, running=1)
    w["name"] = "<img src=x onerror=alert(1)>"
    w["tasks"][0]["name"] = "<b>x</b>"
    html = panel_html.workers_html(view([w])) + panel_html.queue_html(view([w]))
    assert "<img" not in html and "<b>x</b>" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_totals_and_counts():
    html = panel_html.totals_html(view([worker(1, running=1, assigned=1), worker(2)]))
    assert "2 workers · 1 running · 1 waiting on workers · 0 queued" in html
    assert "<b>GPU</b>" in html


def test_no_worker():
    assert "No worker is connected to the scheduler." in panel_html.workers_html(view([]))


def ended(name: str, state: str, **extra) -> EndedTask:
    record = EndedTask(
        key=f"{name}-0123",
        name=name,
        request={"GPU": 1},
        state=state,  # type: ignore[typeddict-item]
        worker="tcp://10.0.0.1:8786",
        ended=NOW - 12,
        wall=4.25,
        peak_memory=14 << 20,
        error=None,
    )
    record.update(extra)  # type: ignore[typeddict-item]
    return record


def test_ended_tasks_say_how_where_how_long_and_why():
    snap = snapshot([worker(1)])
    snap["recent"] = [
        ended("<b>bad</b>", "failed", error="ValueError: <bad> batch"),
        ended("fit", "finished"),
    ]
    html = panel_html.ended_html(snapshot_view(snap, NOW))
    assert "<b>Ended: 2</b>" in html
    assert "&lt;b&gt;bad&lt;/b&gt;" in html and "ValueError: &lt;bad&gt; batch" in html
    assert "w001 · 4.2s · peak 14 MiB · 12s ago" in html
    assert html.index("bad") < html.index("fit")
    assert panel_html.ended_html(view([worker(1)])).endswith("Nothing has ended yet.</div>")


def test_totals_have_a_legend_a_strip_per_resource_and_the_dashboard():
    snap = snapshot([worker(1, running=1)])
    snap["strips"] = [UsageStrip(resource="GPU", start=NOW - 5, shares=[0.5, 1.0])]
    snap["dashboard"] = "http://10.0.0.1:8787/status?a=1&b=2"
    html = panel_html.totals_html(snapshot_view(snap, NOW))
    assert "running" in html and "assigned, waiting on the worker" in html
    assert html.count("class='tcw-strip'") == 1
    assert "height:50%" in html and "height:100%" in html
    assert "GPU over the last 5 min: at most 100% held by running tasks" in html
    assert "href='http://10.0.0.1:8787/status?a=1&amp;b=2'" in html
    assert "Dask dashboard" not in panel_html.totals_html(view([worker(1)]))


def test_the_cancel_control_offers_running_then_waiting_tasks():
    queued = task("big", "queued", None, NO_GPU4)
    choices = panel_html.live_tasks(view([worker(1, running=1, assigned=1)], [queued]))
    assert choices == [
        ("train-1-0 · running on tcp://10.0.0.1:8786", "train-1-0-0123"),
        ("big · queued", "big-0123"),
        ("wait-1-0 · waiting on tcp://10.0.0.1:8786", "wait-1-0-0123"),
    ]


def test_pools_show_each_worker_with_its_state_and_nothing_without_pools():
    assert panel_html.pools_html(view([worker(1)])) == ""
    workers = [
        PoolWorker(name="<b>p-1</b>", state="starting", started="pid 42", address=None,
                   since=NOW - 12, idle_since=None, error=None),
        PoolWorker(name="p-2", state="failed", started="", address=None, since=NOW,
                   idle_since=None, error="its process exited with status <1>"),
    ]  # fmt: skip
    snap = snapshot([worker(1)])
    snap["pools"] = [
        PoolInfo(kernel="k", name="p", backend="local", resources={"GPU": 1}, max_workers=2,
                 waiting=1, workers=workers)
    ]  # fmt: skip
    html = panel_html.pools_html(snapshot_view(snap, NOW))
    assert "<b>Pools: 1</b>" in html and "p · local" in html
    assert "GPU=1 · 1 of 2 workers · 1 task waiting" in html
    assert "&lt;b&gt;p-1&lt;/b&gt;" in html and "<b>p-1" not in html
    assert "class='tcw-wrap tcw-assigned'>starting for 12s (pid 42)<" in html
    assert "class='tcw-wrap tcw-failed'>failed: its process exited with status &lt;1&gt;<" in html
