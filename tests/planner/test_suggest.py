"""The planner: smallest preset for a size and a profile, over Latch's catalogue."""

from __future__ import annotations

import dataclasses
import json

import dask
import pandas as pd
import pytest

from taskcell.cluster.mapping import WorkerCapacity
from taskcell.errors import SpecError
from taskcell.planner import describe_profile, get_profile, profile_names, suggest
from taskcell.planner.schema import SuggestionInfo
from taskcell.planner.suggestion import Suggestion
from taskcell.spec import BUILTIN_PRESETS

GiB = 1 << 30


def boundary_cases(profile: str, table: list[tuple[str, int, str | None]]):
    """(size, expected) at, just under and just over each preset's memory boundary: the
    profile's base memory plus its factor times the input."""
    p = get_profile(profile)
    for preset, memory_gib, above in table:
        edge = (memory_gib * GiB - p.base_memory) // int(p.memory_per_byte)
        yield pytest.param(profile, edge - 1, preset, id=f"{profile}-under-{preset}")
        yield pytest.param(profile, edge, preset, id=f"{profile}-at-{preset}")
        yield pytest.param(profile, edge + 1, above, id=f"{profile}-over-{preset}")


# Each preset the profile can get, cheapest first (cores, then memory, then GPUs), with its memory
# and what the next byte of input needs instead.
CPU_TABLE = [
    ("small_task", 4, "medium_task"),
    ("medium_task", 128, "large_task"),
    ("large_task", 192, None),
]
GPU_TABLE = [
    ("g6e_xlarge_task", 32, "g6e_2xlarge_task"),  # small_gpu_task also has 32Gi but 8 cores
    ("g6e_2xlarge_task", 64, "g6e_4xlarge_task"),  # v100_x1_task has only 64Gi
    ("g6e_4xlarge_task", 128, "g6e_8xlarge_task"),  # large_gpu_task has only 120Gi
    ("g6e_8xlarge_task", 256, "g6e_12xlarge_task"),
    ("g6e_12xlarge_task", 384, "g6e_16xlarge_task"),
    ("g6e_16xlarge_task", 512, "g6e_24xlarge_task"),
    ("g6e_24xlarge_task", 768, None),
]


@pytest.mark.parametrize(
    ("profile", "size", "expected"),
    [
        *boundary_cases("default", CPU_TABLE),
        *boundary_cases("light", CPU_TABLE),
        *boundary_cases("gpu-training", GPU_TABLE),
    ],
)
def test_smallest_preset_at_each_boundary(profile, size, expected):
    s = suggest(size, profile, workers=[], presets=BUILTIN_PRESETS)
    assert s.preset == expected, s.message
    assert s.fits is (expected is not None)
    if expected is not None:
        assert s.line is not None and s.line.startswith(f"%%task {expected}")
        assert BUILTIN_PRESETS[expected].memory.request >= s.memory
    else:
        assert s.message.startswith("No preset fits")


def test_line_adds_scratch_disk_and_reads_back():
    from taskcell.runner.task_line import build_request, parse_task_line

    s = suggest("3 GiB", "default", workers=[], presets=BUILTIN_PRESETS)
    assert s.line == "%%task medium_task --disk 3Gi"  # 12 GiB and a base: not small_task's 4
    parsed = parse_task_line(s.line.removeprefix("%%task "))
    assert build_request(parsed, lambda: BUILTIN_PRESETS, {}, {}) == s.request
    assert suggest("3 GiB", "light", presets=BUILTIN_PRESETS).line == "%%task medium_task"


def test_dataframe_and_glob_inputs(tmp_path):
    df = pd.DataFrame({"x": range(1000)})
    s = suggest(df, presets=BUILTIN_PRESETS)
    assert s.size == int(df.memory_usage(deep=True).sum())
    assert s.preset == "small_task"
    for i in range(3):
        (tmp_path / f"part-{i}.bin").write_bytes(b"\0" * 1000)
    assert suggest(str(tmp_path / "*.bin"), presets=BUILTIN_PRESETS).size == 3000


def test_nothing_fits_offers_the_custom_request():
    s = suggest("1 TiB", presets=BUILTIN_PRESETS)
    assert (s.preset, s.fits) == (None, False)
    assert "No preset fits" in s.message and "large_task" in s.message
    assert s.line == "%%task --memory 4097Gi --disk 1Ti"  # 4x and the 160 MiB base


def test_nothing_fits_even_custom_on_a_platform_with_limits():
    with dask.config.set({"taskcell.platform": "latch"}):
        s = suggest("1 PiB", presets=BUILTIN_PRESETS)
    assert s.line is None and s.request is None
    assert "exceeds latch's maximum" in s.message


def test_cpu_work_never_gets_a_gpu_preset_but_is_told_about_one():
    s = suggest("100 GiB", presets=BUILTIN_PRESETS)  # 400 GiB: only GPU presets hold that
    assert s.preset is None
    assert "g6e_16xlarge_task has the memory, but carries GPUs" in s.message


def test_typed_gpu_profile_matches_only_that_type():
    profiles = {
        "v100-4": {"memory-per-byte": 1, "scratch-per-byte": 0, "gpu": "V100:4"},
        "a100": {"memory_per_byte": 2, "gpu": "A100:1", "description": "big models"},
    }
    with dask.config.set({"taskcell.profiles": profiles}):
        assert suggest("1 GiB", "v100-4", presets=BUILTIN_PRESETS).preset == "v100_x4_task"
        s = suggest("1 GiB", "a100", presets=BUILTIN_PRESETS)
        assert describe_profile("a100") == "big models"
        assert "a100" in profile_names()
    assert s.preset is None
    assert s.line == "%%task --memory 2Gi --gpu A100:1 --disk 1Gi"


def test_live_workers_say_who_can_run_it_and_a_runnable_preset_wins():
    gpu_box = WorkerCapacity(
        address="tcp://10.0.0.1:1",
        name="gpu-box",
        nthreads=8,
        memory_limit=64 * GiB,
        resources={"GPU": 2},
    )
    cpu_box = WorkerCapacity(
        address="tcp://10.0.0.2:1", name="cpu-box", nthreads=2, memory_limit=8 * GiB, resources={}
    )
    s = suggest("1 GiB", "gpu-training", workers=[gpu_box, cpu_box], presets=BUILTIN_PRESETS)
    # g6e_xlarge_task asks for an L40s, which no worker advertises; small_gpu_task asks any GPU.
    assert s.preset == "small_gpu_task"
    assert "g6e_xlarge_task is smaller, but no live worker can run it" in s.message
    assert s.able == ["tcp://10.0.0.1:1"]
    assert "asks GPU=1; this worker has 0" in s.unable["tcp://10.0.0.2:1"]
    assert "1 of 2 live workers can run it (gpu-box)" in str(s)


def test_workers_as_snapshot_records_and_json():
    record = {
        "address": "tcp://10.0.0.3:1",
        "name": "small",
        "nthreads": 1,
        "memory_limit": 2 * GiB,
        "resources": [{"resource": "threads", "total": 1, "running": 0, "assigned": 0}],
        "tasks": [],
        "running_tasks": 0,
        "assigned_tasks": 0,
    }
    s = suggest("900 MiB", workers=[record], presets=BUILTIN_PRESETS)
    info = json.loads(json.dumps(s.to_dict()))
    assert info["preset"] == "small_task"
    assert info["workers"] == [
        {
            "address": "tcp://10.0.0.3:1",
            "name": "small",
            "able": False,
            "reason": (
                "asks threads=2; this worker has 1; asks memory limit=4 GiB; this worker has 2 GiB"
            ),
        }
    ]
    assert info["request"] == {"cpu": "2", "memory": "4Gi", "disk": "1Gi"}  # 900Mi scratch


def test_a_suggestion_and_its_json_record_name_the_same_fields():
    """Suggestion and SuggestionInfo differ in types by design; their names agree, and the
    JSON adds only ``gpu``, the profile's accelerator spelled out."""
    names = [f.name for f in dataclasses.fields(Suggestion)]
    assert [n for n in SuggestionInfo.__annotations__ if n != "gpu"] == names


def test_html_is_escaped():
    hostile = WorkerCapacity(
        address="tcp://x:1",
        name="<script>alert(1)</script>",
        nthreads=1,
        memory_limit=0,
        resources={},
    )
    html = suggest("1 GiB", workers=[hostile], presets=BUILTIN_PRESETS)._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html


@pytest.mark.parametrize(
    ("profiles", "words"),
    [
        ({"x": {"memory-per-bite": 2}}, "unknown key 'memory-per-bite'; did you mean"),
        ({"x": {"memory-per-byte": -1}}, "memory-per-byte must be a finite number of zero or"),
        ({"x": {"gpu": "A1000"}}, "A1000"),
        ({"x": 5}, "must be a mapping"),
    ],
    ids=["typo", "negative", "bad-gpu", "not-a-mapping"],
)
def test_bad_user_profiles_are_refused_by_name(profiles, words):
    with dask.config.set({"taskcell.profiles": profiles}), pytest.raises(SpecError) as info:
        suggest("1 GiB", "x")
    assert words in str(info.value)


def test_unknown_profile_lists_the_known_ones():
    with pytest.raises(SpecError, match="'gpu-trainig' is not a known profile; did you mean"):
        get_profile("gpu-trainig")
