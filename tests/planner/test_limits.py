"""A cell's memory limit holds: a real cell over it on a real worker is stopped, nothing of it
is written back, and ``--retries`` asks for the rung its measured peak names."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

import pytest
from distributed import Client

from taskcell.errors import CellError
from taskcell.planner.escalation import next_attempt
from taskcell.runner.cell_task import CellSource, Display
from taskcell.runner.execution import run_cell_task
from taskcell.spec import Resources

pytestmark = pytest.mark.slow

MiB = 1 << 20
LADDER = {f"m{q}": Resources(memory=q) for q in ("256Mi", "512Mi", "1Gi", "2Gi", "4Gi")}

#: A cell that writes every page of 600 MiB and holds it.
GREEDY = """
import numpy as np
block = np.ones(600 * 2**20 // 8)
total = float(block.sum())
"""


@pytest.fixture(scope="module")
def client(module_dask) -> Iterator[Client]:
    module_dask.worker("--resources", "MEMORY=8e9", name="limited")
    with Client(module_dask.address) as c:
        c.wait_for_workers(1)
        yield c


def run(client: Client, code: str, request: Resources, history: list, **options) -> dict:
    body = textwrap.dedent(code).strip("\n") + "\n"
    namespace: dict = {}
    quiet = Display(stream=lambda *_: None, display=lambda *_: None, status=lambda _: None)
    cell = CellSource(body=body, shown=body, filename=f"<limit {len(history)}>")
    run_cell_task(
        client, cell, namespace, request, name="limit", history=history, out=quiet, **options
    )
    return namespace


def test_a_cell_over_its_limit_is_stopped_and_writes_nothing_back(client):
    history: list = []
    with pytest.raises(CellError) as raised:
        run(client, GREEDY, Resources(memory="256Mi"), history)
    line = raised.value.summary
    assert raised.value.type_name == "MemoryError"
    assert "256 MiB memory limit" in line and "stopped" in line, line
    assert "with 25% to spare" in line, line
    # One line, and what the planner reads from it is the peak it names.
    assert len(raised.value.traceback_text.strip().splitlines()) == 1
    step = next_attempt(raised.value, Resources(memory="256Mi"), 1, None, presets=LADDER)
    # Stopped while it grew, its peak is a lower bound: the retry asks for twice what it had,
    # with the margin the message states, and names the rung it asks for.
    assert step is not None and step.preset == "m1Gi", step
    assert "m1Gi's 1 GiB" in step.message and "25% to spare" in step.message, step.message


def test_a_cell_within_its_limit_runs_and_binds(client):
    history: list = []
    namespace = run(client, GREEDY, Resources(memory="2Gi"), history)
    assert namespace["total"] == 600 * MiB // 8


def test_retries_ask_for_the_rung_the_peak_names_and_then_hold(client):
    history: list = []

    def escalate(error, request, attempt, held):
        return next_attempt(error, request, attempt, held, presets=LADDER)

    namespace = run(
        client, GREEDY, Resources(memory="256Mi"), history, retries=2, escalate=escalate
    )
    assert namespace["total"] == 600 * MiB // 8
    assert [r.state for r in history] == ["error", "finished"]
    assert history[1].request.memory.request >= 750 * MiB  # the peak with 25% to spare


def test_the_limit_can_be_switched_off(client):
    import dask

    history: list = []
    with dask.config.set({"taskcell.enforce-memory": False}):
        client.run(lambda: dask.config.set({"taskcell.enforce-memory": False}))
        try:
            namespace = run(client, GREEDY, Resources(memory="256Mi"), history)
        finally:
            client.run(lambda: dask.config.set({"taskcell.enforce-memory": True}))
    assert namespace["total"] == 600 * MiB // 8


def test_a_limit_above_the_request_is_where_the_cell_stops(client):
    """Flyte's ``(request, limit)``: a cell between the two runs; past the limit it stops, on a
    worker that advertises no MEMORY as on one that does."""
    history: list = []
    namespace = run(client, GREEDY, Resources(memory=("256Mi", "2Gi")), history)
    assert namespace["total"] == 600 * MiB // 8
    with pytest.raises(CellError) as raised:
        run(client, GREEDY, Resources(memory=("256Mi", "512Mi")), history)
    assert "512 MiB memory limit" in raised.value.summary, raised.value.summary
