"""What a task waits for: every code has words, written once, and the cell's status line, the
notebook panel and the sidebar's payload say the same words for the same wait."""

from __future__ import annotations

from types import SimpleNamespace
from typing import get_args

import pytest

from taskcell.cluster.waits import Wait, WaitCode, lack, wait, wait_words
from taskcell.extension.sidebar_view import cluster_view
from taskcell.planner.schema import PoolInfo, PoolWorker, Snapshot, TaskInfo
from taskcell.planner.view import snapshot_view
from taskcell.runner import cell_task
from taskcell.widgets import panel_html

NOW = 1_000_000.0
GiB = 1 << 30

#: One wait of each code, with the numbers its words use, and those words.
SAMPLES: dict[WaitCode, tuple[Wait, str]] = {
    "submitted": (wait("submitted"), "submitted"),
    "inputs": (wait("inputs", count=1), "waiting for 1 input to be computed"),
    "free-thread": (
        wait("free-thread"),
        "queued on the scheduler until a worker has a free thread",
    ),
    "no-worker": (wait("no-worker"), "no worker is connected to the scheduler"),
    "restricted": (
        wait("restricted"),
        "restricted to workers or hosts that are not connected",
    ),
    "no-capable-worker": (
        wait(
            "no-capable-worker",
            lacking=[lack("GPU", 4, 2, on="tcp://w:1"), lack("FPGA", 1, 0, on="tcp://w:1")],
        ),
        "no live worker can ever run it: asks GPU=4; the most any worker has is 2, on "
        "tcp://w:1; asks FPGA=1; the most any worker has is 0",
    ),
    "not-together": (
        wait("not-together", request={"GPU": 1, "MEMORY": 64 * GiB}),
        "no single live worker has GPU=1, MEMORY=64 GiB together",
    ),
    "capable-busy": (
        wait("capable-busy", count=1, seconds=5.4, request={"GPU": 2}),
        "waiting 5 s for GPU=2: 1 capable worker, all busy",
    ),
    "worker-resources": (
        wait("worker-resources", lacking=[lack("MEMORY", 4 * GiB, 8 * GiB, held=6 * GiB)]),
        "waiting on this worker for MEMORY=4 GiB (6 GiB of 8 GiB held by running tasks)",
    ),
    "worker-thread": (
        wait("worker-thread", count=2, total=2),
        "waiting on this worker for a free thread (2 of 2 busy)",
    ),
    "worker-starting": (wait("worker-starting"), "starting"),
    "pool-starting": (
        wait("pool-starting", pool="a100x2", where="SLURM job 17", seconds=12.2),
        "starting a worker of pool a100x2 (SLURM job 17): 12 s",
    ),
    "pool-busy": (
        wait("pool-busy", pool="a100x2", count=2, total=2),
        "waiting for a worker of pool a100x2: all 2 busy (max-workers 2)",
    ),
    "pool-queued": (
        wait("pool-queued", pool="a100x2", where="tcp://10.0.4.1:1"),
        "queued on tcp://10.0.4.1:1, a worker of pool a100x2",
    ),
}


def test_every_code_has_a_sample_and_words():
    assert set(SAMPLES) == set(get_args(WaitCode))
    words = [wait_words(w) for w, _ in SAMPLES.values()]
    assert len(set(words)) == len(words)
    assert all(w and "None" not in w for w in words)


@pytest.mark.parametrize(("code"), list(SAMPLES), ids=list(SAMPLES))
def test_each_wait_reads_as_written_once(code: WaitCode):
    waited, words = SAMPLES[code]
    assert wait_words(waited) == words


def test_a_pool_starting_without_a_clock_or_a_name_for_what_started():
    assert wait_words(wait("pool-starting", pool="p")) == "starting a worker of pool p"


def queued(waited: Wait) -> TaskInfo:
    return TaskInfo(
        key="big-1",
        name="big",
        request={"GPU": 4},
        state="queued",
        since=NOW - 5,
        worker=None,
        wait=waited,
    )


def snapshot(tasks: list[TaskInfo], pools: list[PoolInfo] = ()) -> Snapshot:
    return Snapshot(
        scheduler="tcp://s:1",
        time=NOW,
        seq=1,
        workers=[],
        totals=[],
        queue=tasks,
        queued=len(tasks),
        recent=[],
        strips=[],
        dashboard=None,
        pools=list(pools),
    )


def status_line(waited: Wait, monkeypatch: pytest.MonkeyPatch) -> str:
    """The cell's status line while the provisioner says its task waits for ``waited``."""
    monkeypatch.setattr(cell_task, "live_workers", lambda client, **kwargs: [])
    monkeypatch.setattr(cell_task, "waiting_status", lambda client, key: waited)
    sub = SimpleNamespace(attempts=[], job=SimpleNamespace(key="big-1"))
    return cell_task._status(SimpleNamespace(), sub, 5.0)  # type: ignore[arg-type]


@pytest.mark.parametrize(("code"), list(SAMPLES), ids=list(SAMPLES))
def test_the_status_line_the_panel_and_the_sidebar_say_the_same(code, monkeypatch):
    waited, words = SAMPLES[code]
    snap = snapshot([queued(waited)])
    assert status_line(waited, monkeypatch) == words
    assert panel_html.esc(words) in panel_html.queue_html(snapshot_view(snap, NOW))
    assert cluster_view(snap, {}, NOW, None)["waiting"][0]["waiting_for"] == words


def test_the_view_decides_a_pool_wait_from_the_code_not_the_words():
    worker = PoolWorker(
        name="a100-1",
        state="starting",
        started="pid 7",
        address=None,
        since=NOW - 3,
        idle_since=None,
        error=None,
    )
    pool = PoolInfo(
        kernel="k",
        name="a100",
        backend="local",
        resources={"GPU": 4},
        max_workers=1,
        waiting=1,
        launched=1,
        workers=[worker],
    )
    no_gpu4 = SAMPLES["no-capable-worker"][0]
    snap = snapshot([queued(no_gpu4)], [pool])
    starting = wait("pool-starting", pool="a100", where="pid 7")
    shown = cluster_view(snap, {}, NOW, None)["waiting"][0]["waiting_for"]
    assert shown == wait_words(starting) == "starting a worker of pool a100 (pid 7)"
    assert panel_html.esc(shown) in panel_html.queue_html(snapshot_view(snap, NOW))
    # another code, even with the same words, is not a wait a pool ends
    busy = wait("not-together", request={"GPU": 4})
    snap = snapshot([queued(busy)], [pool])
    assert snapshot_view(snap, NOW)["waiting"][0]["waiting_for"] == wait_words(busy)
