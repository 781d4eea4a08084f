"""CPU counts in cores, with Kubernetes' millicore precision.

Accepted: ints (``2``), floats (``0.5``), decimal strings (``"2"``, ``"1.5"``) and millicores
(``"500m"``). The value must be more than zero, at most :data:`MAX_CORES`, and a whole number of
millicores.

Canonical spelling (:func:`format_cpu`): whole cores as plain digits (``"2"``), anything else as
a decimal number of cores with no trailing zeros (``"1.5"``, ``"0.5"``, ``"0.001"``). One rule for
every value, readable without knowing what ``m`` means, and valid wherever a number of cores is.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction

from taskcell.errors import SpecError
from taskcell.spec._util import DECIMAL, Fail, non_ascii_digits, read_number, shown

MAX_CORES = 10**6
"""The most cores one task may ask for: far more than any machine has (the largest hold a few
thousand), and small enough that every request is an exact float for Dask."""

_FORMS = 'a positive number of cores such as 2, 0.5, "1.5" or "500m"'
_MILLI = 1000
_WITH_WORD_RE = re.compile(rf"\s*(?P<number>{DECIMAL})\s*(?P<word>[A-Za-z]+)\s*", re.ASCII)


def _fail(field: str, value: object, detail: str = "") -> SpecError:
    hint = detail or non_ascii_digits(value)
    return SpecError(f"{field}= must be {_FORMS}, got {shown(value)}{hint}")


def _read(value: object, field: str) -> Fraction:
    fail: Fail = functools.partial(_fail, field, value)
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("m"):
            return read_number(text[:-1], fail) / _MILLI
        match = _WITH_WORD_RE.fullmatch(text)
        if match is not None:
            number = match["number"]
            hint = f"{number}m" if match["word"] == "M" else number
            raise fail(f'; did you mean "{hint}"?')
    return read_number(value, fail)


def parse_cpu(value: object, field: str = "cpu") -> Fraction:
    """Parse a number of cores.

    Parameters
    ----------
    value : int, float or str
        ``2``, ``0.5``, ``"2"``, ``"1.5"`` or ``"500m"`` (millicores).
    field : str, optional
        The option being parsed, named in errors.

    Returns
    -------
    Fraction
        The number of cores, exact, positive, at most :data:`MAX_CORES`, a multiple of 1/1000.

    Raises
    ------
    SpecError
        For zero, negative, non-numeric values, bools, more than :data:`MAX_CORES` and
        precision finer than a millicore.

    Examples
    --------
    >>> parse_cpu("500m")
    Fraction(1, 2)
    >>> parse_cpu(2)
    Fraction(2, 1)
    """
    cores = _read(value, field)
    if cores <= 0:
        raise _fail(field, value, " (not more than zero)")
    if cores > MAX_CORES:
        raise _fail(field, value, f" (more than {MAX_CORES} cores; no machine has that many)")
    if (cores * _MILLI).denominator != 1:
        raise _fail(field, value, " (finer than a millicore, 0.001 cores)")
    return cores


def format_cpu(cores: Fraction | int) -> str:
    """Spell a number of cores canonically.

    Parameters
    ----------
    cores : Fraction or int
        A positive number of cores, a whole number of millicores.

    Returns
    -------
    str
        ``"2"`` for whole cores, else the exact decimal: ``"1.5"``, ``"0.5"``, ``"0.125"``.

    Raises
    ------
    SpecError
        If ``cores`` is not a positive whole number of millicores, at most ``MAX_CORES``.

    Examples
    --------
    >>> format_cpu(Fraction(3, 2))
    '1.5'
    >>> format_cpu(Fraction(2))
    '2'
    """
    exact = isinstance(cores, int | Fraction) and not isinstance(cores, bool)
    milli = Fraction(cores) * _MILLI if exact else Fraction(0)
    if milli <= 0 or milli.denominator != 1 or milli > MAX_CORES * _MILLI:
        raise SpecError(
            f"format_cpu() takes a positive whole number of millicores, got {shown(cores)}"
        )
    whole, rest = divmod(int(milli), _MILLI)
    return f"{whole}.{rest:03d}".rstrip("0") if rest else str(whole)
