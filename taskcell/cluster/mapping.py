"""Turn a resource request into the Dask abstract resources of one ``client.submit``.

The names come from :mod:`taskcell.cluster.names`. Two rules make hand-started workers work:

- A name is spelled the way live workers advertise it, matched without regard to case, so a
  request for ``GPU`` reaches a worker started with ``DASK_DISTRIBUTED__WORKER__RESOURCES__GPU=2``
  (which Dask lower-cases to ``gpu``). Where workers spell it differently (one ``GPU``,
  another ``gpu``), the request takes taskcell's spelling if a worker uses it, else the one
  most workers use, and :func:`aliases` says which workers must advertise that spelling too
  (:mod:`taskcell.cluster.spellings` asks them to), since Dask matches names exactly.
- ``cpu``, ``memory``, ``disk`` and ``shm`` are reserved as ``CPU``/``MEMORY``/``DISK``/``SHM``
  only when some live worker advertises that resource (``taskcell worker`` does; so does
  ``dask worker --resources "MEMORY=100e9"``). Otherwise Dask's own thread and memory
  management applies, and feasibility compares the request with each worker's threads and
  memory limit instead.

Accelerators and ``extra`` resources are always requested: a GPU task never runs on a worker
that does not advertise GPUs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from taskcell.cluster import names
from taskcell.spec import GPU, TPU, Device, Resources, resource_key

#: Request fields that fall back to Dask's native capacity when no worker advertises them.
NATIVE = (names.CPU, names.MEMORY, names.DISK, names.SHM)


@dataclass(frozen=True, kw_only=True)
class WorkerCapacity:
    """What one live worker offers: its abstract resources and Dask's native capacity."""

    address: str
    name: str
    nthreads: int
    memory_limit: int
    resources: Mapping[str, float] = field(default_factory=dict)


def wanted(request: Resources) -> dict[str, float]:
    """The request in canonical resource names, before matching them to live workers."""
    out: dict[str, float] = {}
    if request.cpu is not None:
        out[names.CPU] = float(request.cpu.request)
    if request.memory is not None:
        out[names.MEMORY] = float(request.memory.request)
    if request.disk is not None:
        out[names.DISK] = float(request.disk.request)
    if isinstance(request.shm, int):
        out[names.SHM] = float(request.shm)
    out.update(_accelerator(request.gpu))
    out.update({k: float(v) for k, v in request.extra.items()})
    return out


def _accelerator(acc: GPU | TPU | Device | None) -> dict[str, float]:
    if acc is None:
        return {}
    if isinstance(acc, TPU):
        return {names.tpu(acc.device, acc.partition): 1.0}
    if isinstance(acc, GPU) and acc.device and acc.partition:  # a slice always names its GPU
        return {names.mig_slice(acc.device, acc.partition): float(acc.quantity)}
    if isinstance(acc, GPU):
        typed = {names.gpu_type(acc.device): float(acc.quantity)} if acc.device else {}
        return {names.GPU: float(acc.quantity), **typed}
    # a request's Device always names its device (one that does not is a GPU, above)
    return {names.device(acc.device or acc.device_class, acc.partition): float(acc.quantity)}


def dask_resources(request: Resources, workers: Iterable[WorkerCapacity]) -> dict[str, float]:
    """The ``resources=`` for ``client.submit``, spelled as the live ``workers`` advertise them."""
    asked = wanted(request)
    spelling = spellings(asked, workers)
    out: dict[str, float] = {}
    for name, amount in asked.items():
        advertised = spelling.get(resource_key(name))
        if advertised is None and name in NATIVE:
            continue
        out[advertised or name] = amount
    return out


def spellings(names: Iterable[str], workers: Iterable[WorkerCapacity]) -> dict[str, str]:
    """``resource_key(name)`` -> the spelling to request it by, for each of ``names`` some
    worker advertises: the name as given where a worker spells it so, else the most common
    spelling (the first in sorted order among equals)."""
    counts: dict[str, Counter[str]] = {}
    for worker in workers:
        for name in worker.resources:
            counts.setdefault(resource_key(name), Counter())[name] += 1
    out = {}
    for name in names:
        found = counts.get(resource_key(name))
        if found:
            out[resource_key(name)] = (
                name if name in found else max(sorted(found), key=found.__getitem__)
            )
    return out


def aliases(
    resources: Mapping[str, float], workers: Iterable[WorkerCapacity]
) -> dict[str, dict[str, float]]:
    """Worker address -> the resources it must also advertise, spelled as ``resources`` asks,
    for each it advertises only in another case (``gpu=1`` where ``GPU`` is asked): the same
    amount under the asked spelling."""
    out: dict[str, dict[str, float]] = {}
    for worker in workers:
        folded = {resource_key(name): name for name in worker.resources}
        for name in resources:
            own = folded.get(resource_key(name))
            if own is not None and name not in worker.resources:
                out.setdefault(worker.address, {})[name] = float(worker.resources[own])
    return out
