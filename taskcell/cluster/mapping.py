"""Turn a resource request into the Dask abstract resources of one ``client.submit``.

The names come from :mod:`taskcell.cluster.names`. Two rules make hand-started workers work:

- A name is spelled the way live workers advertise it, matched without regard to case, so a
  request for ``GPU`` reaches a worker started with ``DASK_DISTRIBUTED__WORKER__RESOURCES__GPU=2``
  (which Dask lower-cases to ``gpu``).
- ``cpu``, ``memory``, ``disk`` and ``shm`` are reserved as ``CPU``/``MEMORY``/``DISK``/``SHM``
  only when some live worker advertises that resource (``taskcell worker`` does; so does
  ``dask worker --resources "MEMORY=100e9"``). Otherwise Dask's own thread and memory
  management applies, and feasibility compares the request with each worker's threads and
  memory limit instead.

Accelerators and ``extra`` resources are always requested: a GPU task never runs on a worker
that does not advertise GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from taskcell.cluster import names
from taskcell.spec import GPU, TPU, Device, Resources

#: Request fields that fall back to Dask's native capacity when no worker advertises them.
NATIVE = (names.CPU, names.MEMORY, names.DISK, names.SHM)


@dataclass(frozen=True)
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
    spelling = advertised_spellings(workers)
    out: dict[str, float] = {}
    for name, amount in wanted(request).items():
        advertised = spelling.get(name.casefold())
        if advertised is None and name in NATIVE:
            continue
        out[advertised or name] = amount
    return out


def advertised_spellings(workers: Iterable[WorkerCapacity]) -> dict[str, str]:
    """Case-folded resource name -> the spelling live workers use for it."""
    return {name.casefold(): name for w in workers for name in w.resources}
