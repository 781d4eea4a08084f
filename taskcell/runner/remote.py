"""What runs on the Dask worker for one ``%%task`` cell.

:func:`run_cell` is the function Dask executes. It hands the cell to a warm cell process (see
:mod:`taskcell.runner.processes`), forwards what the cell prints and displays to the notebook as
events on the cell's topic, and returns the names the cell bound. The result stays on the
worker until the notebook fetches it, so a large one can stay there.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable
from typing import Any

from dask.sizeof import sizeof
from distributed import get_worker, secede
from distributed.utils import sync

from taskcell.errors import CellError, CellInterrupted, ClusterError, InputError, worker_lost
from taskcell.runner.job import CellJob, CellResult
from taskcell.runner.processes import CellProcess, CellProcesses, worker_devices

_processes: CellProcesses | None = None
_lock = threading.Lock()


def _pool(worker: Any = None) -> CellProcesses:
    global _processes
    with _lock:
        if _processes is None:
            worker = worker or get_worker()
            # max: a worker may advertise both spellings of one GPU (cluster.spellings)
            gpus = max(
                (v for k, v in worker.state.total_resources.items() if k.casefold() == "gpu"),
                default=0,
            )
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
    _count_start(worker, job)
    if remote_inputs:
        job = dataclasses.replace(job, inputs=remote_inputs)
    report = functools.partial(_report, worker, job)
    report(kind="started", worker=worker.address)
    with _pool().checkout(job.key, job.gpus) as process:
        try:
            process.send(job)
            reply = _forward_until_reply(process, report)
        except (EOFError, OSError):
            code = process.proc.wait()
            forced = _pool().forced(job.key)
            if forced:
                raise CellInterrupted(
                    f"the cell went on after the interrupt and was ended with {forced}"
                ) from None
            died = ClusterError(
                f"the process running the cell on {worker.address} died (exit code {code})"
            )
            died.exit_code = code  # -9: the kernel's OOM killer, as a rule (planner.escalation)
            raise died from None
    if reply[0] != "done":
        failure = _failure(reply)
        if isinstance(failure, CellError):  # the sidebar shows a task's own traceback
            report(kind="failed", error=failure.summary, traceback=failure.traceback_text)
        else:
            report(kind="failed", error=str(failure))
        raise failure
    result: CellResult = reply[1]
    report(
        kind="finished",
        sizes={name: sizeof(v) for name, v in result.outputs.items()},
        changed_sizes={name: sizeof(v) for name, v in result.changed.items()},
        usage=dataclasses.asdict(result.usage),
    )
    return dataclasses.replace(result, worker=worker.address)


def _failure(reply: tuple) -> Exception:
    """The exception a cell process's reply other than ``done`` stands for."""
    if reply[0] == "error":
        return CellError(reply[1], reply[2])
    if reply[0] == "input-error":
        return InputError(reply[1])
    return CellInterrupted("the cell was interrupted")


def _count_start(worker: Any, job: CellJob) -> None:
    """Record this start of the cell with the scheduler, refusing one past ``job.retries``.

    Dask runs a task again on another worker when its worker dies (up to
    ``distributed.scheduler.allowed-failures`` times): a cell with side effects must not.
    """
    keys = ["taskcell-starts", job.key]
    earlier = sync(worker.loop, worker.scheduler.get_metadata, keys=keys, default=[])
    if len(earlier) > job.retries:
        raise worker_lost(earlier[-1], job.retries)
    # Sent without waiting for the answer: only a start after this worker died reads it.
    worker.loop.add_callback(
        worker.scheduler.set_metadata, keys=keys, value=[*earlier, worker.address]
    )


def _report(worker: Any, job: CellJob, /, **event: Any) -> None:
    """Tell the kernel about the cell, on its client's topic."""
    worker.log_event(job.topic, {"key": job.key, **event})


def _forward_until_reply(process: CellProcess, report: Callable[..., None]) -> tuple:
    seceded = False
    while True:
        message = process.receive()
        if message[0] == "stream":
            report(kind="stream", name=message[1], text=message[2])
        elif message[0] == "display":
            report(kind="display", **message[1])
        elif message[0] == "clear":
            report(kind="clear", wait=message[1])
        elif message[0] == "started":
            process.cell_started()
        elif message[0] == "secede":
            if not seceded:  # the cell waits on the cluster: its thread serves others meanwhile
                secede()
                seceded = True
        else:
            return message


def prestart_cell_process(dask_worker: Any) -> None:
    """Start a cell process on this worker ahead of its first cell, whose imports would
    otherwise be that cell's wait (called through ``client.run``)."""
    _pool(dask_worker).prestart()


def interrupt_cell(key: str, grace: float) -> bool:
    """Interrupt the cell ``key`` if it runs on this worker, and make sure it never starts here
    later (called through ``client.run``); see :meth:`CellProcesses.interrupt`."""
    return _pool().interrupt(key, grace)
