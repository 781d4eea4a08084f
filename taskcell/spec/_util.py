"""Helpers shared by the parsers: exact decimal reading and "did you mean" suggestions."""

from __future__ import annotations

import difflib
import math
import numbers
import re
from collections.abc import Iterable, Mapping
from fractions import Fraction

# A decimal number as people write it: "2", "1.5", ".5", "100e9", "1.5E-3".
DECIMAL = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_DECIMAL_RE = re.compile(rf"[+-]?{DECIMAL}")


def read_number(value: object) -> Fraction | None:
    """Read an int, float, Fraction or decimal string as an exact fraction.

    Floats are read through their shortest ``repr``, i.e. the decimal the user typed
    (``0.1`` is one tenth, not the nearest binary double), so no float drift leaks in.

    Parameters
    ----------
    value : object
        The value to read.

    Returns
    -------
    Fraction or None
        The exact value, or None for bools, NaN, infinities, non-numeric strings and other
        types; the caller raises an error that names its field and its accepted forms.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Integral):
        return Fraction(int(value))
    if isinstance(value, Fraction):
        return value
    if isinstance(value, float):
        return Fraction(repr(value)) if math.isfinite(value) else None
    if isinstance(value, str) and _DECIMAL_RE.fullmatch(value.strip()):
        return Fraction(value.strip())
    return None


def did_you_mean(
    word: str,
    choices: Iterable[str],
    *,
    cutoff: float = 0.6,
    spelling: Mapping[str, str] | None = None,
) -> str:
    """Return ``'; did you mean "X"?'`` for the nearest choice, or ``""`` when none is near.

    Parameters
    ----------
    word : str
        What the user wrote.
    choices : iterable of str
        The valid spellings, compared without regard to case.
    cutoff : float, optional
        The lowest :mod:`difflib` similarity that still counts as near.
    spelling : mapping of str to str, optional
        How to show a choice, when the form compared is not the form shown.

    Returns
    -------
    str
        A sentence fragment to append to an error message.
    """
    folded = {choice.casefold(): choice for choice in choices}
    close = difflib.get_close_matches(word.casefold(), folded, n=1, cutoff=cutoff)
    if not close:
        return ""
    choice = folded[close[0]]
    return f'; did you mean "{(spelling or {}).get(choice, choice)}"?'
