"""What runs on the Dask worker for one ``%%task`` cell.

:func:`run_cell` is the function Dask executes. It hands the cell to a warm cell process (see
:mod:`taskcell.runner.processes`), forwards what the cell prints and displays to the notebook as
events on the cell's topic, and returns the names the cell bound. The result stays on the
worker until the notebook fetches it, so a large one can stay there.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import threading
from collections.abc import Callable
from typing import Any

from distributed import get_worker, secede
from distributed.utils import sync

from taskcell import config
from taskcell.errors import CellError, CellInterrupted, ClusterError, InputError, worker_lost
from taskcell.runner.cell_dask import CELL_TLS
from taskcell.runner.crossing import Returned, Sealed
from taskcell.runner.job import CellJob
from taskcell.runner.processes import CellProcess, CellProcesses, MemoryWatch, worker_devices
from taskcell.runner.wire import into_segments
from taskcell.spec import Resources, resource_key
from taskcell.spec.amounts import show_bytes

#: Memory a rung must have over a peak to hold it: the planner's headroom
#: (:data:`taskcell.planner.rightsize.HEADROOM`), so the rung named here is the one a retry asks.
MARGIN = 1.25

_processes: CellProcesses | None = None
_lock = threading.Lock()


def _pool(worker: Any = None) -> CellProcesses:
    global _processes
    with _lock:
        if _processes is None:
            worker = worker or get_worker()
            # max: a worker may advertise both spellings of one GPU (cluster.spellings)
            gpu, total = resource_key("GPU"), worker.state.total_resources
            gpus = max((v for k, v in total.items() if resource_key(k) == gpu), default=0)
            _processes = CellProcesses(
                worker_devices(gpus), _worker_environ(worker), max_idle=worker.state.nthreads
            )
    return _processes


def _worker_environ(worker) -> dict[str, str]:
    """What a cell process knows of its worker: ``distributed.get_client()`` works there, over
    TLS with the worker's own credentials where it has them (given in memory, as a Gateway's
    and the embedded cluster's workers have them, they are in no config the cell could read)."""
    environ = {
        "TASKCELL_WORKER_ADDRESS": worker.address,
        "TASKCELL_WORKER_NAME": str(worker.name),
        "DASK_SCHEDULER_ADDRESS": worker.scheduler.address,
    }
    security = worker.security
    tls = {
        "tls_ca_file": security.tls_ca_file,
        "tls_client_cert": security.tls_worker_cert or security.tls_client_cert,
        "tls_client_key": security.tls_worker_key or security.tls_client_key,
        "tls_ciphers": security.tls_ciphers,
    }
    if tls["tls_ca_file"] and tls["tls_client_cert"]:
        tls = {name: value for name, value in tls.items() if value}
        environ[CELL_TLS] = json.dumps({**tls, "require_encryption": True})
    return environ


def run_cell(job: CellJob, remote_inputs: dict[str, Any]) -> Returned:
    """Run ``job`` in a cell process of this worker (the task Dask executes); its result as
    the cell process pickled it, opened where it is read."""
    worker = get_worker()
    _count_start(worker, job)
    for value in remote_inputs.values():
        if isinstance(value, Sealed):  # the value Dask keeps, now in memory cells map
            value.buffers = into_segments(value.buffers)
    if remote_inputs:
        job = dataclasses.replace(job, inputs=remote_inputs)
    report = functools.partial(_report, worker, job)
    report(kind="started", worker=worker.address)
    limit = cell_limit(worker, job)
    with _pool().checkout(job.key, job.gpus) as process:
        watch: list[MemoryWatch] = []
        try:
            process.send(job)
            reply = _forward_until_reply(process, report, limit, watch)
        except (EOFError, OSError):
            code = process.proc.wait()
            stopped = watch[0].stop() if watch else 0
            if stopped and limit:
                raise _over_limit(report, stopped, limit, at_least=True) from None
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
        finally:
            for w in watch:
                w.stop()
    if reply[0] != "done":
        failure = _failure(reply)
        if isinstance(failure, CellError):  # the sidebar shows a task's own traceback
            report(kind="failed", error=failure.summary, traceback=failure.traceback_text)
        else:
            report(kind="failed", error=str(failure))
        raise failure
    _, returned, usage, sizes, changed_sizes = reply
    if limit and usage.peak_memory is not None and usage.peak_memory > limit:
        raise _over_limit(report, usage.peak_memory, limit, at_least=False)
    report(
        kind="finished",
        sizes=sizes,
        changed_sizes=changed_sizes,
        usage=dataclasses.asdict(usage),
    )
    returned.worker = worker.address
    return returned


def cell_limit(worker: Any, job: CellJob) -> int | None:
    """The memory a cell may hold: its request's memory limit (Flyte's ``(request, limit)``;
    the request where no limit is given), else the ``MEMORY`` its task was placed with,
    unless ``taskcell.enforce-memory`` in Dask's config is False; None where it asked for
    none."""
    if not config.flag("enforce-memory"):
        return None
    if job.memory_limit is not None:
        return job.memory_limit
    task = worker.state.tasks.get(job.key)
    restrictions = getattr(task, "resource_restrictions", None) or {}
    found = [v for k, v in restrictions.items() if resource_key(k) == resource_key("MEMORY")]
    return int(found[0]) if found else None


def smallest_rung(peak: int) -> str:
    """The smallest preset without accelerators whose memory holds ``peak`` with
    :data:`MARGIN` to spare, as ``m2g (2 GiB)``; the request itself where none does."""
    need = math.ceil(peak * MARGIN)
    fits = [
        (p.memory.request, float(p.cpu.request) if p.cpu else 0.0, name)
        for name, p in config.presets().items()
        if p.memory is not None and p.gpu is None and p.memory.request >= need
    ]
    if fits:
        memory, _, name = min(fits)
        return f"{name} ({show_bytes(memory)})"
    return Resources(memory=need).to_options()


def _over_limit(report: Callable[..., None], peak: int, limit: int, at_least: bool) -> CellError:
    """The error of a cell stopped past its memory limit: one line, naming its peak, the
    limit and the smallest rung that holds it; reported as the cell's failure."""
    if at_least:  # stopped while it grew: it needs more than it reached, twice the limit
        said = f"grew past {show_bytes(peak)}"
        need, what = max(peak, 2 * limit), "twice that"
    else:
        said, need, what = f"peaked at {show_bytes(peak)}", peak, "that"
    line = (
        f"MemoryError: the cell {said}, over its {show_bytes(limit)} memory limit, and was "
        f"stopped; {smallest_rung(need)} holds {what} with {MARGIN - 1:.0%} to spare"
    )
    report(kind="failed", error=line, traceback=line + "\n")
    return CellError(line + "\n", "MemoryError")


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


def _forward_until_reply(
    process: CellProcess,
    report: Callable[..., None],
    limit: int | None = None,
    watch: list[MemoryWatch] | None = None,
) -> tuple:
    """Forward what the cell process says until its reply; once the cell's code starts, watch
    its memory against ``limit`` (the watch is appended to ``watch``)."""
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
            if limit and watch is not None:
                watch.append(MemoryWatch(process, limit))
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
