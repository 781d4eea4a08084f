"""Measured use: a cell's peak memory and busy cores, as recorded for right-sizing."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

import pytest
from distributed import Client

from taskcell.planner import review
from taskcell.runner.cell_task import CellSource, Display
from taskcell.runner.execution import run_cell_task
from taskcell.spec import BUILTIN_PRESETS, Resources

pytestmark = pytest.mark.slow

GiB = 1 << 30
MiB = 1 << 20


@pytest.fixture(scope="module")
def client(module_dask) -> Iterator[Client]:
    module_dask.worker("--nthreads", "2", name="measured")
    with Client(module_dask.address) as c:
        c.wait_for_workers(1)
        yield c


def run(client: Client, code: str, request: Resources, history: list, **inputs) -> dict:
    body = textwrap.dedent(code).strip("\n")
    namespace: dict = dict(inputs)
    quiet = Display(stream=lambda *_: None, display=lambda *_: None, status=lambda _: None)
    cell = CellSource(body=body + "\n", shown=body, filename=f"<measured {len(history)}>")
    run_cell_task(client, cell, namespace, request, name="measured", history=history, out=quiet)
    return namespace


def test_a_gibibyte_allocated_is_a_gibibyte_measured(client):
    history: list = []
    run(
        client,
        """
        import numpy as np
        def touch():
            block = np.ones(GIB // 8)  # every page written
            return float(block.sum())
        GIB = 1 << 30
        total = touch()
        """,
        Resources(cpu=1, memory="16Gi"),
        history,
    )
    (record,) = history
    peak = record.usage.peak_memory
    assert 0.8 * GiB <= peak <= 1.2 * GiB, peak
    # And the right-sizing hint says so: 16 GiB asked, about 1 GiB used.
    (hint,) = [h for h in review(history, BUILTIN_PRESETS) if h.resource == "memory"]
    assert hint.kind == "over-requested"
    # 2 GiB of memory; and 2 cores when the one it had was kept busy (CPU-bound), which
    # depends on how busy this shared machine is.
    assert hint.line in ("%%task --cpu 1 --memory 2Gi", "%%task small_task"), hint


def peak(client: Client, code: str, **inputs) -> int:
    history: list = []
    run(client, code, Resources(cpu=1), history, **inputs)
    (record,) = history
    return record.usage.peak_memory


def test_a_tiny_cell_after_a_big_one_records_a_tiny_peak(client):
    # The big cell's gibibyte is held by a cycle (its function and its namespace) until the
    # collector runs, and its heap is freed memory the process still holds: neither counts.
    big = peak(
        client,
        """
        import numpy as np
        block = np.ones(GIB // 8)
        def keep():
            return block
        total = float(keep().sum())
        """,
        GIB=GiB,
    )
    small = peak(client, "x = sum(range(1000))")
    assert big >= GiB
    assert small < 128 * MiB, small


# Cells over 100 MiB, each against the same code run alone in a fresh interpreter.
ALONE = {
    "numpy array": "import numpy as np\na = np.ones(80_000_000)\ns = float(a.sum())\ndel a",
    "DataFrame": (
        "import numpy as np, pandas as pd\n"
        "df = pd.DataFrame(np.ones((10_000_000, 8)))\nn = len(df)\ndel df"
    ),
    "words of a text": (
        "words = ('lorem ipsum dolor sit amet ' * 5_000_000).split()\nn = len(words)\ndel words"
    ),
    "child process": (
        "import subprocess, sys\n"
        "code = subprocess.run([sys.executable, '-c', 'b = bytearray(700 << 20)']).returncode"
    ),
    "shell and its child": (
        "import subprocess, sys\n"
        "code = subprocess.run(f'{sys.executable} -c \"b = bytearray(700 << 20)\"', shell=True)"
        ".returncode"
    ),
}


@pytest.mark.parametrize("cell", list(ALONE))
def test_a_cell_records_what_the_same_code_needs_alone(client, alone, cell):
    recorded = peak(client, ALONE[cell])
    true = alone(ALONE[cell])
    assert true > 500 * MiB
    assert 0.9 <= recorded / true <= 1.1, (recorded, true)


def test_forked_children_count_what_they_hold_of_their_own(client):
    code = """
    import multiprocessing, numpy as np
    def work(conn):
        block = np.ones(50_000_000)  # 400 MB of its own
        conn.send(float(block.sum()))
        conn.recv()  # held until the cell has both answers
    def both():
        pipes = [multiprocessing.Pipe() for _ in range(2)]
        fork = multiprocessing.get_context("fork")
        children = [fork.Process(target=work, args=(child,)) for _, child in pipes]
        for c in children:
            c.start()
        sums = [parent.recv() for parent, _ in pipes]
        for parent, _ in pipes:
            parent.send("done")
        for c in children:
            c.join()
        return sums
    sums = both()
    """
    recorded = peak(client, code)
    # Each child's 400 MB counts; the pages it shares with the cell's process do not, twice.
    assert recorded >= 400 * MiB
    assert recorded <= 1200 * MiB, recorded


def test_a_shared_input_counts_only_the_pages_the_cell_touches(client):
    namespace: dict = {}
    quiet = Display(stream=lambda *_: None, display=lambda *_: None, status=lambda _: None)
    history: list = []

    def cell(code: str) -> int:
        body = textwrap.dedent(code).strip("\n") + "\n"
        source = CellSource(body=body, shown=body, filename=f"<shared {len(history)}>")
        run_cell_task(client, source, namespace, Resources(cpu=1), name="shared",
                      history=history, out=quiet)  # fmt: skip
        return history[-1].usage.peak_memory

    # A GiB result stays on the worker in shared memory (over taskcell.result-threshold).
    cell("import numpy as np\nGIB = 1 << 30\nbig = np.ones(GIB // 8)")
    cell("x = 1")  # reads nothing of it: its pages are let go here
    assert cell("n = len(big)") < 256 * MiB  # mapped, not touched
    quarter = cell("s = float(big[: len(big) // 4].sum())")
    whole = cell("s = float(big.sum())")
    assert 256 * MiB <= quarter <= 512 * MiB, quarter
    assert whole >= GiB, whole


SPIN = """
import hashlib, threading, time
data = b"x" * (8 << 20)
def spin(until):
    while time.perf_counter() < until:
        hashlib.sha256(data).digest()  # releases the GIL
def both(seconds):
    until = time.perf_counter() + seconds
    threads = [threading.Thread(target=spin, args=(until,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return True
"""


def test_two_busy_threads_are_two_cores(client):
    # The machine is shared: what two threads get varies from run to run, so the recorded
    # figure is checked against what the cell saw its own threads get in the same run.
    seen = []
    for _ in range(3):
        history: list = []
        code = SPIN + (
            "cpu, wall = time.process_time(), time.perf_counter()\n"
            "done = both(1.5)\n"
            "got = (time.process_time() - cpu) / (time.perf_counter() - wall)"
        )
        namespace = run(client, code, Resources(cpu=2), history)
        (record,) = history
        assert record.usage.wall >= 1.5
        assert record.usage.cores <= 2.1, record.usage
        got = namespace["got"]
        seen.append((round(got, 2), round(record.usage.cores, 2)))
        # Only where both threads ran at once most of the time does two cores differ from one.
        if got >= 1.3:
            assert record.usage.cores >= 0.75 * got, seen
            return
    pytest.skip(f"this shared machine never gave the two threads two cores (got, measured): {seen}")
