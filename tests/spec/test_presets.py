"""Presets: seed 001's Latch catalogue exactly, user presets from pyproject.toml, lookups."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskcell.errors import SpecError
from taskcell.spec import (
    BUILTIN_PRESETS,
    GPU,
    Resources,
    catalogue,
    get_preset,
    load_user_presets,
    presets_frame,
)

GI = 1024**3

# seed 001, "Prespecified Task Resource": (name, cpus, GiB of memory, gpu); "gigs" are GiB.
LATCH = [
    ("small_task", 2, 4, None),
    ("medium_task", 32, 128, None),
    ("large_task", 96, 192, None),
    ("small_gpu_task", 8, 32, GPU(None, 1)),
    ("large_gpu_task", 31, 120, GPU(None, 1)),
    ("v100_x1_task", 16, 64, GPU("V100", 1)),
    ("v100_x4_task", 64, 256, GPU("V100", 4)),
    ("v100_x8_task", 128, 512, GPU("V100", 8)),
    ("g6e_xlarge_task", 4, 32, GPU("L40s", 1)),
    ("g6e_2xlarge_task", 8, 64, GPU("L40s", 1)),
    ("g6e_4xlarge_task", 16, 128, GPU("L40s", 1)),
    ("g6e_8xlarge_task", 32, 256, GPU("L40s", 1)),
    ("g6e_12xlarge_task", 48, 384, GPU("L40s", 1)),
    ("g6e_16xlarge_task", 64, 512, GPU("L40s", 1)),
    ("g6e_24xlarge_task", 96, 768, GPU("L40s", 4)),
]


def test_catalogue_is_latchs_in_latchs_order() -> None:
    assert list(BUILTIN_PRESETS) == [name for name, *_ in LATCH]


@pytest.mark.parametrize(("name", "cpus", "gib", "gpu"), LATCH, ids=[n for n, *_ in LATCH])
def test_builtin_preset(name: str, cpus: int, gib: int, gpu: GPU | None) -> None:
    preset = BUILTIN_PRESETS[name]
    assert preset.cpu.request == preset.cpu.limit == cpus
    assert preset.memory.request == preset.memory.limit == gib * GI
    assert preset.gpu == gpu
    assert (preset.disk, preset.shm, dict(preset.extra)) == (None, None, {})
    assert preset == Resources(cpu=cpus, memory=f"{gib}Gi", gpu=gpu)


def test_builtins_are_read_only() -> None:
    with pytest.raises(TypeError):
        BUILTIN_PRESETS["small_task"] = Resources()  # type: ignore[index]


def write_pyproject(folder: Path, body: str) -> Path:
    path = folder / "pyproject.toml"
    path.write_text(f'[project]\nname = "demo"\n\n{body}', encoding="utf-8")
    return path


USER = """
[tool.taskcell.presets]
gpu_box = { cpu = 8, memory = "32Gi", gpu = "A100:1" }
small_task = { cpu = 4, memory = "16Gi" }

[tool.taskcell.presets.elastic]
cpu = ["2", "8"]
memory = ["8Gi", "32Gi"]
shm = "auto"
extra = { process = 1 }
"""


def test_user_presets_from_the_nearest_pyproject(tmp_path: Path) -> None:
    write_pyproject(tmp_path, USER)
    nested = tmp_path / "notebooks" / "deep"
    nested.mkdir(parents=True)
    presets = load_user_presets(nested)
    assert presets == {
        "gpu_box": Resources(cpu=8, memory="32Gi", gpu="A100:1"),
        "small_task": Resources(cpu=4, memory="16Gi"),
        "elastic": Resources(
            cpu=("2", "8"), memory=("8Gi", "32Gi"), shm="auto", extra={"process": 1}
        ),
    }


def test_only_the_nearest_pyproject_counts(tmp_path: Path) -> None:
    write_pyproject(tmp_path, USER)
    inner = tmp_path / "inner"
    inner.mkdir()
    write_pyproject(inner, "")
    assert load_user_presets(inner) == {}


def test_no_pyproject_means_no_user_presets(tmp_path: Path) -> None:
    assert load_user_presets(tmp_path) == {}


def test_default_start_is_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_pyproject(tmp_path, USER)
    monkeypatch.chdir(tmp_path)
    assert "gpu_box" in load_user_presets()


BAD = [
    ('[tool.taskcell.presets]\nbig = { cpu = "lots" }\n', ["'big'", "cpu=", "'lots'"]),
    ("[tool.taskcell.presets]\nbig = { cpus = 2 }\n", ["'big'", "'cpus'", 'did you mean "cpu"?']),
    ("[tool.taskcell.presets]\nbig = 4\n", ["'big'", "table of resource fields"]),
    ("[tool.taskcell]\npresets = 3\n", ["[tool.taskcell.presets]", "must be a table"]),
    ("[tool.taskcell.presets\n", ["not valid TOML"]),
    ('[tool.taskcell.presets]\n"bad name" = { cpu = 1 }\n', ["'bad name'"]),
]


@pytest.mark.parametrize(
    ("body", "words"), BAD, ids=["value", "key", "scalar", "table", "toml", "name"]
)
def test_bad_user_presets_name_the_preset_and_file(
    tmp_path: Path, body: str, words: list[str]
) -> None:
    path = write_pyproject(tmp_path, body)
    with pytest.raises(SpecError) as info:
        load_user_presets(tmp_path)
    message = str(info.value)
    assert str(path) in message
    for word in words:
        assert word in message


def test_catalogue_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_pyproject(tmp_path, USER)
    monkeypatch.chdir(tmp_path)
    merged = catalogue({"gpu_box": {"gpu": "H100:1"}, "tiny": Resources(cpu="500m")})
    assert list(merged)[: len(LATCH)] == [name for name, *_ in LATCH]
    assert merged["medium_task"] == BUILTIN_PRESETS["medium_task"]
    assert merged["small_task"] == Resources(cpu=4, memory="16Gi")  # pyproject over builtin
    assert merged["gpu_box"] == Resources(gpu="H100:1")  # configuration over pyproject
    assert merged["tiny"] == Resources(cpu="500m")


def test_catalogue_names_bad_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError, match="preset 'x' in configuration: memory="):
        catalogue({"x": {"memory": "lots"}})


def test_get_preset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert get_preset("v100_x4_task") == Resources(cpu=64, memory="256Gi", gpu="V100:4")
    assert get_preset("mine", {"mine": Resources(cpu=1)}) == Resources(cpu=1)


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [
        ("smal_task", "small_task"),
        ("v100x4_task", "v100_x4_task"),
        ("g6e_xl_task", "g6e_xlarge_task"),
    ],
)
def test_unknown_preset_suggests_the_nearest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, suggestion: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError) as info:
        get_preset(name)
    message = str(info.value)
    assert f"{name!r} is not a known preset" in message
    assert f'did you mean "{suggestion}"?' in message


def test_presets_frame(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_pyproject(tmp_path, USER)
    monkeypatch.chdir(tmp_path)
    frame = presets_frame().set_index("preset")
    assert list(frame.columns) == [
        "cpu", "memory", "gpu", "disk", "shm", "source", "description",
        "cpu_cores", "memory_bytes", "disk_bytes", "gpu_count",
    ]  # fmt: skip
    assert frame.loc["v100_x8_task", ["cpu", "memory", "gpu", "source"]].tolist() == [
        "128", "512Gi", "V100:8", "latch",
    ]  # fmt: skip
    assert "A10G" in frame.loc["small_gpu_task", "description"]
    assert frame.loc["small_gpu_task", "gpu"] == "1"
    assert frame.loc["small_task", "source"] == "user"  # overridden by pyproject
    assert frame.loc["elastic", "cpu"] == "2,8"
    assert frame.loc["elastic", "shm"] == "auto"
    assert frame.loc["g6e_24xlarge_task", "memory_bytes"] == 768 * GI
    assert frame.loc["g6e_24xlarge_task", "gpu_count"] == 4
    assert frame.loc["medium_task", "gpu_count"] is not None
    assert frame["gpu_count"].isna().sum() == 4  # small/medium/large_task, elastic
    assert frame.loc["elastic", "cpu_cores"] == 2.0


def test_presets_frame_of_a_given_catalogue() -> None:
    frame = presets_frame({"x": Resources(gpu="V5P/2x2x1", disk="1Ti")})
    row = frame.iloc[0]
    assert (row["preset"], row["gpu"], row["disk"], row["source"]) == (
        "x",
        "V5P/2x2x1",
        "1Ti",
        "user",
    )
    assert row["disk_bytes"] == 1024**4
