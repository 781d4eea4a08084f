"""The embedded cluster: a scheduler and worker processes on this machine, in a session apart.

jupyter_client interrupts a kernel by signalling its whole process group, so a cluster started
inside the kernel's group would die at the first ■ (interrupt). The cluster therefore runs in a
child process that starts a new session (``python -m taskcell.cluster.embedded SPEC``): an
interrupt reaches only the kernel, which then stops the one cell it means to stop. The child
runs a ``SpecCluster`` named :data:`NAME` (the Jupyter server scales and stops it by that name),
prints the scheduler's address as soon as the scheduler listens, and ends the cluster when the
kernel closes its stdin, which also happens when the kernel dies.

One worker (the default, ``taskcell.embedded-cluster.n-workers``) runs in the child process
itself, beside the scheduler: cells run in processes of their own anyway, and the cluster is up
once one process has imported Dask, while the kernel imports it too. Several workers each get a
process, with its own ``CUDA_VISIBLE_DEVICES``, started first, before the child imports Dask, so
that they import it while it does; each waits for the scheduler's port, then connects (see
:mod:`taskcell.cluster.embedded_worker`, which also starts a worker again when it exits).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from typing import Any

from taskcell.errors import ClusterError

#: The name of the embedded cluster's ``SpecCluster``.
NAME = "taskcell-embedded"


class EmbeddedCluster:
    """The child process running the embedded cluster; :meth:`address` waits for its scheduler.

    Starting it returns at once: the caller waits for the address (in a thread of its own, see
    :mod:`taskcell.cluster.connect`), and :meth:`close` may end the cluster at any moment, its
    start included.
    """

    def __init__(self, workers: dict[str, dict[str, Any]]) -> None:
        """Start the cluster with ``workers``: worker name -> worker options (JSON-able:
        nthreads, memory_limit, resources, env)."""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "taskcell.cluster.embedded", json.dumps(workers)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        self.n_workers = len(workers)
        self._address: str | None = None
        self._reading = threading.Lock()

    def address(self) -> str:
        """The scheduler's address, once it listens (blocks until then); ClusterError if the
        cluster ended before."""
        with self._reading:
            if self._address is None:
                line = self.proc.stdout.readline() if self.proc.stdout else b""
                if not line:
                    code = self.proc.wait()
                    raise ClusterError(f"the embedded cluster did not start (exit code {code})")
                self._address = str(json.loads(line)["address"])
        return self._address

    @property
    def scheduler_address(self) -> str:
        """The scheduler's address (waits for it, as :meth:`address`)."""
        return self.address()

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


def spawn_worker(address: str, name: str, options: dict[str, Any]) -> subprocess.Popen[bytes]:
    """Start one worker process of the cluster at ``address`` (it waits for the scheduler)."""
    spec = json.dumps({**options, "name": name})
    return subprocess.Popen(
        [sys.executable, "-m", "taskcell.cluster.embedded_worker", address, spec],
        env={**os.environ, **(options.get("env") or {})},
        stdin=subprocess.DEVNULL,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(workers: dict[str, dict[str, Any]]) -> None:
    """Run the cluster until stdin closes (the child's side of :class:`EmbeddedCluster`)."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    started = {}
    if len(workers) == 1:
        os.environ.update(next(iter(workers.values())).get("env") or {})
    else:
        started = {name: spawn_worker(address, name, o) for name, o in workers.items()}
    try:
        import asyncio

        from taskcell.cluster.embedded_worker import run_cluster

        asyncio.run(run_cluster(port, workers, started))
    finally:
        for proc in started.values():  # any the cluster did not adopt
            proc.kill()


if __name__ == "__main__":
    serve(json.loads(sys.argv[1]))
