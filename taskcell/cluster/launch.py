"""How a pool starts one worker: a ``ProcessInterface``, as a ``SpecCluster`` worker spec holds.

Each backend of :mod:`taskcell.cluster.pools` gives an object with ``await worker.start()`` and
``await worker.close()`` that starts a ``dask worker`` connecting to a given scheduler under a
given name, advertising its pool's shape: :class:`LocalWorker` for ``local``, dask-jobqueue's
job classes for ``slurm``/``pbs``/``sge``/``lsf``, the configured class for ``spec``.
:func:`describe` names what was started for the cell's status line, and :func:`ended` says when
it went away before its worker connected.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import signal
import subprocess
import sys
import tempfile
from typing import Any

from distributed.deploy.spec import ProcessInterface

from taskcell.cluster.pools import Pool
from taskcell.cluster.sessions import popen_apart
from taskcell.cluster.worker_cli import binding_args, listen_host
from taskcell.errors import SpecError
from taskcell.spec import GPU

#: Seconds a local worker gets to close after SIGTERM before it is killed.
STOP_GRACE = 10.0
#: Seconds a worker whose scheduler went away waits for it before exiting.
DEATH_TIMEOUT = 60

_JOB_CLASSES = {
    "slurm": "dask_jobqueue.slurm.SLURMJob",
    "pbs": "dask_jobqueue.pbs.PBSJob",
    "sge": "dask_jobqueue.sge.SGEJob",
    "lsf": "dask_jobqueue.lsf.LSFJob",
}
_LOCAL_OPTIONS = ("env", "args", "python")


def resource_flag(pool: Pool) -> str:
    """The pool's resources as ``dask worker --resources`` takes them."""
    return ",".join(f"{name}={_number(amount)}" for name, amount in pool.resources.items())


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class LocalWorker(ProcessInterface):
    """A ``dask worker`` process on this machine, in its own session (an interrupt of the
    kernel does not reach it), its output kept in a log file. It and its nanny listen only on
    the interface that reaches the scheduler (127.0.0.1 for a local one), unless the pool's
    ``args`` name their own ``--host``, ``--listen-address`` or ``--interface``."""

    def __init__(self, scheduler: str, name: str, pool: Pool) -> None:
        super().__init__(scheduler, name)
        unknown = [key for key in pool.options if key not in _LOCAL_OPTIONS]
        if unknown:
            raise SpecError(
                f"taskcell.pools.{pool.name}.options: unknown option(s) {', '.join(unknown)} "
                f"for a local pool (known: {', '.join(_LOCAL_OPTIONS)})"
            )
        python = str(pool.options.get("python") or sys.executable)
        args = [str(arg) for arg in pool.options.get("args") or ()]
        self.argv = [
            python,
            "-m",
            "distributed.cli.dask_worker",
            scheduler,
            "--name",
            name,
            "--nthreads",
            str(pool.nthreads),
            "--memory-limit",
            str(pool.memory_limit),
            "--resources",
            resource_flag(pool),
            "--no-dashboard",
            "--death-timeout",
            str(DEATH_TIMEOUT),
        ]
        self.argv += [*binding_args(listen_host(scheduler, args), args), *args]
        self.env = {str(k): str(v) for k, v in (pool.options.get("env") or {}).items()}
        self.proc: subprocess.Popen[bytes] | None = None
        # Kept open while the process runs, and deleted when it is closed.
        self.log = tempfile.NamedTemporaryFile(prefix=f"taskcell-{name}-", suffix=".log")  # noqa: SIM115

    async def start(self) -> None:
        """Start the process; it connects on its own."""
        try:
            self.proc = popen_apart(
                self.argv,
                env={**os.environ, **self.env},
                stdin=subprocess.DEVNULL,
                stdout=self.log,
                stderr=subprocess.STDOUT,
            )
        except OSError as e:
            raise RuntimeError(f"cannot run {self.argv[0]}: {e}") from None
        await super().start()

    async def close(self) -> None:
        """SIGTERM, then SIGKILL after :data:`STOP_GRACE` seconds."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            for _ in range(int(STOP_GRACE * 10)):
                if proc.poll() is not None:
                    break
                await asyncio.sleep(0.1)
            else:
                proc.kill()
                proc.wait()
        self.log.close()
        await super().close()

    def last_words(self) -> str:
        """The last line the process wrote."""
        with contextlib.suppress(OSError), open(self.log.name, "rb") as f:
            lines = f.read().decode(errors="replace").strip().splitlines()
            return lines[-1] if lines else ""
        return ""


def make_worker(pool: Pool, scheduler: str, name: str) -> ProcessInterface:
    """The worker ``pool`` starts, connecting to ``scheduler`` as ``name`` (not started yet).

    Raises
    ------
    SpecError
        The pool's options are not the backend's (dask-jobqueue's own message, or a local
        option that does not exist).
    ImportError
        The backend's package is not installed (dask-jobqueue for batch jobs).
    """
    if pool.backend == "local":
        return LocalWorker(scheduler, name, pool)
    if pool.backend == "spec":
        cls = _import(pool, str(pool.options.get("cls", "")))
        return cls(scheduler, name=name, **dict(pool.options.get("options") or {}))
    cls = _import(pool, _JOB_CLASSES[pool.backend])
    try:
        return cls(scheduler=scheduler, name=name, **_job_options(pool))
    except (TypeError, ValueError) as e:
        raise SpecError(f"taskcell.pools.{pool.name}.options: {e}") from None


def _import(pool: Pool, path: str) -> Any:
    module, _, attribute = path.rpartition(".")
    if not module:
        raise SpecError(
            f"taskcell.pools.{pool.name}.options.cls must be a dotted path to a worker class "
            f"such as mypackage.workers.GpuPod, got {path!r}"
        )
    try:
        return getattr(importlib.import_module(module), attribute)
    except ImportError as e:
        needs = (
            'dask-jobqueue (pip install "taskcell[jobqueue]")'
            if pool.backend in _JOB_CLASSES
            else module
        )
        raise ImportError(
            f"pool {pool.name} ({pool.backend}) needs {needs}, which cannot be imported: {e}"
        ) from None
    except ValueError as e:  # dask-jobqueue 0.9.0 sets a signal handler on import
        raise ImportError(
            f"pool {pool.name} ({pool.backend}) cannot import {module} outside the main "
            f"thread ({e}); dask-jobqueue 0.9.0 does this (dask/dask-jobqueue#696): install "
            f'another version, pip install "dask-jobqueue!=0.9.0"'
        ) from None
    except AttributeError:
        raise SpecError(f"taskcell.pools.{pool.name}: {module} has no {attribute!r}") from None


def _job_options(pool: Pool) -> dict[str, Any]:
    """SLURMCluster's keywords for one job of the pool: the user's, with the shape's cores,
    memory and resources, and for slurm its whole GPUs as ``--gres=gpu[:TYPE]:N``."""
    options = dict(pool.options)
    options.update(cores=pool.nthreads, memory=str(pool.memory_limit), processes=1)
    args = list(options.get("worker_extra_args") or [])
    options["worker_extra_args"] = [*args, "--resources", resource_flag(pool)]
    directives = list(options.get("job_extra_directives") or [])
    gpu = pool.shape.gpu
    asked = not any("--gres" in d for d in directives)
    if pool.backend == "slurm" and isinstance(gpu, GPU) and not gpu.partition and asked:
        kind = f"{'-'.join(gpu.device.split()).lower()}:" if gpu.device else ""
        directives.append(f"--gres=gpu:{kind}{gpu.quantity}")
    options["job_extra_directives"] = directives
    return options


def describe(pool: Pool, worker: ProcessInterface) -> str:
    """What was started, for the status line: ``pid 4242``, ``SLURM job 17``."""
    if isinstance(worker, LocalWorker):
        return f"pid {worker.proc.pid}" if worker.proc else "a local process"
    job_id = getattr(worker, "job_id", None)
    if job_id is not None:
        return f"{pool.backend.upper()} job {job_id}"
    return type(worker).__name__


async def ended(pool: Pool, worker: ProcessInterface) -> str | None:
    """Why ``worker`` went away before connecting, or None while it may still connect.

    Known for local processes (their exit status and last line) and SLURM jobs (their state);
    other backends rely on the pool's ``start-timeout``.
    """
    if isinstance(worker, LocalWorker):
        code = worker.proc.poll() if worker.proc else None
        if code is None:
            return None
        words = worker.last_words()
        return f"its process exited with status {code}" + (f": {words}" if words else "")
    job_id = getattr(worker, "job_id", None)
    if pool.backend != "slurm" or job_id is None:
        return None
    state = await _slurm_state(str(job_id))
    if state in (None, "PENDING", "CONFIGURING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED"):
        return None
    return f"SLURM job {job_id} is {state or 'gone'}"


async def _slurm_state(job_id: str) -> str | None:
    """The job's state as squeue reports it; ``""`` when squeue no longer knows it, None when
    squeue cannot be asked."""
    try:
        proc = await asyncio.create_subprocess_exec(
            "squeue",
            "-h",
            "-t",
            "all",
            "-j",
            job_id,
            "-o",
            "%T",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError:
        return None
    out, err = await proc.communicate()
    if proc.returncode != 0:
        # squeue fails for a job id it has forgotten; any other failure tells nothing.
        return "" if b"Invalid job id" in err else None
    return out.decode().strip()
