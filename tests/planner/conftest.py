"""What the planner's tests share: the true peak of code run alone."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest

#: Runs code in a fresh interpreter and prints its peak resident memory as ``wait4`` reports
#: it (as GNU ``time`` does). It is started from this small launcher because a process started
#: from a large one counts that one's pages until it execs.
_LAUNCHER = """
import os, subprocess, sys
p = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
_, status, usage = os.wait4(p.pid, 0)
print(usage.ru_maxrss * 1024 if status == 0 else -1)
"""


def peak_alone(code: str) -> int:
    """The peak resident memory of ``code`` run alone in a fresh interpreter, in bytes."""
    done = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, code], capture_output=True, text=True, check=True
    )
    peak = int(done.stdout)
    assert peak > 0, f"{code!r} failed alone: {done.stderr[-2000:]}"
    return peak


@pytest.fixture
def alone() -> Callable[[str], int]:
    """:func:`peak_alone`: the truth a measured or planned peak is judged against."""
    return peak_alone
