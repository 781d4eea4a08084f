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

Refused: negative, zero and fractional byte counts, NaN, bools, and single-letter suffixes in the
wrong case (``"500m"`` is 0.5 bytes to Kubernetes, ``"2g"`` is 2 GiB to Docker), each with a
suggestion of what was probably meant.

Arithmetic is exact (:class:`fractions.Fraction`): ``"1.5Gi"`` is 1610612736 bytes.
"""

from __future__ import annotations

import re
from fractions import Fraction

from taskcell.errors import SpecError
from taskcell.spec._util import DECIMAL, did_you_mean, read_number

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
_SPELLINGS = [
    *DECIMAL_SUFFIXES,
    *BINARY_SUFFIXES,
    *(f"{p}B" for p in BINARY_SUFFIXES),
    *(f"{p.upper()}B" for p in DECIMAL_SUFFIXES),
]
_QUANTITY_RE = re.compile(rf"\s*(?P<number>[+-]?{DECIMAL})\s*(?P<suffix>[A-Za-z]*)\s*")


def _fail(field: str, value: object, detail: str = "") -> SpecError:
    return SpecError(f"{field}= must be {_FORMS}, got {value!r}{detail}")


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


def parse_quantity(value: int | float | str, field: str) -> int:
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
    if isinstance(value, str):
        match = _QUANTITY_RE.fullmatch(value)
        if match is None:
            raise _fail(field, value)
        number = match["number"]
        amount = Fraction(number) * _multiplier(match["suffix"], number, field, value)
    else:
        amount = read_number(value)
        if amount is None:
            raise _fail(field, value)
    if amount < 0:
        raise _fail(field, value, " (a negative size)")
    if amount == 0:
        raise _fail(field, value, " (zero bytes)")
    if amount.denominator != 1:
        raise _fail(field, value, f" ({amount} bytes is not a whole number of bytes)")
    return int(amount)


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
        If ``n`` is not a non-negative int.

    Examples
    --------
    >>> format_quantity(1610612736)
    '1536Mi'
    >>> format_quantity(500_000_000)
    '500M'
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise SpecError(f"format_quantity() takes a number of bytes >= 0, got {n!r}")
    candidates = []
    for table in (BINARY_SUFFIXES, DECIMAL_SUFFIXES):
        exact = [suffix for suffix, size in table.items() if n and n % size == 0]
        if exact:
            candidates.append((n // table[exact[-1]], exact[-1]))
    candidates.append((n, ""))
    # min() keeps the first of equals: binary wins a tie, then decimal, then plain digits.
    amount, suffix = min(candidates, key=lambda candidate: len(str(candidate[0])))
    return f"{amount}{suffix}"
