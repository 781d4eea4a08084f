"""How a pool starts one worker: a ``ProcessInterface``, as a ``SpecCluster`` worker spec holds.

Each backend of :mod:`taskcell.cluster.pools` gives an object with ``await worker.start()`` and
``await worker.close()`` that starts a ``dask worker`` connecting to a given scheduler under a
given name, advertising its pool's shape: :class:`LocalWorker` for ``local``, dask-jobqueue's
job classes for ``slurm``/``pbs``/``sge``/``lsf``, :class:`GatewayWorker` for ``gateway`` (one
more worker of the kernel's Dask Gateway cluster), the configured class for ``spec``.
A worker of a ``tls://`` scheduler speaks TLS with the kernel's own ``Security`` (its worker
certificate, else its client certificate, and its CA): ``--tls-ca-file``, ``--tls-cert`` and
``--tls-key`` name files, those held in memory (``Security.temporary()``) written for the
worker alone (:class:`TlsFiles`) and removed with it.
:func:`describe` names what was started for the cell's status line, and :func:`ended` says when
it went away before its worker connected. A worker is listed by the scheduler under the name it
was started with, or, where the backend names it (a Gateway does), under its handle's ``name``
once started: the provisioner reads it there.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import weakref
from typing import TYPE_CHECKING, Any, ClassVar

from distributed.deploy.spec import ProcessInterface

from taskcell.cluster.pools import Pool
from taskcell.cluster.sessions import popen_apart
from taskcell.cluster.worker_cli import binding_args, listen_host
from taskcell.errors import SpecError
from taskcell.spec import GPU
from taskcell.spec._util import shown

if TYPE_CHECKING:
    from distributed.security import Security

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
_GATEWAY_OPTIONS = ("address", "proxy-address", "auth", "cluster")
_GATEWAY_AUTHS = ("basic", "kerberos", "jupyterhub")
#: Seconds between looks at the scheduler while a Gateway worker is awaited.
GATEWAY_POLL = 0.5
#: ``dask worker`` options that give it TLS certificates.
TLS_FLAGS = ("--tls-ca-file", "--tls-cert", "--tls-key")


def resource_flag(pool: Pool) -> str:
    """The pool's resources as ``dask worker --resources`` takes them."""
    return ",".join(f"{name}={_number(amount)}" for name, amount in pool.resources.items())


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class TlsFiles:
    """The TLS certificates a worker of a ``tls://`` scheduler is started with, as files: a
    file's path as it is, PEM text held in memory written to a folder of its own under
    ``under`` (the system's temporary folder by default), readable by this user alone, and
    removed by :meth:`remove` or once this object is collected."""

    def __init__(self, security: Security | None, under: str | None = None) -> None:
        self.paths: dict[str, str] = {}
        self._folder: str | None = None
        self._removal: weakref.finalize | None = None
        if security is None:
            return
        worker = security.get_tls_config_for_role("worker")
        client = security.get_tls_config_for_role("client")
        own = worker if worker["cert"] else client
        said = {"--tls-ca-file": own["ca_file"], "--tls-cert": own["cert"], "--tls-key": own["key"]}
        if not (said["--tls-ca-file"] and said["--tls-cert"]):
            return  # no certificates to give: the worker reads its own Dask config
        for flag, value in said.items():
            if value:
                text = str(value)
                self.paths[flag] = self._file(flag, text, under) if "\n" in text else text

    def _file(self, flag: str, pem: str, under: str | None) -> str:
        if self._folder is None:
            self._folder = tempfile.mkdtemp(prefix="taskcell-tls-", dir=under)  # mode 0700
            self._removal = weakref.finalize(self, shutil.rmtree, self._folder, True)
        path = os.path.join(self._folder, flag.removeprefix("--tls-") + ".pem")
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write(pem)
        return path

    def args(self, scheduler: str, given: list[str]) -> list[str]:
        """``--tls-ca-file CA --tls-cert CERT --tls-key KEY`` for a ``tls://`` ``scheduler``,
        none where the user's own arguments ``given`` name any of them."""
        if not scheduler.startswith("tls://") or any(
            arg.split("=")[0] in TLS_FLAGS for arg in given
        ):
            return []
        return [part for flag, path in self.paths.items() for part in (flag, path)]

    def remove(self) -> None:
        """Remove the files written for the worker."""
        if self._removal is not None:
            self._removal()


class LocalWorker(ProcessInterface):
    """A ``dask worker`` process on this machine, in its own session (an interrupt of the
    kernel does not reach it), its output kept in a log file. It and its nanny listen only on
    the interface that reaches the scheduler (127.0.0.1 for a local one), unless the pool's
    ``args`` name their own ``--host``, ``--listen-address`` or ``--interface``. Of a
    ``tls://`` scheduler, it speaks TLS with ``security``'s certificates (:class:`TlsFiles`)."""

    def __init__(
        self, scheduler: str, name: str, pool: Pool, security: Security | None = None
    ) -> None:
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
        self.tls = TlsFiles(security)
        self.argv += [*binding_args(listen_host(scheduler, args), args), *args]
        self.argv += self.tls.args(scheduler, args)
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
        self.tls.remove()
        await super().close()

    def last_words(self) -> str:
        """The last line the process wrote."""
        with contextlib.suppress(OSError), open(self.log.name, "rb") as f:
            lines = f.read().decode(errors="replace").strip().splitlines()
            return lines[-1] if lines else ""
        return ""


class GatewayWorker(ProcessInterface):
    """One more worker of a Dask Gateway cluster: the cluster the kernel's scheduler belongs to,
    scaled up by one through the Gateway's API (``Gateway.scale_cluster``) and down by one when
    this worker is closed.

    The Gateway starts the worker and names it; :meth:`start` waits until a worker the
    scheduler did not list before joins, and takes its name (``self.name``: the name the
    scheduler lists it under, as for every backend). The worker's threads, memory and Dask
    resources are the cluster's (its ``worker_cores``, ``worker_memory`` and ``environment``
    options, as the notebook made it): they must give the pool's shape, the resources as
    ``DASK_DISTRIBUTED__WORKER__RESOURCES`` (:func:`gateway_environment`), else the worker fails
    as one that does not advertise its pool's shape. Options: ``address``, ``proxy-address`` and
    ``auth`` as ``dask_gateway.Gateway`` takes them (each by default from Dask's ``gateway.*``
    config, as the Hub sets it), ``cluster`` the cluster's name (by default the one in the
    scheduler's ``gateway://PROXY/NAME`` address).
    """

    #: Names of workers taken by a GatewayWorker of this process, per cluster.
    _taken: ClassVar[dict[str, set[str]]] = {}
    #: One scaling of a cluster at a time, per event loop (the count is read, then set).
    _locks: ClassVar[dict[tuple[int, str], asyncio.Lock]] = {}

    def __init__(
        self, scheduler: str, name: str, pool: Pool, security: Security | None = None
    ) -> None:
        super().__init__(scheduler, name)
        self.scheduler_address = scheduler
        self.name: str = name  #: the Gateway's name for the worker, once it joined
        self.pool = pool
        self.options = gateway_options(pool, scheduler)
        self.cluster = str(self.options["cluster"])
        self.security = security
        self.joined = False  #: a worker of the cluster was taken as this one
        self._scaled = False
        self._closing = asyncio.Event()

    def _gateway(self) -> Any:
        try:
            gateway_module = importlib.import_module("dask_gateway")  # an optional dependency
        except ImportError as e:
            raise ImportError(
                f"pool {self.pool.name} (gateway) needs dask-gateway (pip install "
                f'"taskcell[gateway]"), which cannot be imported: {e}'
            ) from None
        where = f"taskcell.pools.{self.pool.name}.options"
        try:
            return gateway_module.Gateway(
                address=self.options["address"],
                proxy_address=self.options.get("proxy-address"),
                auth=self.options.get("auth"),
                asynchronous=True,
            )
        except (ImportError, TypeError, ValueError, AttributeError) as e:
            raise SpecError(f"{where}: cannot make a client of the Gateway: {e}") from None

    def _lock(self) -> asyncio.Lock:
        key = (id(asyncio.get_running_loop()), self.cluster)
        return GatewayWorker._locks.setdefault(key, asyncio.Lock())

    async def _client(self) -> Any:
        from distributed import Client

        return await Client(
            self.scheduler_address,
            security=self.security,
            asynchronous=True,
            set_as_default=False,
            timeout=60,
        )

    @staticmethod
    async def _listed(client: Any) -> set[str]:
        identity = await client.scheduler.identity(n_workers=-1)
        return {str(w.get("name")) for w in identity["workers"].values()}

    @staticmethod
    async def _count(client: Any) -> int:
        """The number of workers the cluster is scaled to, as its scheduler's Gateway service
        holds it; the workers it lists where it has none."""

        def count(dask_scheduler: Any = None) -> int | None:
            service = dask_scheduler.services.get("gateway")
            return getattr(service, "count", None)

        held = await client.run_on_scheduler(count)
        if held is None:
            return len(await GatewayWorker._listed(client))
        return int(held)

    async def _scale(self, gateway: Any, client: Any, by: int) -> None:
        count = await self._count(client)
        target = max(0, count + by)
        try:
            await gateway.scale_cluster(self.cluster, target)
        except Exception as e:  # the Gateway's own error: not found, forbidden, ...
            raise RuntimeError(
                f"the Gateway at {self.options['address']} did not scale cluster "
                f"{self.cluster} to {target} workers: {e}"
            ) from None
        if by > 0 and await self._count(client) < target:
            raise RuntimeError(
                f"the Gateway at {self.options['address']} keeps cluster {self.cluster} at "
                f"{count} workers (its cluster_max_workers)"
            )

    async def start(self) -> None:
        """Scale the cluster up by one, then wait until a worker it did not list joins; that
        worker is this one. Returns without one when :meth:`close` is called first."""
        taken = GatewayWorker._taken.setdefault(self.cluster, set())
        async with self._gateway() as gateway:
            client = await self._client()
            try:
                async with self._lock():
                    if self._closing.is_set():  # closed while connecting: scale nothing
                        return
                    before = await self._listed(client)
                    await self._scale(gateway, client, +1)
                    self._scaled = True
                await super().start()
                while not self._closing.is_set():
                    new = sorted(await self._listed(client) - before - taken)
                    if new:
                        self.name = new[0]
                        taken.add(self.name)
                        self.joined = True
                        return
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self._closing.wait(), GATEWAY_POLL)
            except BaseException:
                await client.close()
                with contextlib.suppress(Exception):  # the start's own error is the one to tell
                    await self.close()  # a failed start leaves the cluster as it found it
                raise
            await client.close()

    async def close(self) -> None:
        """Retire this worker through the scheduler where it still runs, and scale the
        cluster down by one."""
        self._closing.set()
        async with self._lock():  # after a scaling up under way, which it undoes
            if self._scaled:
                self._scaled = False
                async with self._gateway() as gateway:
                    client = await self._client()
                    try:
                        if self.joined and self.name in await self._listed(client):
                            await client.retire_workers(names=[self.name], close_workers=True)
                        await self._scale(gateway, client, -1)
                    finally:
                        await client.close()
        GatewayWorker._taken.get(self.cluster, set()).discard(self.name)
        await super().close()


def gateway_options(pool: Pool, scheduler: str) -> dict[str, Any]:
    """A ``gateway`` pool's options, checked, with their defaults: ``address``,
    ``proxy-address`` and ``auth`` from Dask's ``gateway.*`` config where not given,
    ``cluster`` from the scheduler's ``gateway://PROXY/NAME`` address.

    Raises
    ------
    SpecError
        An unknown option, or a value not of the accepted forms (the message names it and
        them), no Gateway address, or no cluster to scale.
    """
    import dask.config

    where = f"taskcell.pools.{pool.name}.options"
    given = {key.replace("_", "-"): value for key, value in pool.options.items()}
    unknown = [key for key in given if key not in _GATEWAY_OPTIONS]
    if unknown:
        raise SpecError(
            f"{where}: unknown option(s) {', '.join(unknown)} for a gateway pool "
            f"(known: {', '.join(_GATEWAY_OPTIONS)})"
        )
    options: dict[str, Any] = {}
    address = given.get("address", dask.config.get("gateway.address", None))
    if address is None:
        raise SpecError(
            f"{where}.address: no Gateway address; give the Gateway's http(s):// address "
            f"(as Gateway(address=...) takes it), or set Dask's gateway.address"
        )
    if not isinstance(address, str) or not address.startswith(("http://", "https://")):
        raise SpecError(
            f"{where}.address must be the Gateway's http:// or https:// address, such as "
            f"https://hub.example.org/services/dask-gateway, got {shown(address)}"
        )
    options["address"] = address
    proxy = given.get("proxy-address", dask.config.get("gateway.proxy-address", None))
    if proxy is not None:
        port = isinstance(proxy, int) and not isinstance(proxy, bool) and 0 < proxy < 65536
        if not port and not (isinstance(proxy, str) and proxy.strip()):
            raise SpecError(
                f"{where}.proxy-address must be the Gateway proxy's address "
                f"(gateway://HOST:PORT, tls://HOST:PORT or HOST:PORT) or its port number, "
                f"got {shown(proxy)}"
            )
        options["proxy-address"] = proxy
    auth = given.get("auth", dask.config.get("gateway.auth.type", None))
    if auth is not None:
        if not isinstance(auth, str) or (auth not in _GATEWAY_AUTHS and "." not in auth):
            raise SpecError(
                f"{where}.auth must be one of {', '.join(_GATEWAY_AUTHS)} or the dotted path "
                f"of a dask_gateway.auth.GatewayAuth class, got {shown(auth)}"
            )
        options["auth"] = auth
    _, gateway_scheme, rest = scheduler.partition("gateway://")
    joined = rest.rstrip("/").rpartition("/")[2] if gateway_scheme and "/" in rest else None
    cluster = given.get("cluster", joined)
    if cluster is None:
        raise SpecError(
            f"taskcell.pools.{pool.name}: a gateway pool scales the Dask Gateway cluster the "
            f"kernel is connected to, and the kernel's scheduler {scheduler} is not one "
            f"(gateway://PROXY/NAME): connect with the cluster's client "
            f"(cluster.get_client()), or name the cluster in {where}.cluster"
        )
    if not isinstance(cluster, str) or not cluster or "/" in cluster:
        raise SpecError(
            f"{where}.cluster must be a Gateway cluster's name, such as "
            f"dev.1f2e3d4c5b6a, got {shown(cluster)}"
        )
    if joined is not None and cluster != joined:
        raise SpecError(
            f"{where}.cluster names Gateway cluster {cluster}, and the kernel's scheduler is "
            f"cluster {joined}'s ({scheduler}): a pool's workers must join the kernel's "
            f"scheduler; leave cluster out to scale the kernel's own"
        )
    options["cluster"] = cluster
    return options


def gateway_environment(pool: Pool) -> dict[str, str]:
    """The environment that makes a Gateway cluster's workers advertise ``pool``'s shape:
    ``{"DASK_DISTRIBUTED__WORKER__RESOURCES": "{'CPU': 4, 'MEMORY': 17179869184}"}``, a
    literal dict, which Dask's config reads keeping the names' case. Give it as the cluster's
    ``environment`` option (``gateway.new_cluster(environment=...)``, where the Gateway offers
    that option) or in the Gateway's ``c.ClusterConfig.environment``."""
    resources = {name: _literal(amount) for name, amount in pool.resources.items()}
    return {"DASK_DISTRIBUTED__WORKER__RESOURCES": repr(resources)}


def _literal(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)


def make_worker(
    pool: Pool, scheduler: str, name: str, security: Security | None = None
) -> ProcessInterface:
    """The worker ``pool`` starts, connecting to ``scheduler`` as ``name`` (not started yet),
    over TLS with ``security``'s certificates where ``scheduler`` is ``tls://``.

    Raises
    ------
    SpecError
        The pool's options are not the backend's (dask-jobqueue's own message, or a local
        option that does not exist).
    ImportError
        The backend's package is not installed (dask-jobqueue for batch jobs).
    """
    if pool.backend == "local":
        return LocalWorker(scheduler, name, pool, security)
    if pool.backend == "gateway":
        return GatewayWorker(scheduler, name, pool, security)
    if pool.backend == "spec":
        cls = _import(pool, str(pool.options.get("cls", "")))
        return cls(scheduler, name=name, **dict(pool.options.get("options") or {}))
    cls = _import(pool, _JOB_CLASSES[pool.backend])
    options = _job_options(pool)
    tls = _job_tls(pool, options, security)
    options["worker_extra_args"] += tls.args(scheduler, options["worker_extra_args"])
    try:
        job = cls(scheduler=scheduler, name=name, **options)
    except (TypeError, ValueError) as e:
        raise SpecError(f"taskcell.pools.{pool.name}.options: {e}") from None
    weakref.finalize(job, tls.remove)  # its certificate files live as long as the job's handle
    return job


def _job_tls(pool: Pool, options: dict[str, Any], security: Security | None) -> TlsFiles:
    """The certificates of a batch job's worker, those held in memory written to the pool's
    ``shared_temp_directory`` (or ``jobqueue.<backend>.shared-temp-directory``), which the
    job's machine must see."""
    import dask.config

    shared = options.pop("shared_temp_directory", None) or dask.config.get(
        f"jobqueue.{pool.backend}.shared-temp-directory", None
    )
    try:
        return TlsFiles(security, os.path.expanduser(shared) if shared else None)
    except OSError as e:
        raise SpecError(
            f"taskcell.pools.{pool.name}: cannot write the TLS certificates for its workers to "
            f"{shared or tempfile.gettempdir()} ({e}); set options.shared_temp_directory to a "
            f"folder the batch jobs' machines see"
        ) from None


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
    if isinstance(worker, GatewayWorker):
        joined = f", worker {worker.name}" if worker.joined else ""
        return f"Gateway cluster {worker.cluster}{joined}"
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
