"""A (request, limit) pair, as Kubernetes and Flyte write ``cpu=("2", "8")``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Generic, TypeVar

from taskcell.errors import SpecError
from taskcell.spec._util import shown

T = TypeVar("T", int, Fraction)


@dataclass(frozen=True)
class Range(Generic[T]):
    """What a task asks for (``request``) and the most it may use (``limit``).

    A scalar request is the range whose request and limit are equal.

    Parameters
    ----------
    request : int or Fraction
        Bytes for memory and disk, cores for cpu.
    limit : int or Fraction
        At least ``request``.

    Raises
    ------
    SpecError
        If ``limit`` is below ``request``.
    """

    request: T
    limit: T

    def __post_init__(self) -> None:
        for side in (self.request, self.limit):
            if isinstance(side, bool) or not isinstance(side, int | Fraction):
                raise SpecError(
                    f"a range's request and limit are ints or Fractions, got {shown(side)}"
                )
        if self.limit < self.request:
            raise SpecError(f"limit {shown(self.limit)} is below request {shown(self.request)}")

    @property
    def is_fixed(self) -> bool:
        """True when request and limit are the same amount (a scalar request)."""
        return self.request == self.limit


def parse_range(
    value: object, parse: Callable[[object, str], T], spell: Callable[[T], str], field: str
) -> Range[T]:
    """Read a scalar, a ``(request, limit)`` tuple or list, or a :class:`Range`.

    Parameters
    ----------
    value : object
        ``"4Gi"``, ``("8Gi", "32Gi")``, ``["2", "8"]``, ``Range(...)``.
    parse : callable
        Reads one side, e.g. :func:`~taskcell.spec.quantity.parse_quantity`.
    spell : callable
        Writes one side canonically, for error messages.
    field : str
        The option being parsed, named in errors.

    Returns
    -------
    Range
        The parsed range; a scalar gives ``request == limit``.

    Raises
    ------
    SpecError
        If either side is malformed, the pair has other than two items, or the limit is
        below the request (``memory= limit '1Gi' is below request '4Gi'``).
    """
    if isinstance(value, Range):
        value = (value.request, value.limit)
    if isinstance(value, tuple | list):
        if len(value) != 2:
            raise SpecError(
                f"{field}= a range must be a (request, limit) pair such as "
                f'("2Gi", "4Gi"), got {shown(value)}'
            )
        request, limit = parse(value[0], field), parse(value[1], field)
        if limit < request:
            raise SpecError(
                f"{field}= limit {spell(limit)!r} is below request {spell(request)!r} "
                f"in {shown(value)}"
            )
        return Range(request, limit)
    amount = parse(value, field)
    return Range(amount, amount)
