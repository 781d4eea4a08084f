"""Amounts as people read them: the one formatter of every message, table and view.

Bytes (``MEMORY``, ``DISK``, ``SHM`` in any case, and a worker's ``memory limit``) are shown in
binary units, with three significant digits below 100 of a unit (``"1.5 GiB"``, ``"12 GiB"``)
and whole units above (``"200 GiB"``); every other amount with up to six significant digits
(``"0.3"``, ``"2"``, ``"1234570"``). Rounding is half up on the exact value and no exponent is
written (amounts from 1e-6 up to 1e21). The sidebar shows the text the server computes here,
so the notebook panel and the sidebar read alike. :func:`shortfall` says what a worker lacks in
the same words everywhere.

A request is *spelled* by :func:`~taskcell.spec.quantity.format_quantity` (``"32Gi"``, read back
exactly); an amount is *shown* here (``"32 GiB"``). The scheduler plugin is pickled by value
with this module, so its functions read only values defined here and the standard library.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from decimal import ROUND_HALF_UP, Decimal

from taskcell.spec.resources import DASK_NAMES

#: Resources whose amounts are bytes, compared without regard to case.
BYTE_RESOURCES = frozenset(DASK_NAMES[field] for field in ("memory", "disk", "shm"))

#: What a worker's memory limit is called where it falls short (it is not a Dask resource).
MEMORY_LIMIT = "memory limit"

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def significant(value: float, digits: int) -> str:
    """``value`` to ``digits`` significant digits, half up, without exponent or trailing zeros."""
    exact = Decimal(value)
    if not exact.is_finite():
        return str(value)
    if exact == 0:
        return "0"
    step = Decimal(1).scaleb(exact.adjusted() - digits + 1)
    text = format(exact.quantize(step, rounding=ROUND_HALF_UP), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def show_bytes(nbytes: float) -> str:
    """``12884901888`` -> ``"12 GiB"``; ``1536`` -> ``"1.5 KiB"``; ``512`` -> ``"512 B"``."""
    try:
        amount = float(nbytes)
    except OverflowError:  # an int past any float (a need scaled by a huge factor)
        return f"{'-' if nbytes < 0 else ''}over {sys.float_info.max:.2g} B"
    unit = _UNITS[0]
    for unit in _UNITS:
        if abs(amount) < 1024 or unit == _UNITS[-1]:
            break
        amount /= 1024
    if unit == "B" or abs(amount) >= 100:
        whole = Decimal(amount).quantize(Decimal(1), rounding=ROUND_HALF_UP)
        return f"{int(whole)} {unit}"
    return f"{significant(amount, 3)} {unit}"


def show_number(value: float) -> str:
    """A plain amount: ``0.30000000000000004`` -> ``"0.3"``, ``2.0`` -> ``"2"``."""
    return significant(value, 6)


def show_amount(resource: str, amount: float) -> str:
    """An amount of ``resource``: bytes (``MEMORY``, ``disk``...) in KiB..PiB, else a number."""
    if resource.upper() in BYTE_RESOURCES or resource == MEMORY_LIMIT:
        return show_bytes(amount)
    return show_number(amount)


def show_request(request: Mapping[str, float]) -> str:
    """Dask resources as asked: ``{"GPU": 1, "MEMORY": 2**32}`` -> ``"GPU=1, MEMORY=4 GiB"``."""
    return ", ".join(f"{name}={show_amount(name, amount)}" for name, amount in request.items())


def shortfall(resource: str, asked: float, has: float, most_on: str | None = None) -> str:
    """What a worker lacks, in the words the cell, the panel and the sidebar all use.

    Parameters
    ----------
    resource : str
        The Dask resource, or ``threads`` or ``memory limit``.
    asked : float
        What the task asks for.
    has : float
        What one worker has; with ``most_on``, the most any live worker has.
    most_on : str, optional
        The address of the live worker that has the most, named when it has any.

    Returns
    -------
    str

    Examples
    --------
    >>> shortfall("GPU", 2, 1, most_on="tcp://10.0.0.2:1")
    'asks GPU=2; the most any worker has is 1, on tcp://10.0.0.2:1'
    >>> shortfall("MEMORY", 4 << 30, 0, most_on="tcp://10.0.0.2:1")
    'asks MEMORY=4 GiB; the most any worker has is 0 B'
    >>> shortfall("threads", 2, 1)
    'asks threads=2; this worker has 1'
    """
    asks = f"asks {resource}={show_amount(resource, asked)}; "
    if most_on is None:
        return f"{asks}this worker has {show_amount(resource, has)}"
    where = f", on {most_on}" if has else ""
    return f"{asks}the most any worker has is {show_amount(resource, has)}{where}"
