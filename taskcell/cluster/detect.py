"""What this machine has, and how ``taskcell worker`` splits it between worker processes.

:func:`detect_machine` reads cores, memory, GPUs (with their MIG slices), /dev/shm and scratch
disk; :func:`advertised_resources` turns those facts into the Dask abstract resources of each
worker process, named by :mod:`taskcell.cluster.names`.

GPUs are read through NVML (the ``pynvml`` module of ``nvidia-ml-py``) when it can be imported,
otherwise from ``nvidia-smi`` on ``PATH``. The parsing of ``nvidia-smi`` output lives in pure
functions (:func:`parse_query_gpu`, :func:`parse_list_gpus`) so that tests feed them recorded
output. A machine without a driver or without ``nvidia-smi`` simply has no GPUs: detection never
raises.

How a machine is split between ``nprocs`` worker processes (:func:`advertised_resources`):

- ``CPU`` is ``cores // nprocs`` (at least 1); ``MEMORY``, ``SHM`` and ``DISK`` are the bytes
  divided evenly (``SHM`` and ``DISK`` are left out when the machine has none).
- Devices are never shared between processes. The devices are the whole GPUs not in MIG mode and
  the MIG slices of GPUs in MIG mode (a GPU in MIG mode contributes its slices, never itself, and
  one in MIG mode with no slices configured contributes nothing, since CUDA cannot use it). They
  are dealt out in order in contiguous blocks, the first processes taking one extra when they do
  not divide evenly: eight GPUs in three processes are ``0,1,2`` / ``3,4,5`` / ``6,7``. A process
  left without a device advertises no GPU resource at all.
- ``CUDA_VISIBLE_DEVICES`` of a process lists what it owns: GPU indices for whole GPUs (with
  ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so that CUDA numbers GPUs as ``nvidia-smi`` does) and MIG
  UUIDs for slices. On a machine with GPUs, a process that owns none gets an empty
  ``CUDA_VISIBLE_DEVICES``, which hides every GPU from it; on a machine without GPUs the
  variable is left as inherited (:attr:`WorkerShare.visible_devices` is ``None``).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from taskcell.cluster import names
from taskcell.spec.devices import DEVICES

__all__ = [
    "GpuInfo",
    "MachineFacts",
    "MigSlice",
    "WorkerShare",
    "advertised_resources",
    "canonical_gpu_name",
    "cap_memory",
    "cgroup_memory_limit",
    "detect_gpus",
    "detect_machine",
    "memory_limit_option",
    "parse_list_gpus",
    "parse_query_gpu",
]

#: The ``nvidia-smi --query-gpu`` fields read, in order. ``mig.mode.current`` tells a GPU in MIG
#: mode with no slices configured (unusable by CUDA) from an ordinary GPU; ``nvidia-smi -L``
#: alone cannot.
QUERY_FIELDS = ("index", "name", "uuid", "memory.total", "mig.mode.current")
QUERY_GPU_ARGS = (f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv,noheader,nounits")
LIST_GPUS_ARGS = ("-L",)

#: Seconds to wait for ``nvidia-smi``; a wedged driver can make it hang.
NVIDIA_SMI_TIMEOUT = 30.0

_MIB = 1 << 20


@dataclass(frozen=True)
class MigSlice:
    """One MIG device: a slice of a GPU in MIG mode, usable by CUDA through its UUID."""

    gpu_index: int
    profile: str  #: e.g. ``"1g.5gb"``
    uuid: str  #: ``"MIG-..."``, the value ``CUDA_VISIBLE_DEVICES`` takes


@dataclass(frozen=True, kw_only=True)
class GpuInfo:
    """One physical GPU as the driver reports it."""

    index: int  #: the driver's (PCI bus) order, as ``nvidia-smi`` numbers GPUs
    name: str  #: canonical, e.g. ``"A100 80G"`` (see :func:`canonical_gpu_name`)
    product: str  #: raw, e.g. ``"NVIDIA A100-SXM4-80GB"``
    uuid: str
    memory_bytes: int
    mig: tuple[MigSlice, ...] = ()
    #: MIG mode is on: the GPU is usable only through its slices in :attr:`mig`.
    mig_enabled: bool = False


@dataclass(frozen=True, kw_only=True)
class MachineFacts:
    """What this machine (or container) offers to worker processes."""

    cores: int
    memory_bytes: int
    gpus: tuple[GpuInfo, ...]
    shm_bytes: int  #: free bytes in /dev/shm, 0 where there is none
    scratch_bytes: int  #: free bytes in the scratch directory


@dataclass(frozen=True)
class WorkerShare:
    """The part of a machine one worker process owns, and advertises to the scheduler."""

    resources: dict[str, float]
    #: ``CUDA_VISIBLE_DEVICES`` for the process: ``""`` when the machine has GPUs but this
    #: process owns none, ``None`` when the machine has no GPUs (leave the variable alone).
    visible_devices: str | None

    def environ(self) -> dict[str, str]:
        """The environment variables the worker process must be started with."""
        if self.visible_devices is None:
            return {}
        return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": self.visible_devices}


# --- product names ------------------------------------------------------------------------------

#: NVIDIA product names -> canonical GPU names: each device's ``nvidia_smi`` pattern in
#: ``spec/devices.yaml`` (case-insensitive, no two matching one product), with the products seen.
_PRODUCT_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (device.product, name) for name, device in DEVICES.items() if device.product is not None
)
_VENDOR_PREFIX = re.compile(r"^(?:NVIDIA\s+|Tesla\s+)+", re.IGNORECASE)


def canonical_gpu_name(product: str) -> str:
    """The canonical name of an NVIDIA product, as requests spell GPU types.

    Parameters
    ----------
    product
        The product name the driver reports, e.g. ``"NVIDIA A100-SXM4-80GB"``.

    Returns
    -------
    str
        The canonical name of the known GPU whose ``nvidia_smi`` pattern finds it
        (``spec/devices.yaml``); any other product keeps its name without the
        ``NVIDIA``/``Tesla`` prefix.

    Examples
    --------
    >>> canonical_gpu_name("NVIDIA A100 80GB PCIe")
    'A100 80G'
    >>> canonical_gpu_name("NVIDIA GeForce RTX 4090")
    'GeForce RTX 4090'
    """
    product = " ".join(product.split())
    for pattern, name in _PRODUCT_RULES:
        if pattern.search(product):
            return name
    return _VENDOR_PREFIX.sub("", product) or product


# --- nvidia-smi ---------------------------------------------------------------------------------


def _mib_to_bytes(field: str) -> int:
    # "[N/A]" for memory happens on some boards; such a GPU still exists.
    try:
        return int(float(field) * _MIB)
    except ValueError:
        return 0


def parse_query_gpu(csv_text: str) -> list[GpuInfo]:
    """Parse ``nvidia-smi`` with :data:`QUERY_GPU_ARGS`: one GPU a line, MiB, no header.

    A line reads ``0, NVIDIA A100-SXM4-40GB, GPU-5b1e..., 40960, Enabled``; the last field
    (``mig.mode.current``: ``Enabled``, ``Disabled`` or ``[N/A]``) may be absent. The GPUs
    come back without their MIG slices, which only ``nvidia-smi -L`` lists
    (:func:`parse_list_gpus`).

    Raises
    ------
    ValueError
        A non-blank line does not have 4 or 5 fields, or its index is not a number.
    """
    gpus = []
    for line in csv_text.splitlines():
        if not line.strip():
            continue
        fields = [field.strip() for field in line.split(",")]
        if len(fields) not in (4, 5) or not fields[0].isdigit():
            raise ValueError(
                f"nvidia-smi --query-gpu lines must read 'INDEX, NAME, UUID, MEMORY_MIB"
                f"[, MIG_MODE]', got {line!r}"
            )
        index, product, uuid, memory = fields[:4]
        mig_enabled = len(fields) == 5 and fields[4].lower() == "enabled"
        gpus.append(
            GpuInfo(
                index=int(index),
                name=canonical_gpu_name(product),
                product=product,
                uuid=uuid,
                memory_bytes=_mib_to_bytes(memory),
                mig_enabled=mig_enabled,
            )
        )
    return gpus


_LIST_GPU_LINE = re.compile(r"^GPU\s+(\d+):\s*(.*?)\s*\(UUID:\s*([^)\s]+)\)\s*$")
_LIST_MIG_LINE = re.compile(r"^\s+MIG\s+(\S+)\s+Device\s+(\d+):\s*\(UUID:\s*([^)\s]+)\)\s*$")


def parse_list_gpus(text: str) -> dict[int, tuple[MigSlice, ...]]:
    """Parse ``nvidia-smi -L``: the MIG slices of each GPU, by GPU index.

    ``nvidia-smi -L`` prints ``GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-...)`` for each GPU,
    followed, for a GPU in MIG mode, by an indented ``MIG 1g.5gb  Device  0: (UUID: MIG-...)``
    for each slice. Every GPU listed gets an entry (an empty tuple when it has no slices).

    Raises
    ------
    ValueError
        A MIG line comes before any GPU line.
    """
    slices: dict[int, list[MigSlice]] = {}
    current: int | None = None
    for line in text.splitlines():
        if gpu := _LIST_GPU_LINE.match(line):
            current = int(gpu.group(1))
            slices.setdefault(current, [])
        elif mig := _LIST_MIG_LINE.match(line):
            if current is None:
                raise ValueError(f"nvidia-smi -L listed a MIG device before any GPU: {line!r}")
            slices[current].append(MigSlice(current, mig.group(1), mig.group(3)))
    return {index: tuple(found) for index, found in slices.items()}


def _run_nvidia_smi(executable: str, args: tuple[str, ...]) -> str | None:
    try:
        done = subprocess.run(
            [executable, *args],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        warnings.warn(f"taskcell: nvidia-smi could not run ({e}); no GPUs found", stacklevel=4)
        return None
    if done.returncode != 0:
        said = (done.stdout + done.stderr).strip().splitlines()
        warnings.warn(
            f"taskcell: nvidia-smi {' '.join(args)} exited with {done.returncode}"
            f"{': ' + said[0] if said else ''}; no GPUs found",
            stacklevel=4,
        )
        return None
    return done.stdout


def _detect_nvidia_smi() -> tuple[GpuInfo, ...]:
    executable = shutil.which("nvidia-smi")
    if executable is None:
        return ()
    query = _run_nvidia_smi(executable, QUERY_GPU_ARGS)
    if query is None:
        return ()
    listing = _run_nvidia_smi(executable, LIST_GPUS_ARGS) or ""
    try:
        gpus = parse_query_gpu(query)
        slices = parse_list_gpus(listing)
    except ValueError as e:
        warnings.warn(f"taskcell: {e}; no GPUs found", stacklevel=3)
        return ()
    merged = []
    for gpu in gpus:
        mig = slices.get(gpu.index, ())
        merged.append(replace(gpu, mig=mig, mig_enabled=gpu.mig_enabled or bool(mig)))
    return tuple(merged)


# --- NVML ---------------------------------------------------------------------------------------


def _text(value: str | bytes) -> str:
    # nvidia-ml-py before 11.5 returns bytes
    return value.decode() if isinstance(value, bytes) else value


_MIG_NAME_PROFILE = re.compile(r"\bMIG\s+(\S+)\s*$")


def _mig_profile(nvml: Any, handle: Any) -> str:
    # Recent drivers name a MIG device "NVIDIA A100-SXM4-40GB MIG 1g.5gb"; older ones give the
    # parent's name, so rebuild the profile from the slice count and memory (a 1g.5gb slice
    # has 4864 MiB, hence rounding up).
    match = _MIG_NAME_PROFILE.search(_text(nvml.nvmlDeviceGetName(handle)))
    if match:
        return match.group(1)
    attributes = nvml.nvmlDeviceGetAttributes(handle)
    gib = math.ceil(attributes.memorySizeMB / 1024)
    return f"{attributes.gpuInstanceSliceCount}g.{gib}gb"


def _detect_nvml(nvml: Any) -> tuple[GpuInfo, ...]:
    nvml.nvmlInit()
    try:
        gpus = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            product = _text(nvml.nvmlDeviceGetName(handle))
            try:
                current_mode, _pending = nvml.nvmlDeviceGetMigMode(handle)
            except nvml.NVMLError:  # not a MIG-capable GPU
                current_mode = 0
            mig_enabled = current_mode == nvml.NVML_DEVICE_MIG_ENABLE
            slices = []
            if mig_enabled:
                for position in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
                    try:
                        mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, position)
                    except nvml.NVMLError:  # no slice at this position
                        continue
                    slices.append(
                        MigSlice(index, _mig_profile(nvml, mig), _text(nvml.nvmlDeviceGetUUID(mig)))
                    )
            gpus.append(
                GpuInfo(
                    index=index,
                    name=canonical_gpu_name(product),
                    product=product,
                    uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                    memory_bytes=int(nvml.nvmlDeviceGetMemoryInfo(handle).total),
                    mig=tuple(slices),
                    mig_enabled=mig_enabled,
                )
            )
        return tuple(gpus)
    finally:
        nvml.nvmlShutdown()


def detect_gpus() -> tuple[GpuInfo, ...]:
    """The NVIDIA GPUs of this machine, with their MIG slices; empty when there are none.

    Uses NVML through ``pynvml`` when it can be imported and initialised, otherwise runs
    ``nvidia-smi`` from ``PATH`` (with :data:`QUERY_GPU_ARGS`, then ``-L`` for MIG slices).
    Never raises: no ``nvidia-smi`` means no GPUs, and a failing one (no driver, unexpected
    output) means no GPUs with a warning that says why.
    """
    try:
        with warnings.catch_warnings():
            # The "pynvml" distribution warns on import that nvidia-ml-py should be used
            # instead; both provide the same module.
            warnings.simplefilter("ignore", FutureWarning)
            import pynvml
    except ImportError:
        pass
    else:
        try:
            return _detect_nvml(pynvml)
        except (pynvml.NVMLError, AttributeError):
            # No driver or library here (nvidia-smi would say the same, or more), or an old
            # pynvml without the MIG calls.
            pass
    return _detect_nvidia_smi()


# --- the machine --------------------------------------------------------------------------------


def _free_bytes(path: str | os.PathLike[str]) -> int:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return 0


#: A cgroup v1 limit at or over this is "no limit" (the kernel writes 2**63 rounded to pages).
_UNLIMITED = 1 << 60


def _read_limit(path: str) -> int | None:
    """A cgroup memory limit file's value in bytes; None for none (``max``, unlimited) or a
    file that is not there."""
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    if not text.isdigit():
        return None  # "max": no limit at this level
    value = int(text)
    return value if 0 < value < _UNLIMITED else None


def _cgroup_dirs(cgroup_text: str, mountinfo_text: str) -> list[tuple[str, str]]:
    """Each cgroup directory this process's memory is accounted in, innermost first, with the
    limit file it holds: the v2 cgroup (``memory.max``) or the v1 memory cgroup
    (``memory.limit_in_bytes``), and every parent up to the mount's root."""
    paths: dict[str, str] = {}  # "v1" / "v2" -> the cgroup's path in its hierarchy
    for line in cgroup_text.splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        if fields[0] == "0" and fields[1] == "":
            paths["v2"] = fields[2]
        elif "memory" in fields[1].split(","):
            paths["v1"] = fields[2]
    found: list[tuple[str, str]] = []
    for line in mountinfo_text.splitlines():
        before, _, after = line.partition(" - ")
        left, right = before.split(), after.split()
        if len(left) < 5 or len(right) < 3:
            continue
        root, mount, fstype, options = left[3], left[4], right[0], right[2]
        if fstype == "cgroup2" and "v2" in paths:
            found += _levels(mount, root, paths["v2"], "memory.max")
        elif fstype == "cgroup" and "memory" in options.split(",") and "v1" in paths:
            found += _levels(mount, root, paths["v1"], "memory.limit_in_bytes")
    return found


def _levels(mount: str, root: str, path: str, limit_file: str) -> list[tuple[str, str]]:
    """The directories from the cgroup ``path`` up to the ``mount`` of its hierarchy (whose
    root is ``root``: a container sees its own cgroup as the mount's root)."""
    relative = os.path.relpath(path, root) if path.startswith(root) else path.lstrip("/")
    parts = [] if relative in (".", "") else relative.strip("/").split("/")
    return [
        (os.path.join(mount, *parts[:depth]), limit_file) for depth in range(len(parts), -1, -1)
    ]


def cgroup_memory_limit(
    cgroup_file: str = "/proc/self/cgroup", mountinfo_file: str = "/proc/self/mountinfo"
) -> int | None:
    """The tightest memory limit of the cgroups this process is in, nested ones and every
    parent included, in cgroup v1 and v2; None where none is set (or this is not Linux).

    Dask reads only the limit at the root of the mount (``/sys/fs/cgroup/memory.max``), so a
    worker in a nested cgroup (a systemd slice, a job scheduler's step) would advertise the
    whole machine.
    """
    try:
        with open(cgroup_file) as f:
            cgroup_text = f.read()
        with open(mountinfo_file) as f:
            mountinfo_text = f.read()
    except OSError:
        return None
    limits = [
        limit
        for directory, name in _cgroup_dirs(cgroup_text, mountinfo_text)
        if (limit := _read_limit(os.path.join(directory, name))) is not None
    ]
    return min(limits, default=None)


def memory_limit_option(passthrough: Sequence[str], total: int) -> int | None:
    """The per-process ``--memory-limit`` given to ``dask worker`` (after ``--``), in bytes:
    a size (``1GiB``, ``4e9``), a fraction of ``total`` (``0.5``), or None for none given,
    ``auto`` (Dask's share of the machine, which :func:`advertised_resources` makes too), or
    ``0`` (no limit).

    Raises
    ------
    ValueError
        A value Dask would refuse too, naming it.
    """
    value = None
    for i, arg in enumerate(passthrough):
        if arg == "--memory-limit" and i + 1 < len(passthrough):
            value = passthrough[i + 1]
        elif arg.startswith("--memory-limit="):
            value = arg.partition("=")[2]
    if value is None or value.strip().lower() in ("auto", "none", "0", ""):
        return None
    from dask.utils import parse_bytes

    try:
        number = float(value)
    except ValueError:
        try:
            return int(parse_bytes(value))
        except ValueError:
            raise ValueError(
                f"--memory-limit must be a size such as 4GiB, a fraction such as 0.5, auto or "
                f"0, got {value!r}"
            ) from None
    return int(number * total) if 0 < number <= 1 else int(number)


def cap_memory(shares: list[WorkerShare], limit: int | None) -> list[WorkerShare]:
    """Each share advertising no more ``MEMORY`` than the worker's own ``--memory-limit``
    (:func:`memory_limit_option`): the memory a cell there can have, so the scheduler never
    places a larger request on it."""
    if limit is None:
        return shares
    return [
        WorkerShare(
            {**s.resources, names.MEMORY: float(min(s.resources[names.MEMORY], limit))},
            s.visible_devices,
        )
        for s in shares
    ]


def detect_machine(scratch_dir: str | os.PathLike[str] | None = None) -> MachineFacts:
    """What this machine offers: cores, memory, GPUs, /dev/shm and scratch disk.

    Parameters
    ----------
    scratch_dir
        The directory workers put their files in; its free space is the scratch disk.
        Defaults to the system's temporary directory, Dask's own default.

    Returns
    -------
    MachineFacts
        Cores honour CPU affinity and a cgroup CPU quota (:func:`dask.system.cpu_count`);
        memory honours ``RLIMIT_RSS`` (:data:`distributed.system.MEMORY_LIMIT`) and the
        effective cgroup limit, nested cgroups included (:func:`cgroup_memory_limit`);
        /dev/shm and scratch are free bytes now (0 where absent).
    """
    from dask.system import cpu_count
    from distributed.system import MEMORY_LIMIT

    memory = min(int(MEMORY_LIMIT), cgroup_memory_limit() or int(MEMORY_LIMIT))
    return MachineFacts(
        cores=cpu_count(),
        memory_bytes=memory,
        gpus=detect_gpus(),
        shm_bytes=_free_bytes("/dev/shm") if os.path.isdir("/dev/shm") else 0,
        scratch_bytes=_free_bytes(
            scratch_dir if scratch_dir is not None else tempfile.gettempdir()
        ),
    )


# --- splitting the machine between worker processes ---------------------------------------------


def _devices(gpus: tuple[GpuInfo, ...]) -> list[GpuInfo | MigSlice]:
    devices: list[GpuInfo | MigSlice] = []
    for gpu in gpus:
        if gpu.mig_enabled:
            devices.extend(gpu.mig)
        else:
            devices.append(gpu)
    return devices


def _device_resources(
    devices: list[GpuInfo | MigSlice], gpus: tuple[GpuInfo, ...]
) -> dict[str, float]:
    by_index = {gpu.index: gpu for gpu in gpus}
    resources: dict[str, float] = {}
    whole = [device for device in devices if isinstance(device, GpuInfo)]
    if whole:
        resources[names.GPU] = float(len(whole))
    for device in whole:
        key = names.gpu_type(device.name)
        resources[key] = resources.get(key, 0.0) + 1
    for part in devices:
        if isinstance(part, MigSlice):
            key = names.mig_slice(by_index[part.gpu_index].name, part.profile)
            resources[key] = resources.get(key, 0.0) + 1
    return resources


def advertised_resources(facts: MachineFacts, nprocs: int = 1) -> list[WorkerShare]:
    """Split a machine between ``nprocs`` worker processes, as their Dask resources.

    Parameters
    ----------
    facts
        The machine, from :func:`detect_machine`.
    nprocs
        How many worker processes share it.

    Returns
    -------
    list of WorkerShare
        One per process, in order. Each advertises ``CPU``, ``MEMORY``, ``SHM`` and ``DISK``
        (the last two only when nonzero) and, for the devices it owns, ``GPU`` (whole GPUs),
        ``GPU-<type>`` per type and ``MIG-<type>-<profile>`` per slice profile. How devices
        are dealt out is described in the module docstring.

    Raises
    ------
    ValueError
        ``nprocs`` is not a positive integer.

    Examples
    --------
    Eight H100 in two processes: ``GPU=4, GPU-H100=4`` each, visible ``"0,1,2,3"`` and
    ``"4,5,6,7"``.
    """
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise ValueError(f"nprocs= must be a positive integer such as 2, got {nprocs!r}")
    base: dict[str, float] = {
        names.CPU: float(max(1, facts.cores // nprocs)),
        names.MEMORY: float(facts.memory_bytes // nprocs),
    }
    if facts.shm_bytes // nprocs > 0:
        base[names.SHM] = float(facts.shm_bytes // nprocs)
    if facts.scratch_bytes // nprocs > 0:
        base[names.DISK] = float(facts.scratch_bytes // nprocs)

    devices = _devices(facts.gpus)
    each, extra = divmod(len(devices), nprocs)
    shares = []
    start = 0
    for process in range(nprocs):
        owned = devices[start : start + each + (process < extra)]
        start += len(owned)
        visible = None
        if facts.gpus:
            visible = ",".join(
                str(device.index) if isinstance(device, GpuInfo) else device.uuid
                for device in owned
            )
        shares.append(WorkerShare({**base, **_device_resources(owned, facts.gpus)}, visible))
    return shares
