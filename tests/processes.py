"""Programs a test runs that may start processes of their own (an exported module's cluster,
an SDK's local run): each leads a process group of its own, killed whole however the test
ends. (A descendant that makes a session of its own leaves the group: the program must end
those itself, as taskcell's own do when their parent goes.)"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator, Sequence
from typing import Any


@contextlib.contextmanager
def session(args: Sequence[str], **popen: Any) -> Iterator[subprocess.Popen]:
    """``Popen(args, **popen)``, leading a process group of its own; on leaving, every process
    of that group is killed (one the program left behind too), also when the test fails or
    pytest-timeout stops it."""
    proc = subprocess.Popen(args, start_new_session=True, **popen)
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        proc.wait()


def run_session(
    args: Sequence[str], *, timeout: float, input: str | bytes | None = None, **popen: Any
) -> subprocess.CompletedProcess:
    """:func:`subprocess.run`, output captured, its process group killed whole (:func:`session`)."""
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    if input is not None:
        pipes["stdin"] = subprocess.PIPE
    with session(args, **pipes, **popen) as proc:
        out, err = proc.communicate(input, timeout=timeout)
    return subprocess.CompletedProcess(args, proc.returncode, out, err)
