"""Waits in the kernel's main thread that an interrupt always ends.

Python handles a SIGINT by setting a flag, which the main thread acts on between bytecodes, and
wakes a lock's wait in that thread by the signal's EINTR. A SIGINT that wakes no wait (one that
lands just before the wait begins, or is taken by another of the kernel's threads) sets the flag
only: ``threading.Event().wait()`` then blocks until the event is set, and the cell does not stop
(seen in a test of the embedded cluster's start, about once in 150 interrupts on a busy
machine). Waiting in slices goes back to Python between them, which raises the interrupt.
"""

from __future__ import annotations

import threading
import time

#: The longest an interrupt that came at that instant waits to be raised (seconds).
SLICE = 0.1


def wait(event: threading.Event, timeout: float | None = None) -> bool:
    """``event.wait(timeout)``, in slices an interrupt ends at most :data:`SLICE` late."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not event.wait(SLICE if deadline is None else min(SLICE, deadline - time.monotonic())):
        if deadline is not None and time.monotonic() >= deadline:
            return event.is_set()
    return True
