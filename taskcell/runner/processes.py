"""The warm cell processes of one worker, and the GPUs it hands out to them.

Dask counts a worker's ``GPU`` resource but never says which GPU a task gets. Here each GPU
task takes specific devices from the worker's own (its ``CUDA_VISIBLE_DEVICES``, or ``0..n-1``
for a worker advertising ``GPU=n``), and runs in a process started with exactly those visible.
A cell process ends when its worker does: it reads the end of its socket and exits, and the
kernel kills it if the thread that started it goes (``PR_SET_PDEATHSIG``); a dead idle process
is never handed out again.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from taskcell.errors import CellInterrupted, ClusterError
from taskcell.runner.wire import Channel


class CellProcess:
    """One ``taskcell.runner.child`` process and the socket to it."""

    def __init__(self, visible_devices: str | None, environ: Mapping[str, str]) -> None:
        ours, theirs = socket.socketpair()
        env = {**os.environ, **environ}
        if visible_devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible_devices
        self.visible_devices = visible_devices
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "taskcell.runner.child", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            env=env,
        )
        theirs.close()
        self.channel = Channel(ours)

    def send(self, message: object) -> None:
        self.channel.send(message)

    def receive(self) -> tuple:
        """The next message; EOFError when the process has died."""
        return self.channel.receive()

    def interrupt(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        self.channel.close()
        if self.alive():
            self.proc.kill()
        self.proc.wait()


class CellProcesses:
    """The worker's pool of idle cell processes, its free GPUs and the cells now running."""

    def __init__(self, devices: list[str], environ: Mapping[str, str], max_idle: int) -> None:
        self._environ = dict(environ)
        self._max_idle = max_idle
        self._lock = threading.Lock()
        self._idle: list[CellProcess] = []
        self._free_devices = list(devices)
        self._interrupted: set[str] = set()
        self.running: dict[str, CellProcess | None] = {}

    @contextmanager
    def checkout(self, key: str, gpus: int | None) -> Iterator[CellProcess]:
        """A process for the cell ``key`` that sees exactly ``gpus`` of the worker's GPUs
        (``None``: the worker's own devices, for MIG slices and other accelerators)."""
        with self._lock:
            if key in self._interrupted:
                self._interrupted.discard(key)
                raise CellInterrupted("the cell was interrupted before it started")
            wanted = gpus or 0
            if wanted > len(self._free_devices):
                raise ClusterError(
                    f"the cell asks for {wanted} GPUs but this worker has "
                    f"{len(self._free_devices)} free: {self._free_devices}"
                )
            devices, self._free_devices = self._free_devices[:wanted], self._free_devices[wanted:]
            visible = None if gpus is None else ",".join(devices)
            process = next(
                (p for p in self._idle if p.visible_devices == visible and p.alive()), None
            )
            if process is not None:
                self._idle.remove(process)
            self.running[key] = None  # an interrupt from now on is not lost
        try:
            process = process or CellProcess(visible, self._environ)
            self.running[key] = process
            if key in self._interrupted:
                raise CellInterrupted("the cell was interrupted before it started")
            yield process
        finally:
            with self._lock:
                self.running.pop(key, None)
                self._interrupted.discard(key)
                self._free_devices.extend(devices)
                # A GPU cell's process holds its CUDA context: it is not kept.
                keep = process is not None and process.alive() and not devices
                if keep and len(self._idle) < self._max_idle:
                    self._idle.append(process)
                elif process is not None:
                    process.close()

    def interrupt(self, key: str) -> bool:
        """Send SIGINT to the process running ``key``; False when it runs nowhere here."""
        with self._lock:
            if key not in self.running:
                return False
            process = self.running[key]
            if process is None:
                self._interrupted.add(key)
        if process is not None:
            process.interrupt()
        return True


def worker_devices(gpu_count: float) -> list[str]:
    """The GPU ids a worker owns: its ``CUDA_VISIBLE_DEVICES``, else ``0..gpu_count-1``."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if visible.strip():
        return [d.strip() for d in visible.split(",") if d.strip()]
    return [str(i) for i in range(int(gpu_count))]
