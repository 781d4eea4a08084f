"""How many times a task may start again when its worker dies: ``--retries N``, ``retries=N``.

One rule for the ``%%task`` line, the decorators (``@small_task(retries=2)``,
``custom_task(..., retries=2)``) and ``task.override(retries=...)``: a whole number from 0 to
:data:`MAX_RETRIES`. A worker that dies more often than that is no passing fault, and Dask
counts a task's retries in an int its scheduler keeps per task.
"""

from __future__ import annotations

import re

from taskcell.errors import SpecError
from taskcell.spec._util import shown

#: The most reruns a task may ask for.
MAX_RETRIES = 100

_DIGITS_RE = re.compile(r"[0-9]{1,3}", re.ASCII)


def parse_retries(value: object, field: str = "retries=") -> int:
    """Read a number of retries: an int, or its ASCII digits as text.

    Parameters
    ----------
    value : object
        ``2``, ``"2"``.
    field : str, optional
        How the caller names the option in errors (``"--retries"``).

    Returns
    -------
    int
        From 0 to :data:`MAX_RETRIES`.

    Raises
    ------
    SpecError
        For anything else (``-1``, ``10**9``, ``"x"``, ``True``, ``2.0``), naming the value.

    Examples
    --------
    >>> parse_retries("3")
    3
    """
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and _DIGITS_RE.fullmatch(value.strip()):
        number = int(value)
    if number is None or not 0 <= number <= MAX_RETRIES:
        raise SpecError(
            f"{field} must be 0 or more, at most {MAX_RETRIES}, written with the digits 0-9, "
            f"such as 2, got {shown(value)}"
        )
    return number
