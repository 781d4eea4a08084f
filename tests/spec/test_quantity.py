"""Byte quantities: every spelling the seeds show, the forms people type, and the refusals."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskcell.errors import SpecError
from taskcell.spec import format_quantity, parse_quantity
from taskcell.spec.quantity import MAX_BYTES

GI = 1024**3

VALID = [
    # seed 002 (Flyte): memory, disk, shm
    ("512Mi", 512 * 1024**2),
    ("1Gi", GI),
    ("2Gi", 2 * GI),
    ("500M", 500_000_000),
    ("1G", 1_000_000_000),
    ("4Gi", 4 * GI),
    ("8Gi", 8 * GI),
    ("32Gi", 32 * GI),
    ("50Gi", 50 * GI),
    ("10Gi", 10 * GI),
    ("100Gi", 100 * GI),
    ("200Gi", 200 * GI),
    ("500Gi", 500 * GI),
    ("16Gi", 16 * GI),
    ("1Ti", 1024**4),
    # seed 003 (Dask): MEMORY=100e9 on the command line, 70e9 in Python
    ("100e9", 100_000_000_000),
    (100e9, 100_000_000_000),
    (70e9, 70_000_000_000),
    # every Kubernetes suffix
    ("1k", 1000),
    ("1Ki", 1024),
    ("1Mi", 1024**2),
    ("1T", 10**12),
    ("1P", 10**15),
    ("1Pi", 1024**5),
    ("1E", 10**18),
    ("1Ei", 1024**6),
    # exact fractions, no float drift
    ("1.5Gi", 1_610_612_736),
    ("0.5Ki", 512),
    ("1.5k", 1500),
    # plain bytes
    ("1000", 1000),
    (4096, 4096),
    (1024.0, 1024),
    # what people type anyway
    ("64 GiB", 64 * GI),
    ("2GB", 2_000_000_000),
    ("2 gb", 2_000_000_000),
    ("2gib", 2 * GI),
    ("4gi", 4 * GI),
    ("1.5 TiB", 1536 * GI),
    ("100B", 100),
    ("1kB", 1000),
    ("  8Gi  ", 8 * GI),
]


@pytest.mark.parametrize(("value", "expected"), VALID, ids=[repr(v) for v, _ in VALID])
def test_parse_quantity(value: object, expected: int) -> None:
    assert parse_quantity(value, "memory") == expected


INVALID = [
    ("lots", ["memory=", "'lots'", '"4Gi"', '"512Mi"', '"500M"', "100e9"]),
    ("2Gb", ["'2Gb'", "bits", 'did you mean "2G" or "2Gi"?']),
    ("1Mib", ["bits", 'did you mean "1M" or "1Mi"?']),
    ("1Kb", ["bits", 'did you mean "1k" or "1Ki"?']),
    ("500m", ["'500m'", 'did you mean "500M" or "500Mi"?']),
    ("2g", ['did you mean "2G" or "2Gi"?']),
    ("1K", ['did you mean "1k" or "1Ki"?']),
    ("4Gbi", ['did you mean "4Gi"?']),
    ("4 gigs", ['did you mean "4Gi"?']),
    ("-1Gi", ["'-1Gi'", "negative"]),
    (-5, ["-5", "negative"]),
    ("0", ["zero"]),
    (0, ["zero"]),
    ("0.5", ["not a whole number of bytes"]),
    (1.5, ["not a whole number of bytes"]),
    (float("nan"), ["nan"]),
    (float("inf"), ["inf"]),
    (True, ["True"]),
    (None, ["None"]),
    ("", ["''"]),
    ("Gi", ["'Gi'"]),
    ([4], ["[4]"]),
]


@pytest.mark.parametrize(("value", "words"), INVALID, ids=[repr(v) for v, _ in INVALID])
def test_parse_quantity_refuses(value: object, words: list[str]) -> None:
    with pytest.raises(SpecError) as info:
        parse_quantity(value, "memory")
    message = str(info.value)
    assert message.startswith("memory= must be a positive quantity such as")
    for word in words:
        assert word in message


@pytest.mark.parametrize("field", ["memory", "disk", "shm"])
def test_error_names_the_field(field: str) -> None:
    with pytest.raises(SpecError, match=f"^{field}= "):
        parse_quantity("lots", field)


FORMATTED = [
    (1_610_612_736, "1536Mi"),
    (4 * GI, "4Gi"),
    (500_000_000, "500M"),
    (1_000_001, "1000001"),
    (1024, "1Ki"),
    (1000, "1k"),
    (1024**6, "1Ei"),
    (10**18, "1E"),
    (3 * 1024**4, "3Ti"),
    (1000 * 1024, "1000Ki"),
    (2 * 10**9, "2G"),
    (0, "0"),
]


@pytest.mark.parametrize(("n", "text"), FORMATTED, ids=[t for _, t in FORMATTED])
def test_format_quantity(n: int, text: str) -> None:
    assert format_quantity(n) == text


@pytest.mark.parametrize("bad", [-1, 1.0, True, "1Gi"], ids=repr)
def test_format_quantity_refuses(bad: object) -> None:
    with pytest.raises(SpecError, match="format_quantity"):
        format_quantity(bad)


@given(st.integers(min_value=1, max_value=MAX_BYTES))
def test_format_then_parse_round_trips(n: int) -> None:
    assert parse_quantity(format_quantity(n), "memory") == n


@given(st.integers(min_value=1, max_value=2**20), st.sampled_from(["Ki", "Mi", "Gi", "k", "M"]))
def test_canonical_spelling_is_stable(amount: int, suffix: str) -> None:
    text = format_quantity(parse_quantity(f"{amount}{suffix}", "disk"))
    assert format_quantity(parse_quantity(text, "disk")) == text


@pytest.mark.parametrize("text", ["2G", "1T", "1E", "64G", "3M", "750G"])
def test_decimal_sizes_stay_decimal(text: str) -> None:
    assert format_quantity(parse_quantity(text, "memory")) == text
