"""The embedded cluster: a scheduler and worker processes on this machine, in a session apart.

jupyter_client interrupts a kernel by signalling its whole process group, so a cluster started
inside the kernel's group would die at the first ■ (interrupt). The cluster therefore runs in a
child process that starts a new session (``python -m taskcell.cluster.embedded SPEC``): an
interrupt reaches only the kernel, which then stops the one cell it means to stop. The child
prints the scheduler's address, and ends the cluster when the kernel closes its stdin, which
also happens when the kernel dies.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from typing import Any

from taskcell.errors import ClusterError


class EmbeddedCluster:
    """The child process running the embedded cluster, and its scheduler's address."""

    def __init__(self, workers: dict[str, dict[str, Any]]) -> None:
        """Start the cluster with ``workers``: worker name -> ``distributed.Nanny`` options
        (JSON-able: nthreads, memory_limit, resources, env)."""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "taskcell.cluster.embedded", json.dumps(workers)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        line = self.proc.stdout.readline() if self.proc.stdout else b""
        if not line:
            code = self.proc.wait()
            raise ClusterError(f"the embedded cluster did not start (exit code {code})")
        self.scheduler_address: str = json.loads(line)["address"]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        """Stop the scheduler and its workers, and wait for them."""
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def serve(workers: dict[str, dict[str, Any]]) -> None:
    """Run the cluster until stdin closes (the child's side of :class:`EmbeddedCluster`)."""
    from distributed import Nanny, Scheduler, SpecCluster

    specs = {
        name: {"cls": Nanny, "options": {**options, "silence_logs": logging.CRITICAL}}
        for name, options in workers.items()
    }
    scheduler = {
        "cls": Scheduler,
        "options": {"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"},
    }
    with SpecCluster(
        workers=specs,
        scheduler=scheduler,
        name="taskcell-embedded",
        silence_logs=logging.CRITICAL,
    ) as cluster:
        print(json.dumps({"address": cluster.scheduler_address}), flush=True)
        sys.stdin.buffer.read()


if __name__ == "__main__":
    serve(json.loads(sys.argv[1]))
