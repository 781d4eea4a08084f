"""The suite's one way to wait: poll a check until it holds, then hand back what it saw.

Waits are bounded only to end a test that hangs, never to judge speed: the default patience is
long enough for a loaded 2-core machine running several suites at once.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

#: Seconds a wait lasts before it fails; far more than anything takes on a healthy machine.
PATIENCE = 90.0


def _failure(what: str, timeout: float, last: object) -> AssertionError:
    return AssertionError(f"{what}: not within {timeout:g} s; last seen: {last!r}")


def eventually(
    check: Callable[[], T],
    what: str,
    timeout: float = PATIENCE,
    *,
    holds: Callable[[T], object] = bool,
    seen: Callable[[], object] | None = None,
    every: float = 0.05,
) -> T:
    """Call ``check`` until ``holds`` accepts its value (by default: until it is truthy).

    Parameters
    ----------
    check
        Reads the state waited for; called again every ``every`` seconds.
    what
        What is awaited, in words; the failure names it.
    timeout
        Seconds before giving up.
    holds
        Whether a value of ``check`` is the one awaited.
    seen
        What the failure shows as last seen, when ``check``'s own value says too little.

    Returns
    -------
    The value of ``check`` that ``holds`` accepted.

    Raises
    ------
    AssertionError
        Naming ``what`` and the last value seen, when ``timeout`` passes first.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if holds(value):
            return value
        if time.monotonic() > deadline:
            raise _failure(what, timeout, seen() if seen else value)
        time.sleep(every)


async def eventually_async(
    check: Callable[[], T | Awaitable[T]],
    what: str,
    timeout: float = PATIENCE,
    *,
    holds: Callable[[T], object] = bool,
    seen: Callable[[], object] | None = None,
    every: float = 0.02,
) -> T:
    """:func:`eventually` for coroutine tests: ``check`` may be a coroutine function, and the
    event loop runs between calls."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if holds(value):
            return value
        if time.monotonic() > deadline:
            raise _failure(what, timeout, seen() if seen else value)
        await asyncio.sleep(every)
