"""Faults across a real network (issue 21): the scheduler, a worker and the kernel on three hosts
of this machine, network namespaces joined by veth links, and links cut and restored mid-cell.

::

    kernel (this host) --k-- scheduler (netns S) --w-- worker (netns W)

A cut leaves every process running and every TCP connection open, as an unplugged cable does:
nothing is refused, packets just stop. The cell must end with a clear error once the silence
outlasts ``taskcell.scheduler-timeout``, write nothing back, and run no task twice; the next
cell runs once the link is back. The namespaces are made by the test as root; elsewhere the
tests are skipped, saying why.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest
from conftest import KernelSession, held_result
from waiting import eventually

pytestmark = pytest.mark.slow

TIMEOUT_S = 4  # taskcell.scheduler-timeout in the kernel
PORT = 8786


def cell(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


class Hosts:
    """Two network namespaces, the scheduler in one and a worker in the other, joined to this
    host (the kernel's) and to each other by veth links that :meth:`cut` takes down."""

    def __init__(self) -> None:
        tag = f"{os.getpid() % 100_000}"
        self.ns = {"scheduler": f"tc{tag}s", "worker": f"tc{tag}w"}
        # The link's end that cut() takes down: the scheduler's. The other end keeps its route
        # (marked linkdown), so its packets are dropped, not sent along this host's default
        # route to whatever answers there.
        self.ends = {"kernel": f"tc{tag}s", "worker": f"tc{tag}x"}
        a, b = self._free_subnets()
        self.scheduler_ip, self.worker_side_ip, self.worker_ip = f"{a}.2", f"{b}.1", f"{b}.2"
        self.address = f"tcp://{self.scheduler_ip}:{PORT}"
        self.procs: list[subprocess.Popen] = []
        s, w = self.ns["scheduler"], self.ns["worker"]
        ip("netns", "add", s)
        ip("netns", "add", w)
        ip("link", "add", f"tc{tag}k", "type", "veth", "peer", "name", f"tc{tag}s", "netns", s)
        ip("addr", "add", f"{a}.1/24", "dev", f"tc{tag}k")
        ip("link", "set", f"tc{tag}k", "up")
        ip(
            "-n",
            s,
            "link",
            "add",
            f"tc{tag}x",
            "type",
            "veth",
            "peer",
            "name",
            f"tc{tag}w",
            "netns",
            w,
        )
        for ns, dev, addr in [
            (s, f"tc{tag}s", f"{a}.2/24"),
            (s, f"tc{tag}x", f"{b}.1/24"),
            (w, f"tc{tag}w", f"{b}.2/24"),
        ]:
            ip("-n", ns, "addr", "add", addr, "dev", dev)
            ip("-n", ns, "link", "set", dev, "up")
        for ns in (s, w):
            ip("-n", ns, "link", "set", "lo", "up")

    @staticmethod
    def _free_subnets() -> tuple[str, str]:
        used = subprocess.run(["ip", "-4", "addr"], capture_output=True, text=True).stdout
        for third in range(10, 250, 2):
            a, b = f"10.213.{third}", f"10.213.{third + 1}"
            if f"{a}." not in used and f"{b}." not in used:
                return a, b
        raise RuntimeError("no free 10.213.x.0/24 subnets")

    def _spawn(self, host: str, *args: str) -> subprocess.Popen:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
        proc = subprocess.Popen(
            ["ip", "netns", "exec", self.ns[host], sys.executable, "-m", *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.procs.append(proc)
        return proc

    def start(self) -> None:
        """The scheduler, then one worker of two threads, connected."""
        self._spawn(
            "scheduler",
            "distributed.cli.dask_scheduler",
            "--host",
            "0.0.0.0",
            "--port",
            str(PORT),
            "--no-dashboard",
        )
        eventually(self._listening, "the scheduler to listen")
        self._spawn(
            "worker",
            "distributed.cli.dask_worker",
            f"tcp://{self.worker_side_ip}:{PORT}",
            "--host",
            self.worker_ip,
            "--nthreads",
            "2",
            "--name",
            "far",
            "--no-dashboard",
        )
        from distributed import Client

        with Client(self.address, timeout=60) as client:
            client.wait_for_workers(1, timeout=90)

    def _listening(self) -> bool:
        with socket.socket() as s:
            s.settimeout(1)
            return s.connect_ex((self.scheduler_ip, PORT)) == 0

    def cut(self, link: str) -> None:
        """Take the ``kernel`` (kernel to scheduler) or ``worker`` (worker to scheduler) link
        down: packets stop both ways, connections stay open."""
        ip("-n", self.ns["scheduler"], "link", "set", self.ends[link], "down")

    def restore(self, link: str) -> None:
        ip("-n", self.ns["scheduler"], "link", "set", self.ends[link], "up")

    def idle(self) -> bool:
        """Whether the worker runs nothing (asked from this host, through the scheduler)."""
        from distributed import Client

        with Client(self.address, timeout=30) as client:
            return not any(client.processing().values())

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in self.procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _why_not() -> str | None:
    """Why namespaces cannot be made here, or None."""
    if sys.platform != "linux":
        return "network namespaces are Linux's"
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    probe = f"tc{os.getpid() % 100_000}p"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"ip netns add is not allowed here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    why = _why_not()
    if why:
        pytest.skip(why)
    made = Hosts()
    try:
        made.start()
        yield made
    finally:
        made.close()


@pytest.fixture
def kernel(hosts: Hosts) -> Iterator[KernelSession]:
    session = KernelSession()
    try:
        out = session.run(
            "%load_ext taskcell\nimport dask\n"
            f"dask.config.set({{'taskcell.scheduler-timeout': '{TIMEOUT_S}s'}})\n"
            f"%task_cluster {hosts.address}\nkept = 'before'"
        )
        assert out.status == "ok", out.error_text
        yield session
    finally:
        session.stop()


def sees_the_worker(kernel: KernelSession) -> bool:
    """Whether the kernel's scheduler answers and lists the worker as live."""
    out = kernel.run("print(get_ipython().run_line_magic('task_cluster', ''))")
    return out.status == "ok" and "(1 workers)" in out.stdout


def held_cell(starts, gate) -> str:
    """A cell that records its start, then runs until the test opens ``gate``."""
    return cell(f"""
        %%task --name held
        import pathlib, time
        with open({str(starts)!r}, "a") as f:
            f.write("held\\n")
        print("started", flush=True)
        while not pathlib.Path({str(gate)!r}).exists():
            time.sleep(0.05)
        kept = "held"
    """)


def after_the_cut(kernel: KernelSession, hosts: Hosts, starts, gate) -> None:
    """Once the link is back: the next cell runs, and no task ran twice."""
    eventually(lambda: sees_the_worker(kernel), "the kernel to see the worker again")
    out = kernel.run(
        cell(f"""
        %%task --name next
        import os
        with open({str(starts)!r}, "a") as f:
            f.write("next\\n")
        kept = os.environ["TASKCELL_WORKER_NAME"]
    """)
    )
    assert out.status == "ok", out.error_text
    assert kernel.value("kept") == "far"
    gate.touch()
    eventually(hosts.idle, "the worker to run nothing")
    assert starts.read_text().splitlines() == ["held", "next"]


def test_a_cut_between_kernel_and_scheduler_ends_the_cell_and_the_next_runs(
    hosts, kernel, tmp_path
):
    starts, gate = tmp_path / "starts", tmp_path / "gate"
    msg_id = kernel.start(held_cell(starts, gate))
    kernel.wait_for_print(msg_id, "started")
    hosts.cut("kernel")
    try:
        out = kernel.wait(msg_id, timeout=120)
        error = out.of_type("error")[0]["content"]
        assert error["ename"] == "ClusterError", out.error_text
        assert len(error["traceback"]) == 1, error["traceback"]
        assert f"the scheduler at {hosts.address} has not answered" in error["traceback"][0]
        assert f"taskcell.scheduler-timeout is {TIMEOUT_S} s" in error["traceback"][0]
        assert "nothing was written back" in error["traceback"][0]
        assert kernel.value("kept") == "before"
    finally:
        hosts.restore("kernel")
    after_the_cut(kernel, hosts, starts, gate)


def test_a_cut_while_the_result_comes_back_ends_the_cell_and_the_next_runs(hosts, kernel, tmp_path):
    """The kernel is fetching the finished cell's result (held as it loads); the kernel's
    link goes down then: the cell ends in one line after the timeout, nothing is bound."""
    code, marker, gate = held_result(tmp_path)
    msg_id = kernel.start(code)
    eventually(lambda: os.path.exists(marker), "the kernel to be fetching the cell's result")
    hosts.cut("kernel")
    try:
        out = kernel.wait(msg_id, timeout=120)
        error = out.of_type("error")[0]["content"]
        assert error["ename"] == "ClusterError", out.error_text
        assert len(error["traceback"]) == 1, error["traceback"]
        assert "has not answered" in error["traceback"][0]
        assert "nothing was written back" in error["traceback"][0]
    finally:
        open(gate, "w").close()
        hosts.restore("kernel")
    assert kernel.value("'held' in globals()") is False
    eventually(lambda: sees_the_worker(kernel), "the kernel to see the worker again")
    assert kernel.run("%%task\nafter = 1").status == "ok"


def test_a_cut_between_worker_and_scheduler_ends_the_cell_and_the_next_runs(
    hosts, kernel, tmp_path
):
    starts, gate = tmp_path / "starts", tmp_path / "gate"
    msg_id = kernel.start(held_cell(starts, gate))
    kernel.wait_for_print(msg_id, "started")
    hosts.cut("worker")
    try:
        out = kernel.wait(msg_id, timeout=120)
        error = out.of_type("error")[0]["content"]
        assert error["ename"] == "ClusterError", out.error_text
        assert len(error["traceback"]) == 1, error["traceback"]
        assert f"worker tcp://{hosts.worker_ip}:" in error["traceback"][0]
        assert "nothing was written back" in error["traceback"][0]
        assert kernel.value("kept") == "before"
    finally:
        hosts.restore("worker")
    after_the_cut(kernel, hosts, starts, gate)


def test_a_cut_before_submission_refuses_the_cell_and_the_next_runs(hosts, kernel, tmp_path):
    starts, gate = tmp_path / "starts", tmp_path / "gate"
    gate.touch()
    # The kernel looks at the workers again before it submits (its view is kept a second).
    forget = (
        "from taskcell.cluster import connect\nconnect.forget_workers(connect.current_client())"
    )
    assert kernel.run(forget).status == "ok"
    hosts.cut("kernel")
    try:
        out = kernel.run(held_cell(starts, gate), timeout=120)
        error = out.of_type("error")[0]["content"]
        assert error["ename"] == "ClusterError", out.error_text
        assert len(error["traceback"]) == 1, error["traceback"]
        assert f"the scheduler at {hosts.address} has not answered" in error["traceback"][0]
        assert "nothing was submitted" in error["traceback"][0]
        assert "TimeoutError" not in error["traceback"][0]
        assert kernel.value("kept") == "before"
    finally:
        hosts.restore("kernel")
    eventually(lambda: sees_the_worker(kernel), "the kernel to see the worker again")
    out = kernel.run("%%task\nkept = 'next'")
    assert out.status == "ok", out.error_text
    assert kernel.value("kept") == "next"
    assert not starts.exists()
