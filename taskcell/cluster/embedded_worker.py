"""The embedded cluster's worker processes (see :mod:`taskcell.cluster.embedded`): its several
workers are :class:`EmbeddedWorker` processes (``python -m taskcell.cluster.embedded_worker
ADDRESS SPEC``) in the ``SpecCluster`` of :mod:`taskcell.cluster.embedded_serve`.

A worker process imports Dask, waits for the scheduler's port to open, and serves. Its
:class:`EmbeddedWorker` starts it again when it exits, as a nanny would, unless it did not live
:data:`RESTART_AFTER` seconds (it would only fail again) or is being retired. The cluster
scales and stops itself through its scheduler (:mod:`taskcell.cluster.embedded_control`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import subprocess
import sys
import time
from typing import Any

from distributed.core import Status
from distributed.deploy.spec import ProcessInterface

from taskcell.cluster.embedded import HOST, hand_credentials, security_from, spawn_worker

#: Seconds a worker process waits for the scheduler's port before giving up.
PORT_WAIT = 60.0
#: A worker process that exits after running at least this long is started again (seconds).
RESTART_AFTER = 5.0
#: Seconds a worker process gets to exit after SIGTERM before it is killed.
STOP_GRACE = 5.0

#: Worker processes started before the cluster, by name, until their EmbeddedWorker adopts them.
_started: dict[str, subprocess.Popen[bytes]] = {}
#: The cluster's TLS credentials, handed to each worker process it starts (None: plain TCP).
_credentials: dict[str, str] | None = None


class EmbeddedWorker(ProcessInterface):
    """One worker process of the embedded cluster, as ``SpecCluster`` starts and stops it."""

    def __init__(self, scheduler: str, name: str, **options: Any) -> None:
        super().__init__(scheduler, name)
        self.scheduler_address, self.name, self.options = scheduler, name, options
        self.proc: subprocess.Popen[bytes] | None = None
        self._keeper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Adopt the process started for this worker before the cluster, or start one; it
        connects on its own."""
        self.proc = _started.pop(self.name, None) or self._spawn()
        self._keeper = asyncio.ensure_future(self._keep())
        await super().start()

    def _spawn(self) -> subprocess.Popen[bytes]:
        proc = spawn_worker(self.scheduler_address, self.name, self.options)
        hand_credentials(proc, _credentials)
        return proc

    def stop_keeping(self) -> None:
        """Do not start the process again when it exits: it is being retired."""
        if self._keeper is not None:
            self._keeper.cancel()

    async def _keep(self) -> None:
        started = time.monotonic()
        while self.proc is not None:
            await asyncio.to_thread(self.proc.wait)
            if self.status == Status.closed or time.monotonic() - started < RESTART_AFTER:
                return
            started = time.monotonic()
            self.proc = self._spawn()

    async def close(self) -> None:
        """SIGTERM, then SIGKILL after :data:`STOP_GRACE` seconds."""
        self.stop_keeping()
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                await asyncio.to_thread(proc.wait, STOP_GRACE)
            except subprocess.TimeoutExpired:
                proc.kill()
        await super().close()


def expect_workers(
    started: dict[str, subprocess.Popen[bytes]], credentials: dict[str, str] | None
) -> None:
    """Before the cluster starts: the worker processes already ``started``, by name, which
    their :class:`EmbeddedWorker` adopts, and the ``credentials`` handed to each process it
    starts (None: plain TCP)."""
    global _credentials
    _started.update(started)
    _credentials = credentials


def _wait_for_port(address: str) -> None:
    host, _, port = address.partition("://")[2].rpartition(":")
    deadline = time.monotonic() + PORT_WAIT
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                sys.exit(f"taskcell: no scheduler at {address} after {PORT_WAIT:g} s")
            time.sleep(0.01)


def _read_credentials() -> dict[str, str] | None:
    """The line the cluster hands on stdin (:func:`~taskcell.cluster.embedded.hand_credentials`):
    its TLS credentials, or None for plain TCP; exits where the cluster ended first."""
    line = sys.stdin.buffer.readline()
    if not line:
        sys.exit("taskcell: the embedded cluster ended before this worker started")
    said = json.loads(line)
    return dict(said) if said else None


async def _serve(address: str, options: dict[str, Any], credentials: dict | None) -> None:
    from distributed import Worker

    kwargs = {k: v for k, v in options.items() if k != "env"}
    security = security_from(credentials) if credentials else None
    async with Worker(address, host=HOST, dashboard=False, security=security, **kwargs) as worker:
        await worker.finished()


if __name__ == "__main__":
    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    credentials = _read_credentials()
    _wait_for_port(sys.argv[1])
    asyncio.run(_serve(sys.argv[1], json.loads(sys.argv[2]), credentials))
