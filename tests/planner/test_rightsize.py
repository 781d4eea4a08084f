"""Right-sizing from measured use, and ``--preset auto``."""

from __future__ import annotations

from typing import get_type_hints

import pytest

from taskcell.errors import SpecError
from taskcell.planner import auto_preset, latest_hints, review
from taskcell.planner.rightsize import Hint
from taskcell.planner.schema import HintInfo
from taskcell.runner.history import TaskRecord
from taskcell.runner.job import Usage
from taskcell.spec import BUILTIN_PRESETS, Resources

GiB = 1 << 30


def record(cell, request, peak, cores=1.0, wall=10.0, state="finished", key=None, source=None):
    r = TaskRecord(key=key or f"{cell}-key", cell=cell, request=request)
    r.finish(state, Usage(wall=wall, cpu=cores * wall, peak_memory=int(peak)))
    if source is not None:
        r.source = source  # what the runner records once it keeps cell sources
    return r


def test_memory_asked_far_more_than_used():
    r = record("train", Resources(cpu=32, memory="128Gi"), peak=3 * GiB, cores=1.5)
    (memory, cpu) = review([r], BUILTIN_PRESETS)
    assert (memory.kind, memory.resource) == ("over-requested", "memory")
    assert memory.requested == 128 * GiB and memory.used == 3 * GiB
    assert "peaked at 3 GiB (2%)" in memory.message
    assert memory.preset == "small_task" and memory.line == "%%task small_task"
    assert (cpu.kind, cpu.resource, cpu.preset) == ("over-requested", "cpu", "small_task")
    assert "kept 1.50 busy (5%)" in cpu.message


def test_a_sleeping_task_is_told_the_fewest_cores_not_a_same_size_preset():
    r = record("nap", Resources(cpu=2), peak=50 << 20, cores=0.001, wall=3)
    (hint,) = review([r], BUILTIN_PRESETS)  # small_task has 2 cores too: no help
    assert (hint.preset, hint.line) == (None, "%%task --cpu 1")
    assert "fewer cores would have done" in hint.message
    one = record("nap", Resources(cpu=1), peak=50 << 20, cores=0.001, wall=3)
    assert review([one], BUILTIN_PRESETS) == []


def test_memory_near_its_limit_suggests_room():
    r = record("join", Resources(cpu=2, memory="4Gi"), peak=3.8 * GiB, cores=1.0)
    (hint,) = review([r], BUILTIN_PRESETS)
    assert (hint.kind, hint.resource) == ("near-limit", "memory")
    assert "95% of its 4 GiB memory limit" in hint.message
    assert hint.preset == "medium_task"  # 3.8 GiB plus a quarter no longer fits small_task


def test_a_range_is_judged_against_its_limit():
    r = record("grow", Resources(cpu=2, memory=("2Gi", "4Gi")), peak=3 * GiB, cores=1.0)
    assert review([r], BUILTIN_PRESETS) == []


def test_cpu_bound_task_is_told_more_cores_and_never_more_memory():
    r = record("crunch", Resources(cpu=2, memory="4Gi"), peak=2 * GiB, cores=1.97)
    (hint,) = review([r], BUILTIN_PRESETS)
    assert (hint.kind, hint.resource) == ("near-limit", "cpu")
    # medium_task has 32 cores but 128 GiB: no Latch preset adds cores without memory.
    assert hint.preset is None and hint.line == "%%task --cpu 3 --memory 4Gi"
    assert "CPU-bound" in hint.message and "with no more memory" in hint.message
    ladder = {
        "c2": Resources(cpu=2, memory="4Gi"),
        "c4": Resources(cpu=4, memory="4Gi"),
        "c4-big": Resources(cpu=4, memory="16Gi"),
        "c8": Resources(cpu=8, memory="2Gi"),
    }
    (hint,) = review([r], ladder)
    assert hint.preset == "c4"  # the fewest cores over 2 with no more than 4 GiB


def test_a_run_whose_peak_was_not_measured_still_gets_its_cores_hint():
    # Where the platform cannot tell a cell's peak apart, the run records none: it can say
    # nothing about memory, but its cores were measured (this raised TypeError before).
    r = TaskRecord(key="k", cell="crunch", request=Resources(cpu=2))
    r.finish("finished", Usage(wall=10.0, cpu=19.7, peak_memory=None))
    (hint,) = review([r], BUILTIN_PRESETS)
    assert (hint.kind, hint.resource) == ("near-limit", "cpu")
    assert hint.line == "%%task --cpu 3"
    assert latest_hints([r], BUILTIN_PRESETS) == [hint]


def test_one_busy_core_of_one_asked_is_no_cpu_hint():
    serial = record("loop", Resources(cpu=1, memory="4Gi"), peak=3 * GiB, cores=0.99)
    assert review([serial], BUILTIN_PRESETS) == []
    threaded = record("blas", Resources(cpu=1, memory="4Gi"), peak=3 * GiB, cores=1.9)
    (hint,) = review([threaded], BUILTIN_PRESETS)  # more than its one core: it is parallel
    assert (hint.kind, hint.resource) == ("near-limit", "cpu")


def test_over_requested_memory_names_the_smallest_rung_with_its_margin():
    ladder = {
        name: Resources(cpu=1, memory=name.removeprefix("m"))
        for name in ("m256Mi", "m512Mi", "m1Gi", "m2Gi", "m4Gi", "m8Gi")
    }
    r = record("small", Resources(cpu=1, memory="8Gi"), peak=205 << 20, cores=0.5)
    (hint,) = review([r], ladder)
    # 205 MiB with 25% to spare is 256.25 MiB: the 512 MiB rung, not 256Mi and never m4Gi.
    assert (hint.kind, hint.preset, hint.line) == ("over-requested", "m512Mi", "%%task m512Mi")
    assert "m512Mi (512 MiB) is the smallest that holds that with 25% to spare" in hint.message


def test_well_sized_short_failed_and_unrequested_tasks_say_nothing():
    records = [
        record("fine", Resources(cpu=2, memory="4Gi"), peak=2 * GiB, cores=1.2),
        record("short", Resources(cpu=32, memory="8Gi"), peak=4 * GiB, cores=0.1, wall=0.2),
        record("failed", Resources(memory="128Gi"), peak=1 * GiB, state="error"),
        record("plain", Resources(), peak=10 * GiB, cores=4),
    ]
    assert review(records, BUILTIN_PRESETS) == []


def test_gpu_tasks_keep_their_gpus():
    r = record("fit", Resources(cpu=8, memory="32Gi", gpu=1), peak=1 * GiB, cores=1.0)
    hints = review([r], BUILTIN_PRESETS)
    assert {h.preset for h in hints} == {"g6e_xlarge_task"}
    assert hints[0].to_dict()["line"] == "%%task g6e_xlarge_task"


def test_a_hint_has_the_fields_of_its_json_record():
    """Hint and HintInfo are one record a type checker cannot derive: kept equal here."""
    assert list(get_type_hints(Hint).items()) == list(get_type_hints(HintInfo).items())


def test_auto_without_input_sizes_holds_the_highest_peak():
    history = [
        record("etl", Resources(cpu=32, memory="128Gi"), peak=2 * GiB, cores=1.0),
        record("other", Resources(cpu=2, memory="4Gi"), peak=100 * GiB, cores=30),
        record("etl", Resources(cpu=32, memory="128Gi"), peak=3.5 * GiB, cores=1.8),
    ]
    choice = auto_preset(history, name="etl", presets=BUILTIN_PRESETS)
    assert choice.basis == "history"
    assert choice.preset == "medium_task"  # 3.5 GiB plus a quarter is over small_task's 4 GiB
    assert "2 past runs of this cell peaked at 3.5 GiB" in choice.reason


def test_auto_matches_by_source_when_the_name_differs():
    history = [record("cell-3", Resources(cpu=2, memory="4Gi"), peak=1 * GiB, source="x = f()")]
    choice = auto_preset(history, name="cell-9", source="x = f()", presets=BUILTIN_PRESETS)
    assert (choice.basis, choice.preset) == ("history", "small_task")


def test_auto_without_history_asks_the_planner():
    choice = auto_preset([], name="new", inputs_size="10 GiB", presets=BUILTIN_PRESETS)
    assert choice.basis == "planner"
    assert choice.preset == "medium_task"
    assert choice.request == BUILTIN_PRESETS["medium_task"].override(Resources(disk="10Gi"))
    assert "no past run of this cell" in choice.reason


def test_auto_custom_request_when_no_preset_holds_it():
    history = [record("huge", Resources(memory="900Gi"), peak=800 * GiB, cores=1)]
    choice = auto_preset(history, name="huge", presets=BUILTIN_PRESETS)
    assert choice.preset is None
    assert choice.request == Resources(cpu=1, memory="1000Gi")


def test_auto_refuses_what_the_platform_cannot_run():
    import dask

    with dask.config.set({"taskcell.platform": "latch"}), pytest.raises(SpecError, match="auto"):
        auto_preset([], inputs_size="1 PiB", presets=BUILTIN_PRESETS)


@pytest.mark.parametrize(
    ("nbytes", "request_"),
    [
        (1, "256Mi"),
        (18 << 20, "256Mi"),
        (256 << 20, "256Mi"),
        ((256 << 20) + 1, "512Mi"),
        (600 << 20, "1Gi"),
        (GiB + 1, "2Gi"),
        (int(17.2 * GiB), "18Gi"),
    ],
    ids=["a-byte", "18Mi", "256Mi", "just-over-256Mi", "600Mi", "just-over-1Gi", "17.2Gi"],
)
def test_memory_is_suggested_as_people_ask_for_it(nbytes, request_):
    from taskcell.planner.suggestion import round_up
    from taskcell.spec import format_quantity

    assert format_quantity(round_up(nbytes)) == request_


def test_a_tiny_peak_is_told_256Mi_and_never_a_request_no_smaller_than_asked():
    r = record("tiny", Resources(cpu=1, memory="2Gi"), peak=14 << 20, cores=0.5)
    (hint,) = review([r], {})
    assert hint.line == "%%task --cpu 1 --memory 256Mi"
    already = record("tiny", Resources(cpu=1, memory="256Mi"), peak=14 << 20, cores=0.5)
    assert review([already], {}) == []


def test_a_preset_no_smaller_than_the_request_is_never_the_hint():
    # small_task asks for 4 GiB too: the hint is the custom line that asks for less.
    r = record("tiny", Resources(memory="4Gi"), peak=24 << 20, cores=0.5)
    (hint,) = review([r], BUILTIN_PRESETS)
    assert (hint.preset, hint.line) == (None, "%%task --memory 256Mi")


def test_latest_hints_are_one_per_cell_from_its_latest_run_and_bounded():
    big = Resources(cpu=32, memory="128Gi")
    history = [
        record("etl", big, peak=3 * GiB, cores=1.5, key="etl-1"),
        record("etl", big, peak=2 * GiB, cores=1.0, key="etl-2"),
        record("fixed", big, peak=3 * GiB, cores=1.5, key="fixed-1"),
        record("fixed", Resources(cpu=2, memory="4Gi"), peak=2 * GiB, cores=1.2, key="fixed-2"),
        record("etl", big, peak=1 * GiB, state="error", key="etl-3"),
    ]
    history += [record(f"c{i}", big, peak=GiB, key=f"c{i}") for i in range(12)]
    hints = latest_hints(history, BUILTIN_PRESETS)
    assert len(hints) == 10
    assert [h.cell for h in hints] == [f"c{i}" for i in range(11, 1, -1)]
    (etl,) = latest_hints(history[:5], BUILTIN_PRESETS)  # "fixed" ran well last time
    assert etl.key == "etl-2"  # the latest finished run; the failed one says nothing
    assert "peaked at 2 GiB" in etl.message and "kept 1.00 busy" in etl.message
    assert etl.line == "%%task small_task"
