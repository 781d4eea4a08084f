"""Processes the kernel starts apart (the embedded cluster, pool workers) cannot be killed by an
interrupt of the kernel that comes while they start: they start in a session of their own with
SIGINT blocked, and a Python of taskcell's drops the SIGINT that came meanwhile."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from taskcell.cluster import launch
from taskcell.cluster.pools import parse_pools
from taskcell.cluster.sessions import popen_apart

#: Waits for a line, drops the SIGINT the kernel's group may have sent, says so, waits again.
CHILD = """
import sys
from taskcell.cluster.sessions import forget_the_kernels_interrupt
sys.stdin.readline()
forget_the_kernels_interrupt()
print("ready", flush=True)
sys.stdin.readline()
"""


def sigint_blocked(pid: int) -> bool:
    """Whether SIGINT is in the process's blocked mask, as Linux shows it."""
    status = Path(f"/proc/{pid}/status").read_text()
    mask = next(line.split()[1] for line in status.splitlines() if line.startswith("SigBlk:"))
    return bool(int(mask, 16) & (1 << (signal.SIGINT - 1)))


def test_a_process_started_apart_has_its_own_session_and_sigint_blocked():
    proc = popen_apart(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        assert os.getsid(proc.pid) == proc.pid != os.getsid(0)
        assert sigint_blocked(proc.pid)
        assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # ours as it was
    finally:
        proc.communicate(b"")


def test_an_interrupt_that_came_while_it_started_is_dropped_and_the_next_one_counts():
    proc = popen_apart(
        [sys.executable, "-c", CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.send_signal(signal.SIGINT)  # as if sent to the kernel's group before it left it
    proc.stdin.write("go\n")
    proc.stdin.flush()
    assert proc.stdout.readline() == "ready\n"  # alive: the pending SIGINT was dropped
    proc.send_signal(signal.SIGINT)  # now SIGINT is Python's again
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "KeyboardInterrupt" in err


def test_a_local_pool_worker_starts_apart():
    (pool,) = parse_pools({"cpu": {"shape": {"cpu": 1, "memory": "1Gi"}}})
    worker = launch.make_worker(pool, "tcp://127.0.0.1:9", "cpu-1")  # connects to no one

    async def started() -> tuple[int, bool]:
        await worker.start()
        assert isinstance(worker, launch.LocalWorker) and worker.proc is not None
        pid = worker.proc.pid
        try:
            return os.getsid(pid), sigint_blocked(pid)
        finally:
            await worker.close()

    session, blocked = asyncio.run(started())
    assert session != os.getsid(0) and blocked
