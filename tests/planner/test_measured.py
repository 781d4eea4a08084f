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


def test_a_cell_after_one_that_made_a_large_result_measures_only_its_own_memory(client):
    history: list = []
    request = Resources(cpu=1, memory="4Gi")
    run(client, "import numpy as np\nbig = np.ones(GIB // 8)", request, history, GIB=GiB)
    run(client, "small = 1", request, history)
    # The same warm cell process ran both: the first one's gibibyte is not the second's.
    assert history[1].usage.peak_memory < GiB // 4, history[1].usage.peak_memory


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


def free_cores() -> float:
    """How many cores two spinning threads get here, now (the machine is shared)."""
    import time

    scope: dict = {}
    exec(SPIN, scope)
    cpu, wall = time.process_time(), time.perf_counter()
    scope["both"](0.5)
    return (time.process_time() - cpu) / (time.perf_counter() - wall)


def test_two_busy_threads_are_two_cores(client):
    seen = []
    for _ in range(3):
        available = free_cores()
        history: list = []
        run(client, SPIN + "done = both(1.5)", Resources(cpu=2), history)
        (record,) = history
        assert record.usage.wall >= 1.5
        assert record.usage.cores <= 2.1, record.usage
        seen.append((round(available, 2), round(record.usage.cores, 2)))
        # The measurement is checked against what two threads get here right now.
        if available >= 1.5 and record.usage.cores >= 0.7 * available:
            return
    if max(a for a, _ in seen) < 1.5:
        pytest.skip(f"this shared machine never had two free cores (free, measured): {seen}")
    raise AssertionError(f"two busy threads measured as fewer cores (free, measured): {seen}")
