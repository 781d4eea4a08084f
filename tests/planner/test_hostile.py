"""Hostile input to the planner (issue 21): a suggestion or a SpecError, never a crash.

The findings first, one test each; then properties that drive ``suggest``, ``input_size`` and
configured profiles with random and hostile values, derandomized as tests/spec/test_hostile.py
is, and fail on any exception but :class:`SpecError`.
"""

from __future__ import annotations

import math

import dask
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taskcell.errors import SpecError
from taskcell.planner import get_profile, input_size, suggest
from taskcell.spec import BUILTIN_PRESETS


@pytest.mark.parametrize(
    ("size", "words"),
    [
        (1e308, "up to 4 EiB"),
        (10**400, "up to 4 EiB"),
        (float("inf"), "up to 4 EiB"),
        (float("-inf"), "zero or more"),
        (float("nan"), "zero or more"),
        ("9" * 5000, "far more than any machine has"),
        ("x" * 5000, "matches no file"),
        ("/" + "a" * 300 + "/b.csv", "matches no file"),
        ("a\x00b", "matches no file"),
    ],
    ids=["1e308", "10**400", "inf", "-inf", "nan", "9*5000", "x*5000", "long-name", "nul"],
)
def test_impossible_sizes_are_refused_by_name(size, words):
    for call in (lambda: input_size(size), lambda: suggest(size, presets=BUILTIN_PRESETS)):
        with pytest.raises(SpecError, match="size=") as info:
            call()
        assert words in str(info.value)


def test_the_largest_size_is_planned_exactly():
    s = suggest(2**62, presets=BUILTIN_PRESETS)  # 4 EiB: 4x that cannot be asked for
    assert s.fits is False and s.line is None
    assert "cannot be asked for directly" in s.message


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("memory-per-byte", math.inf, "memory-per-byte must be a finite number"),
        ("memory-per-byte", math.nan, "memory-per-byte must be a finite number"),
        ("scratch-per-byte", math.inf, "scratch-per-byte must be a finite number"),
        ("memory-per-byte", "4", "got '4'"),
        ("base-memory", "lots", "base-memory"),
        ("min-memory", -1, "min-memory"),
        ("cpu", math.inf, "cpu= must be a positive number"),
    ],
    ids=["inf", "nan", "scratch-inf", "text", "base-text", "min-negative", "cpu-inf"],
)
def test_a_bad_profile_is_refused_naming_its_key_and_others_still_plan(key, value, words):
    with dask.config.set({"taskcell.profiles": {"mine": {key: value}}}):
        with pytest.raises(SpecError) as info:
            suggest("1 GiB", "mine", presets=BUILTIN_PRESETS)
        assert "taskcell.profiles.mine" in str(info.value) and words in str(info.value)
        assert suggest("1 GiB", "default", presets=BUILTIN_PRESETS).fits


# -- properties ------------------------------------------------------------------------------

PROPERTY = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

numbers = (
    st.floats(allow_nan=True, allow_infinity=True)
    | st.integers(-(10**400), 10**400)
    | st.sampled_from([2**62, 2**62 + 1, 2**64, -1, 0, 1e308, -0.0, 5e-324])
)
# Text without path separators or home folders: globs stay in the test's empty folder.
texts = (
    st.text(st.characters(blacklist_characters="/~\\", blacklist_categories=["Cs"]), max_size=50)
    | st.from_regex(r"[0-9.eE+-]{1,40} ?(Ki|Mi|Gi|Ti|Pi|Ei|GB|k|M)?", fullmatch=True)
    | st.sampled_from(["9" * 5000, "1e999999999", "*", "**", "[", "*.csv", "\x00", " ", "nan"])
)
sizes = numbers | texts | st.lists(numbers | texts, max_size=3)


@PROPERTY
@given(sizes)
def test_any_size_is_a_size_or_a_spec_error(tmp_path_factory, size):
    folder = tmp_path_factory.mktemp("empty")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(folder)
        try:
            assert input_size(size) >= 0
        except SpecError:
            return
        s = suggest(size, presets=BUILTIN_PRESETS)
        assert s.memory >= 0 and s.disk >= 0


profile_values = numbers | texts | st.booleans() | st.none() | st.lists(numbers, max_size=2)


@PROPERTY
@given(
    st.dictionaries(
        st.sampled_from(
            ["memory-per-byte", "scratch-per-byte", "base-memory", "min-memory", "cpu", "gpu"]
        ),
        profile_values,
        max_size=3,
    ),
    numbers | st.sampled_from(["1 GiB", "12Mi", 0]),
)
def test_any_configured_profile_plans_or_is_refused_by_name(entry, size):
    with dask.config.set({"taskcell.profiles": {"fuzzed": entry}}):
        try:
            get_profile("fuzzed")
        except SpecError as e:
            assert "taskcell.profiles.fuzzed" in str(e)
            assert suggest("1 GiB", "default", presets=BUILTIN_PRESETS).fits
            return
        try:
            suggest(size, "fuzzed", presets=BUILTIN_PRESETS)
        except SpecError as e:
            assert "size=" in str(e)
