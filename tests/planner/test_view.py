"""How a snapshot is shown: amounts, grouping, order and the words, on the Python side.

tests/planner/test_view_agreement.py holds the sidebar to the same answers.
"""

from __future__ import annotations

import pytest

from taskcell.planner.amounts import show_amount, show_bytes, significant
from taskcell.planner.view import duration, request_label, snapshot_view

from .test_view_agreement import (
    NOW,
    groups_and_folds,
    pools_in_every_state,
    snapshot,
    task,
    use,
    worker,
)

GiB = 1 << 30


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
    assert first["workers"][0]["running"][0]["waited"] == "1m15s"
    assert first["workers"][0]["waiting"] == "1 waiting"


def test_waiting_lists_queued_then_assigned_oldest_first_and_counts_the_rest():
    address = "tcp://w:1"
    tasks = [task("late-1", "assigned", address, 5), task("early-1", "assigned", address, 50)]
    queued = [task("big-1", "queued", None, 1, waiting_for="no live worker")]
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
    labels = [w["label"] for pool in (first, cpu, second) for w in pool["workers"]]
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
