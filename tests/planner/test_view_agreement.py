"""The panel and the sidebar show a snapshot alike: same groups, same order, same words.

The Python view (:mod:`taskcell.planner.view`) of each snapshot below is written to
``labextension/test/view-cases.json``; ``labextension/test/view.test.ts`` checks that the
sidebar's ``view.ts`` computes the very same record, and that the sidebar's DOM shows it. The
first test here fails when the file no longer matches the Python (regenerate it with
``python tests/planner/test_view_agreement.py``); the last runs the TypeScript side.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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
from taskcell.planner.view import snapshot_view
from taskcell.widgets import render

LABEXTENSION = Path(__file__).resolve().parents[2] / "labextension"
CASES = LABEXTENSION / "test" / "view-cases.json"
NOW = 1_000_000.0
GiB = 1 << 30


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
        waiting_for=None,
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
        task("anon-1", "assigned", address, 10, name="", request={}, waiting_for="a thread"),
        task("etl-b", "assigned", address, 30, request={"memory": 1.125 * GiB, "DISK": 102912}),
    ]
    queued = [
        task("big-1", "queued", None, 61, request={"GPU": 4}, waiting_for="no live worker"),
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


def cases() -> dict:
    """Every case with its Python view, as the JSON file holds them."""
    snaps = {
        f.__name__: f()
        for f in (
            the_e2e_cluster,
            groups_and_folds,
            amounts_and_queue,
            ended_strips_and_dashboard,
            pools_in_every_state,
            empty,
        )
    }
    return {
        "now": NOW,
        "cases": [
            {"name": name, "snapshot": snap, "view": snapshot_view(snap, NOW)}
            for name, snap in snaps.items()
        ],
    }


def text() -> str:
    return json.dumps(cases(), indent=1, ensure_ascii=False) + "\n"


def test_the_cases_file_holds_the_python_view():
    assert CASES.read_text() == text(), "stale: run python tests/planner/test_view_agreement.py"


@pytest.mark.parametrize("case", cases()["cases"], ids=lambda c: c["name"])
def test_the_panel_draws_the_groups_workers_and_labels_in_order(case):
    view = case["view"]
    html = render.workers_html(view) + render.totals_html(view) + render.queue_html(view)
    html += render.ended_html(view) + render.pools_html(view)
    expected = [g["title"] for g in view["groups"]]
    expected += [p["title"] for p in view["pools"]] + [p["shape"] for p in view["pools"]]
    expected += [p["detail"] for p in view["pools"]]
    expected += [w["label"] for p in view["pools"] for w in p["workers"]]
    expected += [w["name"] for g in view["groups"] for w in g["workers"]]
    expected += [b["label"] for b in view["totals"]]
    expected += [s["title"] for s in view["strips"]]
    expected += [t["detail"] for t in view["ended"]] + [view["ended_title"]]
    positions = [html.find(render.esc(label)) for label in expected]
    assert -1 not in positions
    titles = [html.find(render.esc(g["title"])) for g in view["groups"]]
    assert titles == sorted(titles)
    pools = render.pools_html(view)
    states = [
        pools.find(f">{render.esc(w['label'])}<") for p in view["pools"] for w in p["workers"]
    ]
    assert -1 not in states and states == sorted(states)


def test_the_sidebar_computes_and_shows_the_same_view():
    npm = shutil.which("npm")
    vitest = LABEXTENSION / "node_modules" / ".bin" / "vitest"
    if npm is None or not vitest.exists():
        pytest.skip("needs Node.js and labextension/node_modules (`pip install -e .`)")
    done = subprocess.run(
        [str(vitest), "run", "test/view.test.ts"],
        cwd=LABEXTENSION,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
    assert done.returncode == 0, output


if __name__ == "__main__":
    CASES.write_text(text())
    sys.exit(0)
