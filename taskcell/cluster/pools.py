"""Worker pools: named worker shapes, one of which starts a worker when no live worker can run.

Pools live in Dask's config under ``taskcell.pools``, one entry a pool, tried in the order
written (put the cheaper shapes first)::

    taskcell:
      pools:
        cpu16:
          shape: {cpu: 16, memory: 64Gi}
        a100x2:
          shape: {cpu: 8, memory: 32Gi, gpu: "A100:2"}  # or a preset: large_gpu_task
          backend: slurm                 # local (default), slurm, pbs, sge, lsf, gateway, spec
          max-workers: 2                 # default 1
          idle-timeout: 10 minutes       # default taskcell.provisioning.idle-timeout
          start-timeout: 1h              # default taskcell.provisioning.start-timeout
          options: {queue: gpu, walltime: "04:00:00"}  # the backend's, see below

``shape`` is a request (the fields of :class:`~taskcell.spec.Resources`, cpu and memory required,
one amount each, not a range) or the name of a preset, Latch's included. A pool's workers
advertise the shape as the Dask resources :mod:`taskcell.cluster.names` names (``CPU``,
``MEMORY``, ``GPU`` and ``GPU-A100``, ...), run ``floor(cpu)`` threads (at least one) and have the
shape's memory as their memory limit, so that a request routed to a pool runs only there.

Backends and their ``options``:

======== ===================================================================================
local    ``dask worker`` processes on this machine, each in its own session, as the embedded
         cluster starts them. ``env``: variables set for the worker; ``args``: more
         ``dask worker`` arguments; ``python``: the interpreter (default: the kernel's).
slurm    one batch job per worker, by dask-jobqueue's ``SLURMJob`` (the job ``SLURMCluster``
pbs      submits); ``options`` are ``SLURMCluster``'s keyword arguments (``queue``,
sge      ``account``, ``walltime``, ``job_extra_directives``, ...; ``jobqueue.slurm.*`` config
lsf      as for ``SLURMCluster``). ``cores`` and ``memory`` come from the shape; for slurm a
         typed GPU adds ``--gres=gpu:TYPE:N`` (``TYPE`` lower case) unless a directive already
         asks for ``--gres``. PBS, SGE and LSF likewise, with their own job classes.
gateway  one more worker of the Dask Gateway cluster the kernel is connected to, by scaling
         it up by one through the Gateway (down by one when the worker retires). ``address``,
         ``proxy-address``, ``auth`` (``basic``, ``kerberos``, ``jupyterhub`` or a dotted
         ``GatewayAuth`` class) as ``dask_gateway.Gateway`` takes them, each by default from
         Dask's ``gateway.*`` config; ``cluster``: its name (by default the scheduler's, from
         ``gateway://PROXY/NAME``). The cluster's options give its workers' threads, memory
         and resources: they must give the shape, the resources as the ``environment``
         :func:`taskcell.cluster.launch.gateway_environment` returns.
spec     any worker class a ``SpecCluster`` worker spec takes (a ``ProcessInterface``):
         ``cls`` (dotted path) and ``options``; it is called ``cls(SCHEDULER, name=NAME,
         **options)`` and must make its worker advertise the shape.
======== ===================================================================================
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

from taskcell import config
from taskcell.cluster.feasibility import Shortfall, shortfalls
from taskcell.cluster.mapping import WorkerCapacity, dask_resources, wanted
from taskcell.errors import InfeasibleError, SpecError
from taskcell.spec import Resources, get_preset
from taskcell.spec._util import shown
from taskcell.spec.amounts import show_amount

__all__ = ["BACKENDS", "Backend", "Pool", "choose", "configured_pools", "parse_pools"]

#: How a pool starts a worker: ``local`` processes, a batch job of dask-jobqueue (``slurm``,
#: ``pbs``, ``sge``, ``lsf``), one more worker of a Dask Gateway cluster (``gateway``), or any
#: SpecCluster worker class (``spec``).
Backend = Literal["local", "slurm", "pbs", "sge", "lsf", "gateway", "spec"]
BACKENDS: tuple[str, ...] = get_args(Backend)

_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")
_KEYS = ("shape", "backend", "max-workers", "idle-timeout", "start-timeout", "options")


@dataclass(frozen=True, kw_only=True)
class Pool:
    """One named worker shape, and how and how many of its workers taskcell may start."""

    name: str
    shape: Resources
    backend: Backend = "local"
    max_workers: int = 1
    idle_timeout: float = 300.0  #: seconds a worker of the pool may idle before it retires
    start_timeout: float = 600.0  #: seconds a worker may take to connect before it has failed
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def resources(self) -> dict[str, float]:
        """The Dask resources its workers advertise."""
        return wanted(self.shape)

    @property
    def nthreads(self) -> int:
        """Threads of each worker: the shape's whole cores, at least one."""
        assert self.shape.cpu is not None
        return max(1, math.floor(self.shape.cpu.request))

    @property
    def memory_limit(self) -> int:
        """Each worker's memory limit in bytes: the shape's memory."""
        assert self.shape.memory is not None
        return int(self.shape.memory.request)

    def capacity(self) -> WorkerCapacity:
        """A worker of this pool, as feasibility sees a live one."""
        return WorkerCapacity(
            address=f"pool {self.name}",
            name=self.name,
            nthreads=self.nthreads,
            memory_limit=self.memory_limit,
            resources=self.resources,
        )

    def lacks(self, request: Resources, live: Sequence[WorkerCapacity] = ()) -> list[Shortfall]:
        """What a worker of this pool lacks to run ``request`` (nothing: it can)."""
        capacity = self.capacity()
        return shortfalls(request, dask_resources(request, [*live, capacity]), capacity)

    def slots(self, resources: Mapping[str, float]) -> int:
        """How many tasks asking these Dask ``resources`` one worker runs at once."""
        fits = [
            math.floor(self.resources.get(name, 0.0) / amount)
            for name, amount in resources.items()
            if amount > 0
        ]
        return max(1, min(fits, default=self.nthreads))


def parse_pools(entries: object) -> list[Pool]:
    """Read ``taskcell.pools``: a mapping of pool name to its entry (see the module docstring).

    Raises
    ------
    SpecError
        For a name that is not letters, digits and ``_.-``, an unknown key, a shape that is not
        a request or a preset, a backend not among :data:`BACKENDS`, ``max-workers`` not a
        positive whole number, or a timeout that is not a duration; the message names the pool.
    """
    if entries is None:
        return []
    if not isinstance(entries, Mapping):
        raise SpecError(
            f"taskcell.pools must be a mapping of pool name to "
            f"{{shape: ..., backend: ..., max-workers: ...}}, got {shown(entries)}"
        )
    return [_pool(name, entry) for name, entry in entries.items()]


def configured_pools() -> list[Pool]:
    """The pools in Dask's config (``taskcell.pools``), in the order written."""
    return parse_pools(config.get("pools"))


def _pool(name: object, entry: object) -> Pool:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise SpecError(
            f"taskcell.pools: a pool name must be letters, digits and '_.-', got {shown(name)}"
        )
    where = f"taskcell.pools.{name}"
    if not isinstance(entry, Mapping):
        raise SpecError(
            f"{where} must be a mapping with a shape, such as {{shape: small_task}}, "
            f"got {shown(entry)}"
        )
    # As Dask reads keys; shown() names a key str() cannot write (an int of 4300 digits).
    entry = {
        key.replace("_", "-") if isinstance(key, str) else shown(key): value
        for key, value in entry.items()
    }
    unknown = [key for key in entry if key not in _KEYS]
    if unknown:
        raise SpecError(
            f"{where} has unknown key(s) {', '.join(map(repr, unknown))} "
            f"(known: {', '.join(_KEYS)})"
        )
    if "shape" not in entry:
        raise SpecError(
            f"{where} needs a shape: a preset name or a request such as {{cpu: 8, memory: 32Gi}}"
        )
    backend = entry.get("backend", "local")
    if not isinstance(backend, str) or backend not in BACKENDS:  # `in` compares an array
        raise SpecError(
            f"{where}.backend must be one of {', '.join(BACKENDS)}, got {shown(backend)}"
        )
    options = entry.get("options")
    if options is None:
        options = {}
    if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
        raise SpecError(
            f"{where}.options must be a mapping of option names to values, got {shown(options)}"
        )
    return Pool(
        name=name,
        shape=_shape(where, entry["shape"]),
        backend=cast(Backend, backend),  # one of BACKENDS, checked above
        max_workers=_max_workers(where, entry.get("max-workers", 1)),
        idle_timeout=_seconds(where, "idle-timeout", entry),
        start_timeout=_seconds(where, "start-timeout", entry),
        options=dict(options),
    )


def _shape(where: str, value: object) -> Resources:
    try:
        if isinstance(value, str):
            shape = get_preset(value, config.presets())
        elif isinstance(value, Mapping):
            shape = Resources.from_dict(value)
        else:
            raise SpecError(
                f"expected a preset name or a mapping of resource fields, got {shown(value)}"
            )
    except SpecError as e:
        raise SpecError(f"{where}.shape: {e}") from None
    for name, amount in (("cpu", shape.cpu), ("memory", shape.memory)):
        if amount is None or not amount.is_fixed:
            raise SpecError(
                f"{where}.shape must give {name} as one amount (what each worker has), "
                f"got {shape!r}"
            )
    return shape


def _max_workers(where: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(
            f"{where}.max-workers must be a whole number of at least 1, got {shown(value)}"
        )
    return value


def _seconds(where: str, key: str, entry: Mapping[str, Any]) -> float:
    """The pool's ``key``, else ``taskcell.provisioning.<key>``; the error names the one read."""
    if key in entry:
        return config.duration(entry[key], f"{where}.{key}", zero=True)
    default = f"provisioning.{key}"
    return config.duration(config.get(default), config.where(default), zero=True)


def choose(
    request: Resources,
    live: Sequence[WorkerCapacity],
    pools: Sequence[Pool],
    infeasible: InfeasibleError,
) -> Pool:
    """The first pool whose workers can run ``request``, which no live worker can.

    Raises
    ------
    InfeasibleError
        ``infeasible`` (why no live worker can) when there are no pools; otherwise its message
        followed by each pool and what its workers lack.
    """
    if not pools:
        raise infeasible
    lacking = {pool.name: pool.lacks(request, live) for pool in pools}
    for pool in pools:
        if not lacking[pool.name]:
            return pool
    said = "; ".join(
        f"pool {pool.name} ({pool.backend}): " + ", ".join(_lack(s) for s in lacking[pool.name])
        for pool in pools
    )
    raise InfeasibleError(f"{infeasible} No pool can start a worker that can either: {said}.")


def _lack(s: Shortfall) -> str:
    asked, has = show_amount(s.resource, s.asked), show_amount(s.resource, s.has)
    return f"asks {s.resource}={asked}, its workers have {has}"
