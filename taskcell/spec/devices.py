"""Accelerators: GPUs (optionally a MIG slice), TPU slices, and any other device.

Three frozen records, as in Flyte: :class:`GPU`, :class:`TPU` and :class:`Device`. GPU and TPU
names are matched without regard to case, spaces, hyphens and underscores, a trailing ``B`` on a
memory size and an ``NVIDIA``/``Tesla``/``TPU`` prefix (``"a100-80gb"``, ``"A100 80GB"`` and
``"nvidia a10080g"`` are all ``"A100 80G"``), and stored in one canonical spelling.

String form, read by :func:`parse_gpu` and written by :func:`format_gpu` (canonical shown first):

======================================  =======================================================
``"2"`` (or the int ``2``)              two GPUs of any type: ``GPU(None, 2)``
``"A100:2"``, ``"L40s"``                typed GPUs; the count defaults to 1 (written ``"L40s:1"``)
``"A100/1g.5gb:1"``                     one MIG slice of an A100
``"V5P/2x2x1"``, ``"V6E"``              a TPU slice by topology (TPUs take no count)
``"device:custom_accelerator/large:2"``  any other accelerator, taken as written
======================================  =======================================================

A typed name that is neither a known GPU nor a known TPU is refused with the nearest known name;
other accelerators must be asked for explicitly, with :class:`Device` or the ``device:`` prefix,
so that a typo (``"A1000"``) never turns silently into a request nothing can meet.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from taskcell.errors import SpecError
from taskcell.spec._util import DECIMAL, did_you_mean, non_ascii_digits, shown

KNOWN_GPUS: tuple[str, ...] = (
    "T4",
    "L4",
    "L40s",
    "A10G",
    "V100",
    "A100",
    "A100 80G",
    "H100",
    "H200",
)
"""Canonical spellings of the GPUs taskcell knows by name."""

# NVIDIA's MIG user guide, "Supported MIG Profiles" (A100 40GB/80GB, H100 80GB, H200 141GB).
MIG_PROFILES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "A100": ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
        "A100 80G": ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
        "H100": ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
        "H200": ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
    }
)
"""The MIG partitions each GPU supports, keyed by canonical GPU name."""

# Flyte's TPU slice literals (flyte-sdk ``flyte/_resources.py``: V5PParts, V6EParts, V5EParts).
_PLANAR = ("1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16")
_V5P = (
    "2x2x1",
    "2x2x2",
    "2x4x4",
    "4x4x4",
    "4x4x8",
    "4x8x8",
    "8x8x8",
    "8x8x16",
    "8x16x16",
    "16x16x16",
    "16x16x24",
)
TPU_TOPOLOGIES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {"V5E": _PLANAR, "V5P": _V5P, "V6E": _PLANAR}
)
"""The slice topologies each TPU generation supports, keyed by canonical TPU name."""

MAX_DEVICES = 128
"""The most devices (GPUs, MIG slices, other accelerators) one task may ask for: more than any
machine holds (16 GPUs, or 112 MIG slices of them)."""

_ALIASES = {"A10040G": "A100", "H10080G": "H100", "H200141G": "H200", "V5LITEPOD": "V5E"}
_FREE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_. -]*", re.ASCII)
_DIGITS_RE = re.compile(r"[0-9]+", re.ASCII)
_NUMBER_RE = re.compile(rf"[+-]?{DECIMAL}", re.ASCII)
_DEVICE_PREFIX = "device:"
_FORMS = (
    'a GPU count such as 1, or an accelerator such as "A100:2", "A100 80G:1", "L40s", '
    '"A100/1g.5gb:1", "V5P/2x2x1" or "device:NAME:2"'
)


def _key(name: str) -> str:
    """The spelling-insensitive form of a device name: ``"nvidia a100-80GB"`` -> ``"A10080G"``."""
    key = re.sub(r"[^0-9A-Z]", "", name.upper())
    key = re.sub(r"^(?:NVIDIA|TESLA|TPU)", "", key)
    key = re.sub(r"(?<=\dG)B$", "", key)
    return _ALIASES.get(key, key)


_GPU_KEYS = {_key(name): name for name in KNOWN_GPUS}
_TPU_KEYS = {_key(name): name for name in TPU_TOPOLOGIES}


def _unknown(name: str, field: str) -> SpecError:
    known = {**_GPU_KEYS, **_TPU_KEYS}
    hint = did_you_mean(_key(name), known, cutoff=0.5, spelling=known)
    return SpecError(
        f"{field}= accelerator {name!r} is not a known GPU or TPU{hint} "
        f"(GPUs: {', '.join(KNOWN_GPUS)}; TPUs: {', '.join(TPU_TOPOLOGIES)}; "
        f'write Device({name!r}) or "device:NAME" for any other accelerator)'
    )


def _check_name_type(name: object, field: str, what: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise SpecError(f"{field}= {what} must be a non-empty string, got {shown(name)}")
    return name


def _gpu_name(name: object, field: str) -> str:
    name = _check_name_type(name, field, "GPU device")
    canonical = _GPU_KEYS.get(_key(name))
    if canonical is None:
        if _key(name) in _TPU_KEYS:
            raise SpecError(
                f"{field}= {name!r} is a TPU; use TPU({name!r}) or the form 'V5P/2x2x1'"
            )
        raise _unknown(name, field)
    return canonical


def _tpu_name(name: object, field: str) -> str:
    name = _check_name_type(name, field, "TPU device")
    canonical = _TPU_KEYS.get(_key(name))
    if canonical is None:
        hint = did_you_mean(_key(name), _TPU_KEYS, spelling=_TPU_KEYS)
        raise SpecError(
            f"{field}= TPU device {name!r} is not known{hint} "
            f"(known TPUs: {', '.join(TPU_TOPOLOGIES)})"
        )
    return canonical


def _count(quantity: object, field: str) -> int:
    """``quantity`` checked to be a whole number of devices, 1 to :data:`MAX_DEVICES`."""
    if isinstance(quantity, bool) or not isinstance(quantity, int) or quantity < 1:
        raise SpecError(
            f"{field}= quantity must be a whole number of devices >= 1, got {shown(quantity)}"
        )
    if quantity > MAX_DEVICES:
        raise _too_many(field, quantity)
    return quantity


def _too_many(field: str, value: object) -> SpecError:
    return SpecError(
        f"{field}= must ask for at most {MAX_DEVICES} devices, got {shown(value)} "
        f"(no machine has that many)"
    )


def _choice(value: object, choices: tuple[str, ...], field: str, what: str) -> str:
    if isinstance(value, str) and value.strip().lower() in choices:
        return value.strip().lower()
    hint = did_you_mean(value, choices) if isinstance(value, str) else ""
    valid = ", ".join(choices)
    raise SpecError(f"{field}= {what} {shown(value)} is not valid (valid: {valid}){hint}")


def _mig(device: str | None, partition: object, field: str) -> str:
    if device not in MIG_PROFILES:
        supported = ", ".join(MIG_PROFILES)
        on = f"on {device!r}" if device else "without a GPU device"
        raise SpecError(
            f"{field}= MIG partition {shown(partition)} is not available {on}; "
            f"MIG partitions exist on {supported}"
        )
    return _choice(partition, MIG_PROFILES[device], field, f"{device} MIG partition")


def _free_name(name: object, field: str, what: str) -> str:
    if not isinstance(name, str) or not _FREE_NAME_RE.fullmatch(name.strip()):
        raise SpecError(
            f"{field}= {what} must be a name of letters, digits, spaces and '_.-', "
            f"got {shown(name)}"
        )
    return name.strip()


@dataclass(frozen=True)
class GPU:
    """One or more GPUs, of a given type or of any type, or a MIG slice.

    Parameters
    ----------
    device : str, optional
        A known GPU (see :data:`KNOWN_GPUS`), in any spelling; None means any GPU type.
    quantity : int, optional
        How many GPUs (or MIG slices), at least 1.
    partition : str, optional
        A MIG profile valid on ``device`` (see :data:`MIG_PROFILES`), e.g. ``"1g.5gb"``.

    Raises
    ------
    SpecError
        For an unknown device (with the nearest known name), a quantity below 1, or a
        partition the device does not support (listing those it does).
    """

    device: str | None = None
    quantity: int = 1
    partition: str | None = None

    def __post_init__(self) -> None:
        if self.device is not None:
            object.__setattr__(self, "device", _gpu_name(self.device, "gpu"))
        _count(self.quantity, "gpu")
        if self.partition is not None:
            object.__setattr__(self, "partition", _mig(self.device, self.partition, "gpu"))


@dataclass(frozen=True)
class TPU:
    """A Google Cloud TPU slice.

    Parameters
    ----------
    device : str
        ``"V5E"``, ``"V5P"`` or ``"V6E"``, in any case.
    partition : str, optional
        The slice topology, e.g. ``"2x2x1"`` on V5P or ``"4x4"`` on V6E
        (see :data:`TPU_TOPOLOGIES`).

    Raises
    ------
    SpecError
        For an unknown TPU or a topology it does not offer.
    """

    device: str
    partition: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "device", _tpu_name(self.device, "gpu"))
        if self.partition is not None:
            topologies = TPU_TOPOLOGIES[self.device]
            topology = _choice(self.partition, topologies, "gpu", f"{self.device} topology")
            object.__setattr__(self, "partition", topology)


@dataclass(frozen=True)
class Device:
    """Any other accelerator, taken as written (``Device("custom_accelerator", 2, "large")``).

    Parameters
    ----------
    device : str
        The accelerator's name: letters, digits, spaces and ``_.-``.
    quantity : int, optional
        How many, at least 1.
    partition : str, optional
        A partition name in the same alphabet.

    Raises
    ------
    SpecError
        For an empty or malformed name or partition, or a quantity below 1.
    """

    device: str
    quantity: int = 1
    partition: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "device", _free_name(self.device, "gpu", "device name"))
        _count(self.quantity, "gpu")
        if self.partition is not None:
            partition = _free_name(self.partition, "gpu", "device partition")
            object.__setattr__(self, "partition", partition)


Accelerator = GPU | TPU | Device
"""What a ``gpu=`` request holds once parsed."""


def _parse_count(text: str, field: str, value: str) -> int:
    """A count written in ``value``: ASCII digits, 1 to :data:`MAX_DEVICES` (checked by length
    first, since ``int()`` refuses more than 4300 digits)."""
    digits = text.lstrip("0")
    if not _DIGITS_RE.fullmatch(text) or not digits:
        raise SpecError(
            f"{field}= count in {shown(value)} must be a whole number >= 1, got {shown(text)}"
        )
    if len(digits) > len(str(MAX_DEVICES)) or int(digits) > MAX_DEVICES:
        raise _too_many(field, value)
    return int(digits)


def _parse_text(value: str, field: str) -> Accelerator | None:
    hint = non_ascii_digits(value)
    if hint:
        raise SpecError(f"{field}= must be {_FORMS}, got {shown(value)}{hint}")
    text = value.strip()
    if _DIGITS_RE.fullmatch(text):
        return GPU(quantity=_parse_count(text, field, value)) if text.strip("0") else None
    if _NUMBER_RE.fullmatch(text):
        why = "a negative count" if text.startswith("-") else "a count is whole digits, such as 2"
        raise SpecError(f"{field}= must be {_FORMS}, got {shown(value)} ({why})")
    custom = text.casefold().startswith(_DEVICE_PREFIX)
    body = text[len(_DEVICE_PREFIX) :] if custom else text
    name, colon, count_text = body.partition(":")
    count = _parse_count(count_text.strip(), field, value) if colon else 1
    name, slash, partition = name.partition("/")
    part = partition.strip() if slash else None
    if not name.strip():
        raise SpecError(f"{field}= must be {_FORMS}, got {shown(value)}")
    if custom:
        return Device(_free_name(name, field, "device name"), count, part)
    if _key(name) in _TPU_KEYS:
        if colon:
            raise SpecError(
                f"{field}= TPU {shown(value)} takes no count; a TPU slice is chosen by its "
                f'topology, e.g. "V5P/2x2x1"'
            )
        device = _tpu_name(name, field)
        if part is not None:
            part = _choice(part, TPU_TOPOLOGIES[device], field, f"{device} topology")
        return TPU(device, part)
    device = _gpu_name(name, field)
    return GPU(device, count, _mig(device, part, field) if part is not None else None)


def parse_gpu(value: object, field: str = "gpu") -> Accelerator | None:
    """Parse a ``gpu=`` request.

    Parameters
    ----------
    value : int, str, GPU, TPU, Device or None
        A count (``1``; ``0`` and None mean no accelerator), a string in the form
        ``NAME[/PARTITION][:COUNT]`` (``"A100:2"``, ``"A100 80G:1"``, ``"L40s"``,
        ``"A100/1g.5gb:1"``, ``"V5P/2x2x1"``, ``"device:custom_accelerator/large:2"``,
        a bare count ``"2"``), or an accelerator record, returned as is.
    field : str, optional
        The option being parsed, named in errors.

    Returns
    -------
    GPU, TPU, Device or None
        The accelerator, with canonical names; None for no accelerator.

    Raises
    ------
    SpecError
        For negative or non-integral counts, unknown device names (with the nearest known
        one), MIG partitions or TPU topologies the device does not offer, and malformed strings.

    Examples
    --------
    >>> parse_gpu("a100-80gb:1")
    GPU(device='A100 80G', quantity=1, partition=None)
    >>> parse_gpu(2)
    GPU(device=None, quantity=2, partition=None)
    """
    if value is None or isinstance(value, GPU | TPU | Device):
        return value
    if isinstance(value, bool):
        raise SpecError(f"{field}= must be {_FORMS}, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise SpecError(f"{field}= must be {_FORMS}, got {shown(value)} (a negative count)")
        return GPU(quantity=value) if value else None
    if isinstance(value, str) and value.strip():
        return _parse_text(value, field)
    raise SpecError(f"{field}= must be {_FORMS}, got {shown(value)}")


def format_gpu(accelerator: Accelerator) -> str:
    """Spell an accelerator canonically; :func:`parse_gpu` reads it back to an equal record.

    Parameters
    ----------
    accelerator : GPU, TPU or Device
        What to spell.

    Returns
    -------
    str
        ``"2"`` for an untyped count, ``"A100:2"``, ``"A100 80G:1"``, ``"A100/1g.5gb:1"``
        (typed GPUs always carry their count), ``"V5P/2x2x1"``, ``"device:NAME/PART:2"``.

    Raises
    ------
    SpecError
        If ``accelerator`` is not a GPU, TPU or Device.

    Examples
    --------
    >>> format_gpu(GPU("a100 80gb"))
    'A100 80G:1'
    """
    if not isinstance(accelerator, GPU | TPU | Device):
        raise SpecError(f"format_gpu() takes a GPU, TPU or Device, got {accelerator!r}")
    part = f"/{accelerator.partition}" if accelerator.partition else ""
    if isinstance(accelerator, TPU):
        return f"{accelerator.device}{part}"
    if isinstance(accelerator, Device):
        return f"{_DEVICE_PREFIX}{accelerator.device}{part}:{accelerator.quantity}"
    if accelerator.device is None:
        return str(accelerator.quantity)
    return f"{accelerator.device}{part}:{accelerator.quantity}"
