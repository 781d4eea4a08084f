"""Shared fixtures: real ``dask scheduler`` and ``dask worker`` processes on 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import pytest
from waiting import PATIENCE, eventually

# taskcell's defaults join Dask's config before distributed.utils_test copies that config:
# gen_cluster puts the copy back after each test, and the tests after it read the defaults.
import taskcell.config  # noqa: F401

T = TypeVar("T")


def most_at_once(intervals):
    """The largest number of (start, end) intervals that overlap at one instant."""
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DaskProcesses:
    """A scheduler process and the worker processes a test starts against it, all stopped after."""

    def __init__(self, dashboard: bool = False) -> None:
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        #: The port of the scheduler's dashboard, on 127.0.0.1, a new one at each start (None:
        #: it serves none).
        self.dashboard_port: int | None = 0 if dashboard else None
        self.procs: list[subprocess.Popen] = []
        self.start_scheduler()

    def start_scheduler(self) -> None:
        """Start the scheduler process on this cluster's port (again, after it was killed)."""
        if self.dashboard_port is not None:
            self.dashboard_port = free_port()
        serves = (
            ["--dashboard-address", f"127.0.0.1:{self.dashboard_port}"]
            if self.dashboard_port is not None
            else ["--no-dashboard"]
        )
        self.scheduler = self._spawn(
            ["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(self.port)],
            serves,
        )
        self._wait_for_port()

    def stop_scheduler(self) -> None:
        """Stop the scheduler, and its dashboard with it, as Ctrl-C does."""
        self.scheduler.send_signal(signal.SIGINT)
        try:
            self.scheduler.wait(PATIENCE)
        except subprocess.TimeoutExpired:
            self.scheduler.kill()
            self.scheduler.wait()

    def _spawn(
        self, module_args: list[str], flags: list[str], env: Mapping[str, str] | None = None
    ) -> subprocess.Popen:
        full_env = {**os.environ, **(env or {})}
        proc = subprocess.Popen(
            [sys.executable, "-m", *module_args, *flags],
            env=full_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.procs.append(proc)
        return proc

    def _wait_for_port(self) -> None:
        def refused() -> int:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", self.port))

        eventually(refused, f"the scheduler to listen on port {self.port}", holds=lambda e: e == 0)

    def worker(
        self, *flags: str, env: Mapping[str, str] | None = None, name: str | None = None
    ) -> subprocess.Popen:
        """Start ``dask worker ADDRESS *flags`` exactly as a user would type it."""
        named = ["--name", name] if name else []
        return self._spawn(
            ["distributed.cli.dask_worker", self.address],
            ["--no-dashboard", "--nthreads", "1", *named, *flags],
            env,
        )

    def wait_for_workers(self, n: int, timeout: float = PATIENCE) -> None:
        """Block until ``n`` workers have joined the scheduler."""
        from distributed import Client

        with Client(self.address, timeout=timeout) as client:
            client.wait_for_workers(n, timeout=timeout)

    def stop(self) -> None:
        """Workers first, then the scheduler; SIGINT, as a Ctrl-C, closes Dask at once (SIGTERM
        waits seconds for the nanny, and a worker whose scheduler is gone waits to reconnect)."""
        workers = [p for p in self.procs if p is not self.scheduler]
        for group in (workers, [self.scheduler]):
            for proc in group:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGINT)
            for proc in group:
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


@pytest.fixture
def dask_processes() -> Iterator[DaskProcesses]:
    """A fresh scheduler process; the test adds the workers it needs."""
    cluster = DaskProcesses()
    try:
        yield cluster
    finally:
        cluster.stop()


class KernelSession:
    """A real IPython kernel (jupyter_client), fed code as a notebook would feed it."""

    def __init__(
        self, env: Mapping[str, str] | None = None, connection_file: str | None = None
    ) -> None:
        """A kernel with ``env`` added to this process's environment; ``connection_file``
        names its connection file (Jupyter's server names it ``kernel-<id>.json``)."""
        from jupyter_client.manager import KernelManager

        extra = {"env": {**os.environ, **env}} if env else {}
        named = {"connection_file": connection_file} if connection_file else {}
        # IPC: the kernel's sockets are files of its own, so no other process can take a port
        # chosen for it before it binds it (ZMQError: Address already in use).
        self._sockets = tempfile.mkdtemp(prefix="taskcell-kernel-")
        self.manager = KernelManager(
            kernel_name="python3",
            transport="ipc",
            ip=os.path.join(self._sockets, "kernel"),
            **named,
        )
        self.manager.start_kernel(**extra)
        self.client = self.manager.client()
        self.client.start_channels()
        try:
            self.client.wait_for_ready(timeout=60)
        except RuntimeError:
            self.stop()
            raise
        #: Every output message read so far, whichever execution it came under: a background
        #: thread's output comes under the cell running when it is sent.
        self.log: list[dict] = []

    def run(self, code: str, timeout: float = 60) -> Execution:
        """Execute ``code`` and collect every output message it produced."""
        return self.wait(self.start(code), timeout)

    def start(self, code: str) -> str:
        """Send ``code`` without waiting; returns the message id."""
        return self.client.execute(code)

    def wait(self, msg_id: str, timeout: float = 60) -> Execution:
        """Collect the outputs of an execution started with :meth:`start`."""
        result = Execution()
        deadline = time.monotonic() + timeout
        while True:
            msg = self.client.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
            self.log.append(msg)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
            result.collect(msg)
        reply = self.client.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = self.client.get_shell_msg(timeout=timeout)
        result.status = reply["content"]["status"]
        return result

    def value(self, expr: str):
        """The value of ``expr`` in the kernel, through its repr."""
        import ast

        out = self.run(f"print(repr({expr}))")
        assert out.status == "ok", out.error_text
        return ast.literal_eval(out.stdout.strip())

    def eventual_value(
        self, expr: str, what: str, holds: Callable[[Any], object] = bool, timeout: float = PATIENCE
    ) -> Any:
        """The value of ``expr`` in the kernel once ``holds`` accepts it (by default: once it is
        truthy); the failure names ``what`` and the last value."""
        return eventually(lambda: self.value(expr), what, timeout, holds=holds, every=0.2)

    def read_until(
        self, read: Callable[[], T], what: str, holds: Callable[[T], object] = bool
    ) -> T:
        """Read output messages into :attr:`log`, one at a time, until ``holds`` accepts what
        ``read()`` makes of them; returns that. For output that comes while a cell still runs."""

        def next_message() -> T:
            with contextlib.suppress(queue.Empty):
                self.log.append(self.client.get_iopub_msg(timeout=0.1))
            return read()

        return eventually(next_message, what, holds=holds, every=0)

    def printed(self, msg_id: str) -> str:
        """What the execution ``msg_id`` printed, among the messages read so far."""
        return "".join(
            m["content"]["text"]
            for m in self.log
            if m["msg_type"] == "stream" and m["parent_header"].get("msg_id") == msg_id
        )

    def shown(self, msg_id: str) -> list[str]:
        """The texts the execution ``msg_id`` displayed, among the messages read so far."""
        return [
            m["content"]["data"].get("text/plain", "")
            for m in self.log
            if m["msg_type"] in ("display_data", "update_display_data")
            and m["parent_header"].get("msg_id") == msg_id
        ]

    def wait_for_print(self, msg_id: str, text: str) -> str:
        """Read the output until the execution ``msg_id`` has printed ``text`` (however it is
        chunked); returns what it printed."""
        return self.read_until(
            lambda: self.printed(msg_id), f"the cell to print {text!r}", lambda out: text in out
        )

    def stop(self) -> None:
        self.client.stop_channels()
        if self.manager.has_kernel:
            self.manager.shutdown_kernel(now=True)
        shutil.rmtree(self._sockets, ignore_errors=True)


class Execution:
    """What one execution showed: streams, displays, its result and its error."""

    def __init__(self) -> None:
        self.messages: list[dict] = []
        self.status = ""

    def collect(self, msg: dict) -> None:
        self.messages.append(msg)

    def of_type(self, *types: str) -> list[dict]:
        return [m for m in self.messages if m["msg_type"] in types]

    @property
    def stdout(self) -> str:
        return "".join(
            m["content"]["text"] for m in self.of_type("stream") if m["content"]["name"] == "stdout"
        )

    @property
    def stderr(self) -> str:
        return "".join(
            m["content"]["text"] for m in self.of_type("stream") if m["content"]["name"] == "stderr"
        )

    @property
    def result(self) -> str | None:
        results = self.of_type("execute_result")
        return results[0]["content"]["data"]["text/plain"] if results else None

    @property
    def error_text(self) -> str:
        errors = self.of_type("error")
        if not errors:
            return ""
        content = errors[0]["content"]
        return f"{content['ename']}: {content['evalue']}\n" + "\n".join(content["traceback"])

    @property
    def displays(self) -> list[dict]:
        return [m["content"]["data"] for m in self.of_type("display_data", "update_display_data")]


def held_result(tmp_path) -> tuple[str, str, str]:
    """A cell whose value pickles at once in its own process but, where its result is opened
    (the kernel: the worker carries the result unopened), loads only once a gate file exists:
    the kernel is then fetching its result. The cell, the file written when the load starts
    holding, and the gate."""
    marker, gate = str(tmp_path / "holding"), str(tmp_path / "gate")
    code = textwrap.dedent(f"""
        %%task
        import os, time
        def arrive():
            if "TASKCELL_WORKER_NAME" not in os.environ:  # not a cell's process
                open({marker!r}, "w").close()
                deadline = time.monotonic() + 300
                while not os.path.exists({gate!r}) and time.monotonic() < deadline:
                    time.sleep(0.05)
            return Held.__new__(Held)
        class Held:
            def __reduce__(self):
                return (arrive, ())
        held = Held()
        """).strip("\n")
    return code, marker, gate


@pytest.fixture
def fresh_kernel() -> Iterator[KernelSession]:
    """A kernel of the test's own, with taskcell loaded."""
    session = KernelSession()
    try:
        assert session.run("%load_ext taskcell").status == "ok"
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def kernel() -> Iterator[KernelSession]:
    """A real kernel with taskcell loaded, shared by one test module. Its tests choose their
    cluster, so it starts no embedded one early (``tests/kernel_magics/test_early_start.py``
    covers that)."""
    session = KernelSession(env={"DASK_TASKCELL__EMBEDDED_CLUSTER__START_EARLY": "False"})
    try:
        out = session.run("%load_ext taskcell")
        assert out.status == "ok", out.error_text
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def module_dask() -> Iterator[DaskProcesses]:
    """A scheduler process shared by one test module."""
    cluster = DaskProcesses()
    try:
        yield cluster
    finally:
        cluster.stop()
