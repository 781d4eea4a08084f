"""Input sizes: quantities, files and globs, DataFrames and arrays."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from taskcell.errors import SpecError
from taskcell.planner.sizing import input_size

GiB = 1 << 30


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        ("12 GiB", 12 * GiB),
        ("12Gi", 12 * GiB),
        ("2GB", 2_000_000_000),
        ("100e9", 100_000_000_000),
        ("  1.5Gi ", 1_610_612_736),
        ("0", 0),
        (0, 0),
        (1024, 1024),
        (1.5e9, 1_500_000_000),
        (["1Gi", 1024], GiB + 1024),
    ],
    ids=[
        "GiB-spaced",
        "Gi",
        "GB",
        "exponent",
        "padded",
        "zero-text",
        "zero",
        "int",
        "float",
        "list",
    ],
)
def test_quantities(size, expected):
    assert input_size(size) == expected


def test_files_globs_and_directories_are_summed_once(tmp_path):
    (tmp_path / "a.csv").write_bytes(b"x" * 1000)
    (tmp_path / "b.csv").write_bytes(b"x" * 500)
    (tmp_path / "notes.txt").write_bytes(b"x" * 7)
    sub = tmp_path / "parts"
    sub.mkdir()
    (sub / "p1.parquet").write_bytes(b"x" * 300)
    assert input_size(str(tmp_path / "a.csv")) == 1000
    assert input_size(tmp_path / "a.csv") == 1000
    assert input_size(str(tmp_path / "*.csv")) == 1500
    assert input_size(str(tmp_path / "**" / "*.parquet")) == 300
    assert input_size(str(sub)) == 300
    # Overlapping patterns count each file once.
    assert input_size([str(tmp_path / "*.csv"), str(tmp_path / "a.*")]) == 1500


def test_dataframe_counts_deep_memory():
    df = pd.DataFrame({"n": np.arange(1000, dtype="int64"), "s": ["word"] * 1000})
    assert input_size(df) == int(df.memory_usage(deep=True).sum())
    assert input_size(df) > 8000 + 1000 * 4  # the strings count, not just their pointers
    assert input_size(df["n"]) == int(df["n"].memory_usage(deep=True))


def test_array_counts_nbytes():
    assert input_size(np.zeros((1000, 1000), dtype="float32")) == 4_000_000


@pytest.mark.parametrize(
    ("size", "words"),
    [
        ("lots", "matches no file"),
        ("/nonexistent/*.csv", "matches no file"),
        ("", "empty"),
        (-5, "zero or more"),
        (True, "quantity"),
        (object(), "got a object"),
    ],
    ids=["word", "empty-glob", "empty", "negative", "bool", "object"],
)
def test_bad_sizes_name_the_accepted_forms(size, words):
    with pytest.raises(SpecError, match="size=") as info:
        input_size(size)
    assert words in str(info.value)
