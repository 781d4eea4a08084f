"""Can any live worker ever run a request? Answer before submitting, never after.

Dask leaves a task whose resources no worker has in the ``no-worker`` state forever and says
nothing. taskcell compares the request with every live worker first and fails at once, naming
the shortfall and the worker that comes closest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from taskcell.cluster import names
from taskcell.cluster.mapping import WorkerCapacity
from taskcell.errors import InfeasibleError
from taskcell.spec import Resources, resource_key
from taskcell.spec.amounts import MEMORY_LIMIT, shortfall


@dataclass(frozen=True)
class Shortfall:
    """One resource a worker lacks: what the task asks and what the worker has."""

    resource: str
    asked: float
    has: float


def shortfalls(
    request: Resources, resources: Mapping[str, float], worker: WorkerCapacity
) -> list[Shortfall]:
    """What ``worker`` lacks to run a task with these Dask ``resources`` and ``request``: names
    compared exactly, as Dask places tasks (``resources`` are spelled as workers advertise them,
    see ``mapping``; a worker spelling one in another case cannot run it)."""
    lacking = [
        Shortfall(name, amount, worker.resources.get(name, 0.0))
        for name, amount in resources.items()
        if worker.resources.get(name, 0.0) < amount
    ]
    return lacking + _native_shortfalls(request, resources, worker)


def _native_shortfalls(
    request: Resources, resources: Mapping[str, float], worker: WorkerCapacity
) -> list[Shortfall]:
    """cpu and memory not reserved as abstract resources still cannot exceed the worker."""
    lacking = []
    reserved = {resource_key(name) for name in resources}
    cpu = None if resource_key(names.CPU) in reserved else request.cpu
    memory = None if resource_key(names.MEMORY) in reserved else request.memory
    if cpu is not None and worker.nthreads < cpu.request:
        lacking.append(Shortfall("threads", float(cpu.request), worker.nthreads))
    if memory is not None and 0 < worker.memory_limit < memory.request:
        lacking.append(Shortfall(MEMORY_LIMIT, float(memory.request), worker.memory_limit))
    return lacking


def check_feasible(
    request: Resources, resources: Mapping[str, float], workers: Sequence[WorkerCapacity]
) -> list[WorkerCapacity]:
    """The workers able to run the task; raise :class:`InfeasibleError` when there are none."""
    if not workers:
        raise InfeasibleError(
            "no worker is connected to the scheduler, so nothing can run this task; "
            "start one with `taskcell worker SCHEDULER_ADDRESS` or `dask worker ...`"
        )
    lacks = {w.address: shortfalls(request, resources, w) for w in workers}
    able = [w for w in workers if not lacks[w.address]]
    if able:
        return able
    closest = min(workers, key=lambda w: len(lacks[w.address]))
    raise InfeasibleError(_explain(lacks[closest.address], closest, workers))


def _explain(
    lacking: list[Shortfall], closest: WorkerCapacity, workers: Sequence[WorkerCapacity]
) -> str:
    parts = []
    for s in lacking:
        best = max(workers, key=lambda w: _amount(w, s.resource))
        parts.append(shortfall(s.resource, s.asked, _amount(best, s.resource), best.address))
    where = f"{len(workers)} live worker{'s' if len(workers) != 1 else ''}"
    return (
        f"no live worker can run this task ({where} checked): " + "; ".join(parts) + ". "
        f"Closest: {closest.address}. Nothing was submitted."
    )


def _amount(worker: WorkerCapacity, resource: str) -> float:
    if resource == "threads":
        return worker.nthreads
    if resource == MEMORY_LIMIT:
        return worker.memory_limit
    return worker.resources.get(resource, 0.0)
