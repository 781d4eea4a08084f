"""The embedded cluster: a scheduler and worker processes on this machine, in a session apart.

jupyter_client interrupts a kernel by signalling its whole process group, so a cluster started
inside the kernel's group would die at the first ■ (interrupt). The cluster therefore runs in a
child process that starts a new session (``python -m taskcell.cluster.embedded SPEC``): an
interrupt reaches only the kernel, which then stops the one cell it means to stop. The child
runs a ``SpecCluster`` named :data:`NAME`, prints the scheduler's address as soon as the
scheduler listens, and ends the cluster when the kernel closes its stdin, which also happens
when the kernel dies, or when it is stopped through its scheduler: the sidebar scales and
stops it there (:mod:`taskcell.cluster.embedded_control`), and the kernel starts a new one at
its next ``%%task``.

One worker (the default, ``taskcell.embedded-cluster.n-workers``) runs in the child process
itself, beside the scheduler: cells run in processes of their own anyway, and the cluster is up
once one process has imported Dask, while the kernel imports it too. Several workers each get a
process, with its own ``CUDA_VISIBLE_DEVICES``, started first, before the child imports Dask, so
that they import it while it does; each waits for the scheduler's port, then connects (see
:mod:`taskcell.cluster.embedded_worker`, which also starts a worker again when it exits).
Its scheduler, dashboard and workers listen on :data:`HOST` (127.0.0.1) only: a Dask worker runs
any code sent to it, and none of this is meant for another machine.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import threading
from typing import Any

from taskcell.cluster.sessions import forget_the_kernels_interrupt, popen_apart
from taskcell.errors import ClusterError

#: The name of the embedded cluster's ``SpecCluster``.
NAME = "taskcell-embedded"
#: The one interface everything of the embedded cluster listens on: nothing beyond this machine.
HOST = "127.0.0.1"


class EmbeddedCluster:
    """The child process running the embedded cluster; :meth:`address` waits for its scheduler.

    Starting it returns at once: the caller waits for the address (in a thread of its own, see
    :mod:`taskcell.cluster.connect`), and :meth:`close` may end the cluster at any moment, its
    start included.
    """

    def __init__(self, workers: dict[str, dict[str, Any]] | None = None) -> None:
        """Start the cluster with ``workers``: worker name -> worker options (JSON-able:
        nthreads, memory_limit, resources, env). None: the child reads them from its own
        Dask config (as :func:`worker_specs`), so this process need not import Dask first,
        and declines to start where that config names a scheduler."""
        spec = [] if workers is None else [json.dumps(workers)]
        self.proc = popen_apart(
            [sys.executable, "-m", "taskcell.cluster.embedded", *spec],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.n_workers = 0 if workers is None else len(workers)
        self._address: str | None = None
        self._ending = False
        self._reading = threading.Lock()

    def address(self) -> str:
        """The scheduler's address, once it listens (blocks until then); ClusterError if the
        cluster ended, or declined to start, before."""
        with self._reading:
            if self._address is None:
                line = self.proc.stdout.readline() if self.proc.stdout else b""
                said = json.loads(line) if line else {}
                if "address" not in said:
                    code = self.proc.wait()
                    why = said.get("declined") or f"exit code {code}"
                    raise ClusterError(f"the embedded cluster did not start ({why})")
                self._address, self.n_workers = str(said["address"]), int(said["workers"])
        return self._address

    @property
    def scheduler_address(self) -> str:
        """The scheduler's address (waits for it, as :meth:`address`)."""
        return self.address()

    def alive(self) -> bool:
        """Running, and not ending: a cluster stopped through its scheduler says so on its
        stdout (:func:`announce_stop`) before it answers, so a cell run after the sidebar heard
        the answer starts a new cluster rather than meet this one closing."""
        if self._ending or self.proc.poll() is not None:
            return False
        stdout = self.proc.stdout
        if self._address is not None and stdout and select.select([stdout], [], [], 0)[0]:
            self._ending = True  # the notice, or the end of the pipe: nothing else comes
        return not self._ending

    def close(self) -> None:
        """Stop the scheduler and its workers, and wait for them."""
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def worker_specs() -> dict[str, dict[str, Any]]:
    """The embedded cluster's workers: this machine's cores, memory and GPUs split between
    ``taskcell.embedded-cluster.n-workers`` of them (worker name -> options)."""
    from taskcell import config
    from taskcell.cluster.detect import advertised_resources, detect_machine

    n = config.count("embedded-cluster.n-workers") or 1
    threads = config.count("embedded-cluster.threads-per-worker")
    shares = advertised_resources(detect_machine(), n)
    return {
        f"taskcell-{i}": {
            "nthreads": threads or max(1, int(share.resources.get("CPU", 1))),
            "memory_limit": int(share.resources.get("MEMORY", 0)) or "auto",
            "resources": share.resources,
            "env": share.environ(),
        }
        for i, share in enumerate(shares)
    }


def _declined() -> str | None:
    """Why the child of an early start does not start a cluster: its config names one, or
    turns early starts off."""
    import dask.config

    from taskcell import config

    address = dask.config.get("scheduler-address", None)
    if address:
        return f"Dask's scheduler-address is {address}"
    if not config.get("embedded-cluster.start-early"):
        return "taskcell.embedded-cluster.start-early is off"
    return None


def announce_stop() -> None:
    """In the child: tell the kernel the cluster ends, stopped through its scheduler."""
    print(json.dumps({"stopping": True}), flush=True)


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
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def serve(workers: dict[str, dict[str, Any]] | None) -> None:
    """Run the cluster until stdin closes (the child's side of :class:`EmbeddedCluster`)."""
    forget_the_kernels_interrupt()
    if workers is None:
        declined = _declined()
        if declined:
            print(json.dumps({"declined": declined}), flush=True)
            return
        workers = worker_specs()
    port = _free_port()
    address = f"tcp://{HOST}:{port}"
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
    serve(json.loads(sys.argv[1]) if len(sys.argv) > 1 else None)
