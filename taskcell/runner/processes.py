"""The warm cell processes of one worker, and the GPUs it hands out to them.

Dask counts a worker's ``GPU`` resource but never says which GPU a task gets. Here each GPU
task takes specific devices from the worker's own (its ``CUDA_VISIBLE_DEVICES``, or ``0..n-1``
for a worker advertising ``GPU=n``), and runs in a process started with exactly those visible.
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

from taskcell.runner.wire import Channel


class CellProcess:
    """One ``taskcell.runner.child`` process and the socket to it."""

    def __init__(self, visible_devices: str, environ: Mapping[str, str]) -> None:
        ours, theirs = socket.socketpair()
        env = {**os.environ, **environ, "CUDA_VISIBLE_DEVICES": visible_devices}
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

    def __init__(self, devices: list[str], environ: Mapping[str, str]) -> None:
        self._environ = dict(environ)
        self._lock = threading.Lock()
        self._idle: list[CellProcess] = []
        self._free_devices = list(devices)
        self.running: dict[str, CellProcess] = {}

    @contextmanager
    def checkout(self, key: str, gpus: int) -> Iterator[CellProcess]:
        """A process for the cell ``key`` that sees only the ``gpus`` devices it is given."""
        with self._lock:
            devices, self._free_devices = self._free_devices[:gpus], self._free_devices[gpus:]
            visible = ",".join(devices)
            matching = [p for p in self._idle if p.visible_devices == visible]
            process = matching[0] if matching else None
            if process is not None:
                self._idle.remove(process)
        process = process or CellProcess(visible, self._environ)
        self.running[key] = process
        try:
            yield process
        finally:
            del self.running[key]
            with self._lock:
                self._free_devices.extend(devices)
                if process.alive():
                    self._idle.append(process)
                else:
                    process.close()

    def interrupt(self, key: str) -> bool:
        """Send SIGINT to the process running ``key``; False when it runs nowhere here."""
        process = self.running.get(key)
        if process is None:
            return False
        process.interrupt()
        return True

    def close(self) -> None:
        with self._lock:
            for process in self._idle + list(self.running.values()):
                process.close()
            self._idle.clear()


def worker_devices(gpu_count: float) -> list[str]:
    """The GPU ids a worker owns: its ``CUDA_VISIBLE_DEVICES``, else ``0..gpu_count-1``."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if visible.strip():
        return [d.strip() for d in visible.split(",") if d.strip()]
    return [str(i) for i in range(int(gpu_count))]
