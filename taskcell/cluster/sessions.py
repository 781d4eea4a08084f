"""Processes the kernel starts in a session of their own, out of reach of its interrupt.

jupyter_client interrupts a kernel by signalling its whole process group. A process started
with ``start_new_session`` leaves that group first thing, but a SIGINT sent between the fork
and that moment still reaches it and kills it (exit code -2): the embedded cluster died so
when a cell was interrupted as it started. So such a process starts with SIGINT blocked, and
one sent meanwhile waits, pending. A Python of taskcell's then drops it and takes SIGINT again
(:func:`forget_the_kernels_interrupt`); another program, such as a pool's ``dask worker``, keeps
SIGINT blocked, which in a session of its own it never needs: it is stopped with SIGTERM.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Sequence
from typing import Any


def popen_apart(argv: Sequence[str], **options: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(argv, start_new_session=True, **options)``, started with SIGINT
    blocked (this thread's mask is as it was when it returns)."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        return subprocess.Popen(argv, start_new_session=True, **options)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def forget_the_kernels_interrupt() -> None:
    """In a process :func:`popen_apart` started: drop a SIGINT the kernel's process group got
    before this process left it, then take SIGINT as Python does, for the processes it starts."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # discards one pending
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.default_int_handler)
