"""The warm cell processes of one worker, and the GPUs it hands out to them.

Dask counts a worker's ``GPU`` resource but never says which GPU a task gets. Here each GPU
task takes specific devices from the worker's own (its ``CUDA_VISIBLE_DEVICES``, or ``0..n-1``
for a worker advertising ``GPU=n``), and runs in a process started with exactly those visible.
A cell process ends when its worker does: it reads the end of its socket and exits, and the
kernel kills it if the thread that started it goes (``PR_SET_PDEATHSIG``); a dead idle process
is never handed out again.
"""

from __future__ import annotations

import contextlib
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
        # pyplot's figures appear in the notebook (taskcell.runner.figures)
        env = {**os.environ, "MPLBACKEND": "module://taskcell.runner.figures", **environ}
        if visible_devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible_devices
        self.visible_devices = visible_devices
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "taskcell.runner.child", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            env=env,
        )
        theirs.close()
        self.channel = Channel(ours, keeps_values=True)
        # An interrupt is sent once the cell's code runs: one that came while the process was
        # still importing would end the process itself, not the cell.
        self._signalling = threading.Lock()
        self._running_cell = False
        self._interrupt_due = False

    def send(self, message: object) -> None:
        self.channel.send(message)

    def receive(self) -> tuple:
        """The next message; EOFError when the process has died."""
        return self.channel.receive()

    def interrupt(self) -> None:
        """Interrupt the cell: now if its code runs, else as soon as it starts."""
        with self._signalling:
            self._interrupt_due = not self._running_cell
            if self._running_cell and self.proc.poll() is None:
                self.proc.send_signal(signal.SIGINT)

    def cell_started(self) -> None:
        """The process says its cell's code runs: an interrupt that came before goes now."""
        with self._signalling:
            self._running_cell = True
            if self._interrupt_due and self.proc.poll() is None:
                self.proc.send_signal(signal.SIGINT)

    def cell_ended(self) -> None:
        with self._signalling:
            self._running_cell = self._interrupt_due = False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        self.channel.close()
        if self.alive():
            self.proc.kill()
        self.proc.wait()


#: Seconds between two reads of a watched cell's memory.
WATCH_INTERVAL = 0.02


def _resident(pid: int) -> int:
    """The private resident bytes of ``pid`` (``RssAnon``; 0 once it has gone): not the
    ``memfd`` segments a result is copied into on its way back (:mod:`taskcell.runner.wire`),
    which the cell's peak does not count either."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


def _descendants(pid: int) -> list[int]:
    """``pid``'s children and theirs (from ``/proc/PID/task/*/children``)."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{parent}/task"):
                with open(f"/proc/{parent}/task/{task}/children") as f:
                    kids = [int(k) for k in f.read().split()]
                found += kids
                todo += kids
    return found


class MemoryWatch:
    """Stops a cell that grows past its memory limit while it runs.

    From the moment its code starts, the cell process and its children are read every
    :data:`WATCH_INTERVAL` seconds; once what they hold has grown by more than ``limit`` over
    what the process held then (more than the cell's own peak can be below the limit), the
    process and its children are killed. The cell's recorded peak, checked against the limit
    once it ends (:mod:`taskcell.runner.remote`), catches what grew and shrank between two
    reads.
    """

    def __init__(self, process: CellProcess, limit: int) -> None:
        self.process, self.limit = process, limit
        #: The growth that made it stop the cell; 0 while it has not.
        self.stopped_at = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="taskcell-memory-watch", daemon=True)
        self._thread.start()

    def _held(self) -> int:
        pid = self.process.proc.pid
        return _resident(pid) + sum(_resident(child) for child in _descendants(pid))

    def _run(self) -> None:
        start = self._held()
        while not self._done.wait(WATCH_INTERVAL):
            grown = self._held() - start
            if grown > self.limit:
                self.stopped_at = grown
                for pid in [*_descendants(self.process.proc.pid), self.process.proc.pid]:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                return

    def stop(self) -> int:
        """Stop watching; the growth at which it killed the cell (0: it did not)."""
        self._done.set()
        self._thread.join()
        return self.stopped_at


#: How many interrupted keys a worker remembers, so a cell interrupted while queued never starts.
_REMEMBERED = 1000


class CellProcesses:
    """The worker's pool of idle cell processes, its free GPUs and the cells now running."""

    def __init__(self, devices: list[str], environ: Mapping[str, str], max_idle: int) -> None:
        self._environ = dict(environ)
        self._max_idle = max_idle
        self._lock = threading.Lock()
        self._idle: list[CellProcess] = []
        self._free_devices = list(devices)
        self._interrupted: dict[str, None] = {}  # an ordered set of the latest keys
        self._forced: dict[str, str] = {}  # key -> how a cell that ignored SIGINT was ended
        self.running: dict[str, CellProcess | None] = {}

    def prestart(self) -> None:
        """Start an idle process for a cell without GPUs, if none is idle: the first cell
        then finds one up."""
        with self._lock:
            if self._idle:
                return
        process = CellProcess("", self._environ)
        with self._lock:
            if len(self._idle) < self._max_idle:
                self._idle.append(process)
                return
        process.close()

    @contextmanager
    def checkout(self, key: str, gpus: int | None) -> Iterator[CellProcess]:
        """A process for the cell ``key`` that sees exactly ``gpus`` of the worker's GPUs
        (``None``: the worker's own devices, for MIG slices and other accelerators)."""
        with self._lock:
            if key in self._interrupted:
                raise CellInterrupted("the cell was interrupted before it started")
            wanted = gpus or 0
            if wanted > len(self._free_devices):
                raise ClusterError(
                    f"the cell asks for {wanted} GPUs but this worker has "
                    f"{len(self._free_devices)} free: {self._free_devices}"
                )
            devices, self._free_devices = self._free_devices[:wanted], self._free_devices[wanted:]
            visible = None if gpus is None else ",".join(devices)
            # The process that ran last still maps its cell's inputs (see runner.wire).
            process = next(
                (p for p in reversed(self._idle) if p.visible_devices == visible and p.alive()),
                None,
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
            if process is not None:
                process.cell_ended()
            with self._lock:
                self.running.pop(key, None)
                self._forced.pop(key, None)
                self._free_devices.extend(devices)
                # A GPU cell's process holds its CUDA context: it is not kept.
                if process is None:
                    pass
                elif process.alive() and not devices and len(self._idle) < self._max_idle:
                    self._idle.append(process)
                else:
                    process.close()

    def interrupt(self, key: str, grace: float) -> bool:
        """Send SIGINT to the process running ``key``, then SIGTERM and SIGKILL each ``grace``
        seconds later while it still runs that cell; a key not running yet never starts here.
        False when the cell runs nowhere here."""
        with self._lock:
            self._interrupted[key] = None
            while len(self._interrupted) > _REMEMBERED:
                del self._interrupted[next(iter(self._interrupted))]
            if key not in self.running:
                return False
            process = self.running[key]
        if process is not None:
            process.interrupt()
            self._escalate_later(key, process, grace, [signal.SIGTERM, signal.SIGKILL])
        return True

    def _escalate_later(
        self, key: str, process: CellProcess, grace: float, signals: list[signal.Signals]
    ) -> None:
        def escalate() -> None:
            with self._lock:
                if self.running.get(key) is not process or not process.alive():
                    return
                self._forced[key] = f"{signals[0].name} after {grace:g} s"
            process.proc.send_signal(signals[0])
            if signals[1:]:
                self._escalate_later(key, process, grace, signals[1:])

        timer = threading.Timer(grace, escalate)
        timer.daemon = True
        timer.start()

    def forced(self, key: str) -> str | None:
        """How the cell ``key`` was ended after it ignored an interrupt, if it was."""
        with self._lock:
            return self._forced.get(key)


def worker_devices(gpu_count: float) -> list[str]:
    """The GPU ids a worker owns: its ``CUDA_VISIBLE_DEVICES``, else ``0..gpu_count-1``."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if visible.strip():
        return [d.strip() for d in visible.split(",") if d.strip()]
    return [str(i) for i in range(int(gpu_count))]
