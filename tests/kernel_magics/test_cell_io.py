"""A ``%%task`` cell's input and output as a notebook user meets them: ``input()`` says at once
why nobody can type, stdout and stderr arrive in the order the cell wrote them, and a file its
``with`` closed is left behind quietly. A real kernel against real scheduler and worker
processes.

The worker runs without a nanny, its stdin a pipe nobody writes to: as the embedded cluster's
one worker, whose stdin is the kernel's end of its lifeline, a cell that read it would wait
forever.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def quiet_stdin_worker(module_dask) -> Iterator[subprocess.Popen]:
    """A one-thread worker in one process, whose stdin is a pipe left open and silent."""
    flags = ["--no-dashboard", "--no-nanny", "--nthreads", "1", "--name", "io"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", module_dask.address, *flags],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        module_dask.wait_for_workers(1)
        yield proc
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        assert proc.stdin is not None
        proc.stdin.close()


@pytest.fixture(scope="module")
def nb(kernel, module_dask, quiet_stdin_worker):
    out = kernel.run(f"%task_cluster {module_dask.address}")
    assert out.status == "ok", out.error_text
    return kernel


def cell(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


@pytest.mark.parametrize(
    "call", ["input('your name? ')", "__import__('getpass').getpass()", "getpass.getpass()"]
)
def test_asking_for_input_fails_at_once_saying_why(nb, call):
    out = nb.run(f"%%task\nimport getpass\nanswer = {call}", timeout=120)
    assert out.status == "error"
    assert "StdinNotImplementedError" in out.error_text
    assert "nobody can type" in out.error_text
    assert "read the value in a plain cell" in out.error_text
    assert call in out.error_text  # the user's own line, in the user's traceback


def test_the_error_is_ipythons_own_and_catchable_as_such(nb):
    out = nb.run(
        cell("""
        %%task
        from IPython.core.error import StdinNotImplementedError
        try:
            input()
        except StdinNotImplementedError as e:
            caught = type(e).__name__
        """),
        timeout=120,
    )
    assert out.status == "ok", out.error_text
    assert nb.value("caught") == "StdinNotImplementedError"


def test_reading_stdin_finds_it_at_its_end(nb):
    out = nb.run(
        cell("""
        %%task
        import subprocess, sys
        read = (sys.stdin.read(), sys.stdin.readline(), sys.stdin.readlines())
        piped = subprocess.run(["cat"], capture_output=True, text=True, timeout=60).stdout
        """),
        timeout=120,
    )
    assert out.status == "ok", out.error_text
    assert nb.value("(read, piped)") == (("", "", []), "")


def streamed(nb, msg_id: str) -> list[tuple[str, str]]:
    """The execution's stream messages in arrival order, consecutive ones of one stream
    joined: what the notebook shows, however the text was chunked."""
    runs: list[tuple[str, str]] = []
    for msg in nb.log:
        if msg["msg_type"] != "stream" or msg["parent_header"].get("msg_id") != msg_id:
            continue
        name, text = msg["content"]["name"], msg["content"]["text"]
        if runs and runs[-1][0] == name:
            runs[-1] = (name, runs[-1][1] + text)
        else:
            runs.append((name, text))
    return runs


def interleaved(n: int) -> list[tuple[str, str]]:
    return [pair for i in range(n) for pair in (("stdout", f"out {i}\n"), ("stderr", f"err {i}\n"))]


def test_stdout_and_stderr_arrive_in_the_order_written(nb):
    msg_id = nb.start(
        cell("""
        %%task
        import sys
        for i in range(20):
            print("out", i)
            print("err", i, file=sys.stderr)
        """)
    )
    out = nb.wait(msg_id, timeout=120)
    assert out.status == "ok", out.error_text
    assert streamed(nb, msg_id) == interleaved(20)


def test_a_background_cell_shows_its_output_in_the_order_written(nb):
    out = nb.run(
        cell("""
        %%task --bg --name ordered
        import sys
        for i in range(20):
            print("out", i)
            print("err", i, file=sys.stderr)
        """)
    )
    assert out.status == "ok", out.error_text
    assert nb.run("ordered = _\nordered.wait(120)").status == "ok"
    expected = "".join(text for _, text in interleaved(20))
    assert nb.value("ordered.output") == expected


def test_a_file_closed_by_its_with_is_left_behind_quietly(nb, tmp_path):
    data = tmp_path / "data.txt"
    data.write_text("hello from the worker\n")
    nb.run(f"path = {str(data)!r}\nfh = 'before'")
    out = nb.run(
        cell("""
        %%task
        import tempfile
        with open(path) as fh:
            data = fh.read()
        with tempfile.TemporaryFile() as scratch:
            scratch.write(b"x")
        """),
        timeout=120,
    )
    assert out.status == "ok", out.error_text
    assert "cannot come back" not in out.stderr
    assert "fh" not in out.stderr and "scratch" not in out.stderr
    assert nb.value("data") == "hello from the worker\n"
    assert nb.value("('fh' in dir(), 'scratch' in dir())") == (False, False)


def test_a_value_still_open_is_named_once(nb, tmp_path):
    data = tmp_path / "data.txt"
    data.write_text("x\n")
    nb.run(f"path = {str(data)!r}")
    out = nb.run(
        cell("""
        %%task
        squares = (i * i for i in range(3))
        handle = open(path, "a")
        kept = 'after'
        """),
        timeout=120,
    )
    assert out.status == "ok", out.error_text
    lost = [line for line in out.stderr.splitlines() if "cannot come back" in line]
    assert len(lost) == 2, out.stderr
    assert any(line.startswith("taskcell: squares (generator") for line in lost), lost
    assert any(line.startswith("taskcell: handle (TextIOWrapper") for line in lost), lost
    assert nb.value("kept") == "after"
    assert nb.value("('squares' in dir(), 'handle' in dir())") == (False, False)
