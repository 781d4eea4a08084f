"""Helpers shared by the parsers: exact, bounded number reading, and naming what was received.

Every parser answers any input with a value or a :class:`~taskcell.errors.SpecError`, in bounded
time. Two traps make that take care: ``Fraction("1e99999999")`` builds ``10**99999999`` and never
returns, and Python reads non-ASCII digits as numbers (``int("２") == 2``, ``"²".isdigit()``).
So numbers are matched with ASCII-only patterns, and their size is judged from their text before
any exact arithmetic is done.
"""

from __future__ import annotations

import difflib
import math
import numbers
import re
from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction
from importlib import resources as package_files
from typing import Any

import yaml

from taskcell.errors import SpecError

# A decimal number as people write it: "2", "1.5", ".5", "100e9", "1.5E-3". ASCII digits only.
DECIMAL = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_DECIMAL_RE = re.compile(rf"[+-]?{DECIMAL}", re.ASCII)
_PARTS_RE = re.compile(r"([+-]?)([0-9]*)\.?([0-9]*)(?:[eE]([+-]?[0-9]+))?", re.ASCII)

MAX_AMOUNT = 2**62
"""The largest amount of any resource: 4Ei of bytes (Kubernetes' int64 holds it), and far more of
anything else than any machine has. Cores and devices have smaller maxima of their own."""

MAX_ORDER = 30
"""Numbers of ``10**MAX_ORDER`` and more, or nonzero and under ``10**-MAX_ORDER``, are refused
from their text alone: beyond every maximum, finer than any unit. No exact arithmetic on them."""

MAX_DIGITS = 40
"""The most significant digits a number may be written with (no amount needs more)."""

# An exponent of more digits than this is out of bounds whatever its mantissa (int() stays cheap).
_EXPONENT_DIGITS = 9
_TOO_LARGE = " (far more than any machine has)"
_TOO_FINE = " (a nonzero amount finer than any resource is counted in)"
# The least nonzero amount a decimal text may have (its order, see _exact, is -MAX_ORDER).
_FINEST = Fraction(1, 10 ** (MAX_ORDER + 1))

Fail = Callable[[str], SpecError]
"""Builds a field's error from a detail (``""`` or ``" (why)"``): the field's own message."""


def read_number(value: object, fail: Fail) -> Fraction:
    """Read an int, float, Fraction or decimal string as an exact fraction, in bounded time.

    Floats are read through their shortest ``repr``, i.e. the decimal the user typed
    (``0.1`` is one tenth, not the nearest binary double), so no float drift leaks in.
    A decimal string is judged by its text first (see :data:`MAX_ORDER`, :data:`MAX_DIGITS`).

    Parameters
    ----------
    value : object
        The value to read.
    fail : callable
        Builds the caller's error, which names its field and its accepted forms.

    Returns
    -------
    Fraction
        The exact value.

    Raises
    ------
    SpecError
        ``fail("")`` for bools, NaN, infinities, non-numeric strings and other types;
        ``fail(" (why)")`` for a decimal string out of bounds, saying which bound.
    """
    if isinstance(value, bool):
        raise fail("")
    if isinstance(value, numbers.Integral):
        return Fraction(int(value))
    if isinstance(value, Fraction):
        return _not_too_fine(value, fail)
    if isinstance(value, float) and math.isfinite(value):
        # numpy's float64 reprs as "np.float64(0.5)", hence float() first
        return _not_too_fine(Fraction(repr(float(value))), fail)
    if isinstance(value, str) and _DECIMAL_RE.fullmatch(value.strip()):
        return _exact(value.strip(), fail)
    raise fail("")


def _not_too_fine(number: Fraction, fail: Fail) -> Fraction:
    """``number``, unless it is nonzero and finer than the text of a number may be: a value
    accepted as a number must also be accepted as the text it is written back as."""
    if number and abs(number) < _FINEST:
        raise fail(_beyond("-" if number < 0 else "", large=False))
    return number


def _exact(text: str, fail: Fail) -> Fraction:
    """The value of a decimal string matching :data:`DECIMAL`, built only when within bounds."""
    sign, whole, fraction, exponent = _PARTS_RE.fullmatch(text).groups()  # type: ignore[union-attr]
    digits = (whole + fraction).lstrip("0")
    if not digits:
        return Fraction(0)
    exponent = exponent or "0"
    if len(exponent.lstrip("+-").lstrip("0")) > _EXPONENT_DIGITS:
        raise fail(_beyond(sign, large=not exponent.startswith("-")))
    power = int(exponent) - len(fraction)
    order = len(digits) + power  # the value's size lies in [10**(order - 1), 10**order)
    if abs(order) > MAX_ORDER:
        raise fail(_beyond(sign, large=order > 0))
    significant = digits.rstrip("0")
    if len(significant) > MAX_DIGITS:
        raise fail(f" (more than {MAX_DIGITS} significant digits)")
    power += len(digits) - len(significant)
    return (-1 if sign == "-" else 1) * int(significant) * Fraction(10) ** power


def _beyond(sign: str, *, large: bool) -> str:
    """Why a number out of bounds is refused: every field refuses a negative amount anyway."""
    if sign == "-":
        return " (a negative amount)"
    return _TOO_LARGE if large else _TOO_FINE


def non_ascii_digits(value: object) -> str:
    """Return ``" ('２' is not an ASCII digit; ...)"`` for text with other digits, else ``""``.

    Python reads ``"２"`` (full-width), ``"²"`` and ``"٣"`` as digits; taskcell does not, since
    they are almost always pasted by accident, and says so rather than "not a number".
    """
    if not isinstance(value, str):
        return ""
    found = next((c for c in value if c.isnumeric() and not "0" <= c <= "9"), None)
    return "" if found is None else f" ({found!r} is not an ASCII digit; write numbers with 0-9)"


def shown(value: object, width: int = 80) -> str:
    """``repr(value)`` for an error message, shortened past ``width`` characters.

    Never raises (the message must not fail in its turn): a long int is named by its size,
    since ``str()`` refuses ints of more than 4300 digits, and an object whose ``__repr__``
    fails by its type.
    """
    if isinstance(value, int) and value.bit_length() > 3 * width:
        return f"an int of {value.bit_length()} bits"
    try:
        text = repr(value)
    except Exception:  # a broken __repr__, or a Fraction of long ints: see the docstring
        return f"a {type(value).__name__} that cannot be shown"
    if len(text) <= width:
        return text
    return f"{text[: width - 20]}...{text[-5:]} ({len(text)} characters)"


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


def package_yaml(name: str) -> Any:
    """The data of a YAML file shipped beside these modules (``devices.yaml``), read safely."""
    text = package_files.files("taskcell.spec").joinpath(name).read_text("utf-8")
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # C: ~10x faster
