"""CPU counts: seed 002's forms, millicore precision, one canonical spelling."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskcell.errors import SpecError
from taskcell.spec import format_cpu, parse_cpu

VALID = [
    # seed 002 (Flyte) "CPU resources"
    ("500m", Fraction(1, 2)),
    ("2", Fraction(2)),
    ("1.5", Fraction(3, 2)),
    (1, Fraction(1)),
    (0.5, Fraction(1, 2)),
    ("16", Fraction(16)),
    # seed 001 (Latch): ints
    (126, Fraction(126)),
    # precision edges
    ("1m", Fraction(1, 1000)),
    ("0.001", Fraction(1, 1000)),
    (0.1, Fraction(1, 10)),
    ("1500m", Fraction(3, 2)),
    (" 4 ", Fraction(4)),
    (Fraction(3, 4), Fraction(3, 4)),
]


@pytest.mark.parametrize(("value", "expected"), VALID, ids=[repr(v) for v, _ in VALID])
def test_parse_cpu(value: object, expected: Fraction) -> None:
    assert parse_cpu(value) == expected


INVALID = [
    ("lots", []),
    ("0", ["not more than zero"]),
    (0, ["not more than zero"]),
    (-1, ["not more than zero"]),
    ("-500m", ["not more than zero"]),
    ("0.0001", ["millicore"]),
    ("0.5m", ["millicore"]),
    ("2 cores", ['did you mean "2"?']),
    ("4cpu", ['did you mean "4"?']),
    ("500M", ['did you mean "500m"?']),
    (True, []),
    (None, []),
    (float("nan"), []),
    ("m", []),
    ((1, 2), []),
]


@pytest.mark.parametrize(("value", "words"), INVALID, ids=[repr(v) for v, _ in INVALID])
def test_parse_cpu_refuses(value: object, words: list[str]) -> None:
    with pytest.raises(SpecError) as info:
        parse_cpu(value)
    message = str(info.value)
    assert message.startswith('cpu= must be a positive number of cores such as 2, 0.5, "1.5"')
    assert repr(value) in message
    for word in words:
        assert word in message


FORMATTED = [
    (Fraction(2), "2"),
    (Fraction(3, 2), "1.5"),
    (Fraction(1, 2), "0.5"),
    (Fraction(1, 1000), "0.001"),
    (Fraction(1, 8), "0.125"),
    (Fraction(1201, 100), "12.01"),
    (7, "7"),
]


@pytest.mark.parametrize(("cores", "text"), FORMATTED, ids=[t for _, t in FORMATTED])
def test_format_cpu(cores: Fraction, text: str) -> None:
    assert format_cpu(cores) == text


@pytest.mark.parametrize("bad", [Fraction(0), Fraction(-1), Fraction(1, 3), True], ids=repr)
def test_format_cpu_refuses(bad: object) -> None:
    with pytest.raises(SpecError, match="format_cpu"):
        format_cpu(bad)


@given(st.integers(min_value=1, max_value=10**9))
def test_round_trip(millicores: int) -> None:
    cores = Fraction(millicores, 1000)
    assert parse_cpu(format_cpu(cores)) == cores
    assert parse_cpu(f"{millicores}m") == cores
