"""What runs on the Dask worker for one ``%%task`` cell.

:func:`run_cell` is the function Dask executes. It hands the cell to a warm cell process (see
:mod:`taskcell.runner.processes`), forwards what the cell prints and displays to the notebook as
events on the cell's topic, and returns the names the cell bound. The result stays on the
worker until the notebook fetches it, so a large one can stay there.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import Any

from dask.sizeof import sizeof
from distributed import get_worker

from taskcell.errors import CellError, CellInterrupted, ClusterError
from taskcell.runner.job import CellJob, Usage
from taskcell.runner.processes import CellProcesses, worker_devices

_processes: CellProcesses | None = None
_lock = threading.Lock()


@dataclass(frozen=True)
class CellResult:
    """The names a cell bound, the value of its last expression, and what it used."""

    outputs: dict[str, Any]
    value: Any
    usage: Usage
    worker: str


def _pool() -> CellProcesses:
    global _processes
    with _lock:
        if _processes is None:
            worker = get_worker()
            gpus = sum(v for k, v in worker.state.total_resources.items() if k.casefold() == "gpu")
            _processes = CellProcesses(
                worker_devices(gpus), _worker_environ(worker), max_idle=worker.state.nthreads
            )
    return _processes


def _worker_environ(worker) -> dict[str, str]:
    """What a cell process knows of its worker: ``distributed.get_client()`` works there."""
    return {
        "TASKCELL_WORKER_ADDRESS": worker.address,
        "TASKCELL_WORKER_NAME": str(worker.name),
        "DASK_SCHEDULER_ADDRESS": worker.scheduler.address,
    }


def run_cell(job: CellJob, remote_inputs: dict[str, Any]) -> CellResult:
    """Run ``job`` in a cell process of this worker (the task Dask executes)."""
    worker = get_worker()
    if remote_inputs:
        job = dataclasses.replace(job, inputs={**job.inputs, **remote_inputs})
    worker.log_event(job.topic, {"kind": "started", "worker": worker.address})
    with _pool().checkout(job.key, job.gpus) as process:
        try:
            process.send(job)
            reply = _forward_until_reply(process, job, worker)
        except (EOFError, OSError):
            code = process.proc.wait()
            raise ClusterError(
                f"the process running the cell on {worker.address} died (exit code {code})"
            ) from None
    if reply[0] == "error":
        raise CellError(reply[1], reply[2])
    if reply[0] == "interrupted":
        raise CellInterrupted("the cell was interrupted")
    _, outputs, value, usage = reply
    sizes = {name: sizeof(v) for name, v in outputs.items()}
    worker.log_event(job.topic, {"kind": "finished", "sizes": sizes})
    return CellResult(outputs, value, usage, worker.address)


def _forward_until_reply(process, job: CellJob, worker) -> tuple:
    while True:
        message = process.receive()
        if message[0] == "stream":
            worker.log_event(job.topic, {"kind": "stream", "name": message[1], "text": message[2]})
        elif message[0] == "display":
            worker.log_event(job.topic, {"kind": "display", **message[1]})
        else:
            return message


def interrupt_cell(key: str) -> bool:
    """Interrupt the cell ``key`` if it runs on this worker (called through ``client.run``)."""
    return _processes is not None and _processes.interrupt(key)
