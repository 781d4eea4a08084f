"""taskcell's options in Dask's config: a value taskcell cannot use is a SpecError naming the
option, the value and where it was written (issue 21)."""

from __future__ import annotations

from pathlib import Path

import dask.config
import pytest
from hypothesis import given
from hypothesis import strategies as st
from spec.test_hostile import PROPERTY, answers, hostile_text, hostile_values

from taskcell import config
from taskcell.errors import SpecError
from taskcell.spec import LATCH, Resources


@pytest.fixture
def yaml_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Dask YAML config file where Dask looks for them."""
    monkeypatch.setattr(dask.config, "paths", [str(tmp_path)])
    return tmp_path / "taskcell.yaml"


def test_where_names_the_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DASK_TASKCELL__EMBEDDED_CLUSTER__N_WORKERS", "-3")
    where = config.where("embedded-cluster.n-workers")
    assert (
        where == "taskcell.embedded-cluster.n-workers (DASK_TASKCELL__EMBEDDED_CLUSTER__N_WORKERS)"
    )


def test_where_names_the_last_yaml_file_that_sets_it(yaml_file: Path) -> None:
    yaml_file.write_text("taskcell:\n  embedded_cluster:\n    n-workers: -3\n")
    (yaml_file.parent / "other.yaml").write_text("distributed: {}\n")
    assert config.where("embedded-cluster.n-workers") == (
        f"taskcell.embedded-cluster.n-workers in {yaml_file}"
    )
    assert config.where("presets") == "taskcell.presets"


BAD = [
    ("presets", "x", config.presets, "taskcell.presets must be a mapping of preset names"),
    ("presets", {"big": 3}, config.presets, "preset 'big' in taskcell.presets must be a table"),
    ("platform", "lach", config.platform, "taskcell.platform must be one of latch or null"),
    (
        "scheduler-timeout",
        "soon",
        lambda: config.seconds("scheduler-timeout"),
        "a positive duration",
    ),
    ("scheduler-timeout", -1, lambda: config.seconds("scheduler-timeout"), "a positive duration"),
    (
        "embedded-cluster.n-workers",
        0,
        lambda: config.count("embedded-cluster.n-workers"),
        "a whole number from 1 to 10000 or null",
    ),
]


@pytest.mark.parametrize(
    ("key", "value", "read", "words"), BAD, ids=[f"{k}={v!r}" for k, v, _, _ in BAD]
)
def test_an_option_taskcell_cannot_use_is_refused_naming_it(key, value, read, words) -> None:
    with dask.config.set({f"taskcell.{key}": value}), pytest.raises(SpecError) as info:
        read()
    assert words in str(info.value)
    assert repr(value) in str(info.value) or key == "presets"


def test_options_as_shipped_are_read() -> None:
    assert config.seconds("scheduler-timeout") == 10
    assert config.count("embedded-cluster.n-workers") is None
    assert config.platform() is None
    with dask.config.set({"taskcell.platform": "latch", "taskcell.presets": {"box": {"cpu": 8}}}):
        assert config.platform() == LATCH
        assert config.presets()["box"] == Resources(cpu=8)


@PROPERTY
@given(hostile_values | hostile_text | st.dictionaries(hostile_text, hostile_values, max_size=2))
def test_every_option_answers_any_value_with_a_value_or_a_spec_error(value: object) -> None:
    keys = ["presets", "platform", "scheduler-timeout", "embedded-cluster.n-workers"]
    readers = [
        config.presets,
        config.platform,
        lambda: config.seconds("scheduler-timeout"),
        lambda: config.count("embedded-cluster.n-workers"),
    ]
    for key, read in zip(keys, readers, strict=True):
        with dask.config.set({f"taskcell.{key}": value}):
            answers(read)
