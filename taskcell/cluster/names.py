"""The names of the Dask abstract resources taskcell requests and advertises.

One table, used by the request mapping, by ``taskcell worker`` and by the panel; the fields'
names are the spec's (:data:`taskcell.spec.resources.DASK_NAMES`). Dask matches resource names
exactly, but environment-variable configuration lower-cases them
(``DASK_DISTRIBUTED__WORKER__RESOURCES__GPU=2`` advertises ``gpu``), so a request's names are
matched to what live workers advertise by one rule,
:func:`taskcell.spec.resources.resource_key` (see ``mapping``).

========================  ======================  ============================================
request field             Dask resource           amount
========================  ======================  ============================================
cpu                       ``CPU``                 cores requested (``500m`` -> 0.5)
memory                    ``MEMORY``              bytes requested (as ``MEMORY=100e9``)
disk                      ``DISK``                bytes of scratch disk requested
shm                       ``SHM``                 bytes of /dev/shm (``auto``: not requested)
gpu=N                     ``GPU``                 N, on any worker with GPUs
gpu="A100:2"              ``GPU`` + ``GPU-A100``  2 of each: a typed GPU is also a GPU
GPU("A100", 1, "1g.5gb")  ``MIG-A100-1g.5gb``     1 MIG slice of that profile
TPU("V5P", "2x2x1")       ``TPU-V5P-2x2x1``       1
Device("fpga", 2, "big")  ``DEVICE-fpga-big``     2
extra={"process": 1}      ``process``             as given, untouched
========================  ======================  ============================================
"""

from __future__ import annotations

from taskcell.spec.resources import DASK_NAMES

CPU = DASK_NAMES["cpu"]
MEMORY = DASK_NAMES["memory"]
DISK = DASK_NAMES["disk"]
SHM = DASK_NAMES["shm"]
GPU = DASK_NAMES["gpu"]


def _slug(name: str) -> str:
    return "-".join(name.split())


def gpu_type(device: str) -> str:
    """Resource name for whole GPUs of one canonical type: ``"A100 80G"`` -> ``"GPU-A100-80G"``."""
    return f"{GPU}-{_slug(device)}"


def mig_slice(device: str, profile: str) -> str:
    """MIG slices of one profile: ``("A100", "1g.5gb")`` -> ``"MIG-A100-1g.5gb"``."""
    return f"MIG-{_slug(device)}-{profile}"


def tpu(device: str, partition: str | None) -> str:
    """Resource name for a TPU slice: ``("V5P", "2x2x1")`` -> ``"TPU-V5P-2x2x1"``."""
    return f"TPU-{_slug(device)}" + (f"-{partition}" if partition else "")


def device(name: str, partition: str | None) -> str:
    """Resource name for any other accelerator: ``("fpga", "big")`` -> ``"DEVICE-fpga-big"``."""
    return f"DEVICE-{_slug(name)}" + (f"-{partition}" if partition else "")
