"""A wait in the main thread ends at an interrupt whose signal woke nothing: the one that lands
just before the wait begins. ``_thread.interrupt_main`` is such an interrupt: it sets the flag
Python's SIGINT handler sets, and sends no signal."""

from __future__ import annotations

import _thread
import sys
import threading

import pytest

from taskcell.cluster import interruptible


def main_thread_waits_for(event: threading.Event) -> bool:
    """Whether the main thread is in ``event.wait``."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    while frame is not None and frame.f_locals.get("self") is not event:
        frame = frame.f_back
    return frame is not None


def interrupt_once_waiting(event: threading.Event) -> None:
    while not main_thread_waits_for(event):
        pass
    _thread.interrupt_main()


def test_an_interrupt_that_woke_nothing_ends_the_wait():
    event = threading.Event()
    # Ends the test's wait, failing it, if the interrupt does not.
    rescue = threading.Timer(60, event.set)
    rescue.start()
    interrupter = threading.Thread(target=interrupt_once_waiting, args=(event,))
    interrupter.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            interruptible.wait(event)
    finally:
        rescue.cancel()
        interrupter.join()
    assert not event.is_set()


def test_the_wait_returns_whether_the_event_was_set():
    event = threading.Event()
    assert interruptible.wait(event, timeout=0) is False
    assert interruptible.wait(event, timeout=0.05) is False
    threading.Timer(0.01, event.set).start()
    assert interruptible.wait(event) is True
    assert interruptible.wait(event, timeout=0) is True
