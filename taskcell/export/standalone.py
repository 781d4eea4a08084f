"""Functions an exported module carries as source, so that it runs where taskcell is not installed.

Each function is self-contained (its imports inside it, no module globals, only builtin types
in its annotations), and the ``latch`` target copies it into the module with :func:`source`.
Tests check each against taskcell's own parsers (:func:`~taskcell.spec.parse_cpu`,
:func:`~taskcell.spec.parse_quantity`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["cores", "gib", "on_this_machine", "portable", "source"]


def cores(value: object) -> int:
    """Whole cores, rounded up, from a cpu request: ``2``, ``0.5``, ``"1.5"``, ``"500m"``."""
    import fractions
    import math

    text = str(value).strip()
    milli = text.endswith("m")
    try:
        amount = fractions.Fraction(text[:-1] if milli else text)
    except ValueError:
        raise ValueError(
            f"cpu must be cores such as 2, 0.5, '1.5' or '500m', got {value!r}"
        ) from None
    return math.ceil(amount / 1000 if milli else amount)


def gib(value: object) -> int:
    """Whole GiB, rounded up, from a size: bytes (``8e9``), ``"8Gi"``, ``"500M"``, ``"64 GiB"``."""
    import fractions
    import math
    import re

    found = re.fullmatch(r"\s*([0-9.]+(?:[eE][+-]?[0-9]+)?)\s*([kKMGTPE]?)(i?)B?\s*", str(value))
    if found is None or (found.group(3) and not found.group(2)):
        raise ValueError(
            f"a size must be bytes or a quantity such as '8Gi', '500M' or '64 GiB', got {value!r}"
        )
    number, prefix, binary = found.groups()
    power = "kMGTPE".index(prefix.replace("K", "k")) + 1 if prefix else 0
    unit = (1024 if binary or prefix == "K" else 1000) ** power
    return math.ceil(fractions.Fraction(number) * unit / 2**30)


def portable(value: object) -> object:
    """A task's untyped output as Flyte carries it: Flyte refuses a tuple, so a tuple leaves as
    an object that unpickles as that same tuple (a named tuple stays one)."""
    if not isinstance(value, tuple):
        return value
    kind, items = type(value), tuple(value)

    class Tuple:
        def __reduce__(self) -> tuple:
            return tuple.__new__, (kind, items)

    return Tuple()


def on_this_machine(path: str, kind: type) -> object:
    """A ``LatchFile`` or ``LatchDir`` for a path on this machine, to run the workflow here."""
    import pathlib

    full = str(pathlib.Path(path).resolve())
    return kind(full, full)


def source(function: Callable[..., Any], name: str) -> str:
    """The source of one of these functions, defined under ``name``."""
    text = inspect.getsource(function)
    return text.replace(f"def {function.__name__}(", f"def {name}(", 1)
