"""One human formatter: an amount reads the same in every message, table and view."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from taskcell.cluster import names, waits
from taskcell.cluster.feasibility import check_feasible
from taskcell.cluster.mapping import WorkerCapacity
from taskcell.cluster.waits import wait_words
from taskcell.errors import InfeasibleError
from taskcell.planner.view import request_label
from taskcell.runner.cell_task import Submission, _waiting_reason
from taskcell.runner.history import TaskHistory, TaskRecord
from taskcell.runner.job import Usage
from taskcell.runner.remote_value import RemoteValue
from taskcell.spec import Resources
from taskcell.spec.amounts import BYTE_RESOURCES, shortfall, show_amount, show_request

GiB = 1 << 30


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [
        ("MEMORY", 32 * GiB, "32 GiB"),
        ("MEMORY", 2**32, "4 GiB"),  # was MEMORY=4.29497e+09 while a cell waited
        ("memory limit", 24684084 * 1024, "23.5 GiB"),  # was 24684084Ki in a feasibility error
        ("disk", 100e9, "93.1 GiB"),
        ("GPU", 2.0, "2"),
        ("CPU", 0.1 + 0.2, "0.3"),
    ],
    ids=["32GiB", "4GiB-float", "memory-limit", "disk-decimal", "count", "float-drift"],
)
def test_amounts(resource: str, amount: float, text: str) -> None:
    assert show_amount(resource, amount) == text


def test_byte_resources_are_the_dask_names_of_the_byte_fields() -> None:
    assert {names.MEMORY, names.DISK, names.SHM} == BYTE_RESOURCES


def test_shortfalls_read_one_way_for_one_worker_and_for_the_cluster() -> None:
    assert shortfall("GPU", 2, 0, "tcp://a:1") == "asks GPU=2; the most any worker has is 0"
    assert shortfall("MEMORY", 32 * GiB, 16 * GiB) == "asks MEMORY=32 GiB; this worker has 16 GiB"


def test_the_same_amount_reads_the_same_in_every_message() -> None:
    amount, shown = 32 * GiB, "32 GiB"
    # the cell's status line while it waits
    waiting = Submission(
        future=None, job=None, record=None, resources={"MEMORY": float(amount)}, capable=2, sent=()
    )
    status = wait_words(_waiting_reason(waiting, 5))
    assert status == f"waiting 5 s for MEMORY={shown}: 2 capable workers, all busy"
    # the error of a request no live worker can meet
    small = WorkerCapacity(address="tcp://a:1", name="a", nthreads=4, memory_limit=16 * GiB)
    with pytest.raises(InfeasibleError) as info:
        check_feasible(Resources(memory="32Gi"), {}, [small])
    message = str(info.value)
    assert f"asks memory limit={shown}; the most any worker has is 16 GiB, on tcp://a:1" in message
    # %tasks
    record = TaskRecord(key="k", cell="cell-1", request=Resources())
    record.finish("finished", Usage(wall=1, cpu=1, peak_memory=amount, gpu_memory=amount))
    row = TaskHistory([record]).frame().iloc[0]
    assert (row["peak_memory"], row["gpu_memory"]) == (shown, shown)
    # a result kept on the cluster
    kept = RemoteValue(SimpleNamespace(key="k"), "x", amount)
    assert f": {shown} kept on the cluster" in repr(kept)
    # the panel and the sidebar's views, and the planner
    assert waits.show_amount is show_amount  # the words of what a task waits for
    assert (
        request_label({"MEMORY": amount}) == show_request({"MEMORY": amount}) == f"MEMORY={shown}"
    )
