"""Byte quantities: memory, disk and shared memory sizes, read and written exactly.

Accepted spellings (all give a whole, positive number of bytes):

- Kubernetes quantities, case as Kubernetes spells them: decimal ``k M G T P E``
  (``"500M"`` is 500 000 000 bytes) and binary ``Ki Mi Gi Ti Pi Ei`` (``"512Mi"``);
  the binary suffixes are also read in any case (``"4gi"``), since they cannot be misread.
- Plain bytes, ints, integral floats and exponents: ``1000``, ``"1000"``, ``100e9``, ``"100e9"``
  (Dask's ``MEMORY=100e9``).
- What people type anyway, with an optional space: ``"64 GiB"``, ``"2GB"``, ``"2 gb"``,
  ``"1.5 TiB"``, ``"100B"``; the ``B`` forms are read in any case, except that a lowercase
  ``b`` after an uppercase letter (``"2Gb"``, ``"1Mib"``) means *bits* and is refused.

Refused: negative, zero and fractional byte counts, more than :data:`MAX_BYTES`, NaN, bools,
non-ASCII digits (``"２Gi"``), and single-letter suffixes in the wrong case (``"500m"`` is 0.5 bytes
to Kubernetes, ``"2g"`` is 2 GiB to Docker), each with a suggestion of what was probably meant.

A request's memory, disk and shm are read by :func:`parse_request_bytes`, which also refuses
anything under :data:`MIN_REQUEST` (1Mi): no task runs in less, and a bare number that small
(``memory=8``, 8 bytes) is a unit slip for ``"8Gi"``.

Arithmetic is exact (:class:`fractions.Fraction`): ``"1.5Gi"`` is 1610612736 bytes.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction

from taskcell.errors import SpecError
from taskcell.spec._util import (
    DECIMAL,
    MAX_AMOUNT,
    Fail,
    did_you_mean,
    non_ascii_digits,
    read_number,
    shown,
)

_FORMS = 'a positive quantity such as "4Gi", "512Mi", "500M" or 100e9 bytes'

_PREFIXES = "kMGTPE"
DECIMAL_SUFFIXES: dict[str, int] = {p: 1000 ** (i + 1) for i, p in enumerate(_PREFIXES)}
BINARY_SUFFIXES: dict[str, int] = {
    f"{p.upper()}i": 1024 ** (i + 1) for i, p in enumerate(_PREFIXES)
}
# Human spellings, looked up case-folded ("GiB", "gb", "KB").
_HUMAN_SUFFIXES: dict[str, int] = {
    "b": 1,
    **{f"{p.lower()}b": n for p, n in DECIMAL_SUFFIXES.items()},
    **{f"{p.lower()}b": n for p, n in BINARY_SUFFIXES.items()},
    **{p.lower(): n for p, n in BINARY_SUFFIXES.items()},
}

MAX_BYTES = MAX_AMOUNT
"""The largest byte quantity read: 4Ei, more than any machine or disk a task runs on."""

MIN_REQUEST = BINARY_SUFFIXES["Mi"]
"""The smallest memory, disk or shm a request may ask for: 1Mi (see :func:`parse_request_bytes`)."""

_SPELLINGS = [
    *DECIMAL_SUFFIXES,
    *BINARY_SUFFIXES,
    *(f"{p}B" for p in BINARY_SUFFIXES),
    *(f"{p.upper()}B" for p in DECIMAL_SUFFIXES),
]
_QUANTITY_RE = re.compile(rf"\s*(?P<number>[+-]?{DECIMAL})\s*(?P<suffix>[A-Za-z]*)\s*", re.ASCII)


def _fail(field: str, value: object, detail: str = "") -> SpecError:
    hint = detail or non_ascii_digits(value)
    return SpecError(f"{field}= must be {_FORMS}, got {shown(value)}{hint}")


def _multiplier(suffix: str, number: str, field: str, value: object) -> int:
    """The number of bytes one unit of ``suffix`` stands for."""
    if not suffix:
        return 1
    if suffix in DECIMAL_SUFFIXES:
        return DECIMAL_SUFFIXES[suffix]
    if suffix in BINARY_SUFFIXES:
        return BINARY_SUFFIXES[suffix]
    unit = suffix[0].upper()
    guess = f'; did you mean "{number}{"k" if unit == "K" else unit}" or "{number}{unit}i"?'
    if suffix.endswith("b") and suffix[:-1] != suffix[:-1].lower():
        raise _fail(field, value, f" ({suffix!r} means bits, not bytes){guess}")
    if suffix.casefold() in _HUMAN_SUFFIXES:
        return _HUMAN_SUFFIXES[suffix.casefold()]
    if len(suffix) == 1 and unit in _PREFIXES.upper():
        raise _fail(field, value, f" ({suffix!r} is not a unit of bytes){guess}")
    hint = did_you_mean(suffix, _SPELLINGS, cutoff=0.5)
    raise _fail(field, value, hint.replace('"', f'"{number}', 1))


def parse_quantity(value: object, field: str) -> int:
    """Parse a byte quantity exactly.

    Parameters
    ----------
    value : int, float or str
        ``4294967296``, ``100e9``, ``"512Mi"``, ``"1.5Gi"``, ``"500M"``, ``"100e9"``,
        ``"64 GiB"``, ``"2GB"``; see the module docstring for every accepted form.
    field : str
        The option being parsed, named in errors (``"memory"``, ``"disk"``, ``"shm"``).

    Returns
    -------
    int
        The number of bytes, always positive.

    Raises
    ------
    SpecError
        For anything that is not a whole, positive number of bytes; the message names the
        field, the value, the accepted forms and, where one is near, the intended spelling.

    Examples
    --------
    >>> parse_quantity("1.5Gi", "memory")
    1610612736
    >>> parse_quantity("500M", "memory")
    500000000
    >>> parse_quantity(100e9, "memory")
    100000000000
    """
    amount, _ = _read(value, field)
    return _whole_bytes(amount, functools.partial(_fail, field, value))


def _read(value: object, field: str) -> tuple[Fraction, bool]:
    """The exact amount of bytes ``value`` stands for, and whether it was a bare number."""
    fail: Fail = functools.partial(_fail, field, value)
    if not isinstance(value, str):
        return read_number(value, fail), True
    match = _QUANTITY_RE.fullmatch(value)
    if match is None:
        raise fail("")
    number, suffix = match["number"], match["suffix"]
    return read_number(number, fail) * _multiplier(suffix, number, field, value), not suffix


def _whole_bytes(amount: Fraction, fail: Fail) -> int:
    """``amount`` checked to be a whole number of bytes, from 1 to :data:`MAX_BYTES`."""
    if amount < 0:
        raise fail(" (a negative size)")
    if amount == 0:
        raise fail(" (zero bytes)")
    if amount > MAX_BYTES:
        raise fail(f" (more than {format_quantity(MAX_BYTES)}; no machine has that much)")
    if amount.denominator != 1:
        raise fail(" (not a whole number of bytes)")
    return int(amount)


def parse_request_bytes(value: object, field: str) -> int:
    """Parse a request's memory, disk or shm: :func:`parse_quantity`, and at least 1Mi.

    Parameters
    ----------
    value : int, float or str
        As for :func:`parse_quantity`.
    field : str
        ``"memory"``, ``"disk"`` or ``"shm"``, named in errors.

    Returns
    -------
    int
        The number of bytes, at least :data:`MIN_REQUEST`.

    Raises
    ------
    SpecError
        As :func:`parse_quantity`, and for less than 1Mi; a bare number (``memory=8``, which
        Flyte refuses and a Latch user means as 8 GiB) is named a unit slip, with a suggestion.

    Examples
    --------
    >>> parse_request_bytes("512Mi", "memory")
    536870912
    """
    fail: Fail = functools.partial(_fail, field, value)
    amount, bare = _read(value, field)
    if bare and 0 < amount < MIN_REQUEST:
        number = f"{float(amount):.15g}"  # 8 for 8, 8.0 and "8"; 1.5 for 1.5
        raise fail(
            " (a number without a unit counts bytes, and no task runs in under 1Mi;"
            f' did you mean "{number}Gi" or "{number}Mi"?)'
        )
    if 0 < amount < MIN_REQUEST:
        raise fail(" (under 1Mi; no task runs in less)")
    return _whole_bytes(amount, fail)


def format_quantity(n: int) -> str:
    """Spell a byte count canonically.

    The rule: of three candidates -- the largest binary suffix (``Ei`` ... ``Ki``) that divides
    ``n`` exactly, the largest decimal suffix (``E`` ... ``k``) that divides it exactly, and plain
    digits -- the one with the fewest digits, binary winning a tie, then decimal. So binary
    sizes read binary (``"1536Mi"``) and decimal sizes read decimal (``"2G"``, not
    ``"1953125Ki"``, although 2 000 000 000 is a multiple of 1024).
    ``parse_quantity(format_quantity(n), field) == n`` for every ``n > 0``.

    Parameters
    ----------
    n : int
        A number of bytes, ``>= 0``.

    Returns
    -------
    str
        ``"1536Mi"``, ``"4Gi"``, ``"500M"``, ``"1000001"``; ``"0"`` for zero.

    Raises
    ------
    SpecError
        If ``n`` is not an int from 0 to 2**62 (4Ei).

    Examples
    --------
    >>> format_quantity(1610612736)
    '1536Mi'
    >>> format_quantity(500_000_000)
    '500M'
    """
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_AMOUNT:
        raise SpecError(
            f"format_quantity() takes a number of bytes from 0 to 2**62, got {shown(n)}"
        )
    candidates = []
    for table in (BINARY_SUFFIXES, DECIMAL_SUFFIXES):
        exact = [suffix for suffix, size in table.items() if n and n % size == 0]
        if exact:
            candidates.append((n // table[exact[-1]], exact[-1]))
    candidates.append((n, ""))
    # min() keeps the first of equals: binary wins a tie, then decimal, then plain digits.
    amount, suffix = min(candidates, key=lambda candidate: len(str(candidate[0])))
    return f"{amount}{suffix}"
