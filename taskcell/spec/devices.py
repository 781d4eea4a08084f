"""Accelerators: GPUs (optionally a MIG slice), TPU slices, and every other device.

Three frozen records, spelled as in Flyte 2 (flyte 2.12.1, ``flyte/_resources.py``):
:class:`GPU` ``(device, quantity, partition)``, :class:`TPU` ``(device, partition)`` and
:class:`Device` ``(quantity, device_class, device, partition)``, plus Flyte's helpers
:func:`Neuron`, :func:`AMD_GPU`, :func:`HABANA_GAUDI` and :func:`APPLE_SILICON`, which make a
:class:`Device`. A request holds one canonical record: a :class:`Device` of class ``"GPU"`` or
``"TPU"`` naming a known GPU or TPU (or of class ``"GPU"`` naming none) is read as the
:class:`GPU` or :class:`TPU` it asks for, so ``Device(1, "GPU", "A100")`` equals ``GPU("A100")``.

Known names (:data:`ACCELERATORS`, read with every other fact of a device from
``devices.yaml`` into :data:`DEVICES`) are every accelerator Flyte accepts, in Flyte's spelling,
except that taskcell writes Flyte's ``A100_80G`` as the seed's ``A100 80G`` (Flyte still accepts
that spelling). They are matched without regard to case, spaces, hyphens and underscores, a
trailing ``B`` on a memory size and an ``NVIDIA``/``Tesla``/``TPU`` prefix (``"a100-80gb"``,
``"A100 80GB"`` and ``"nvidia a10080g"`` are all ``"A100 80G"``; ``"rtx pro 6000"`` is
``"RTX_PRO_6000"``).

String form, read by :func:`parse_gpu` and written by :func:`format_gpu` (canonical shown first):

========================================  =====================================================
``"2"`` (or the int ``2``)                two GPUs of any type: ``GPU(None, 2)``
``"A100:2"``, ``"L40s"``                  typed GPUs; the count defaults to 1 (``"L40s:1"``)
``"A100/1g.5gb:1"``                       one MIG slice of an A100
``"T4 shared:1"``                         a time-sliced share of a T4 (takes no partition)
``"V5P/2x2x1"``, ``"V6E"``                a TPU slice by topology (TPUs take no count)
``"Trn1:4"``, ``"MI300X:1"``, ``"Gaudi1"``  AWS Neuron, AMD and Habana devices, by name
``"device:custom_accelerator/large:2"``   any other GPU-class accelerator, taken as written
``"neuron:Trn3:16"``                      any other device of a class: ``CLASS:NAME[/PART]:N``
========================================  =====================================================

A typed name that is not known is refused, with the nearest known name when one is a typo away;
other accelerators must be asked for explicitly, with :class:`Device` or a ``device:`` /
``CLASS:`` prefix, so that a typo (``"A1000"``) never turns silently into a request nothing can
meet.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from taskcell.errors import SpecError
from taskcell.spec._util import DECIMAL, did_you_mean, non_ascii_digits, package_yaml, shown

DeviceClass = Literal["GPU", "TPU", "NEURON", "AMD_GPU", "HABANA_GAUDI", "APPLE_SILICON"]
"""Flyte's device classes: what kind of accelerator a :class:`Device` is.

- ``"GPU"``: NVIDIA GPUs (Kubernetes ``nvidia.com/gpu``); also any custom accelerator.
- ``"TPU"``: Google Cloud TPU slices.
- ``"NEURON"``: AWS Trainium and Inferentia.
- ``"AMD_GPU"``: AMD Instinct GPUs.
- ``"HABANA_GAUDI"``: Intel Habana Gaudi.
- ``"APPLE_SILICON"``: the Metal GPU of the Mac a Flyte devbox runs on (one, never more).
"""
DEVICE_CLASSES: tuple[DeviceClass, ...] = (
    "GPU",
    "TPU",
    "NEURON",
    "AMD_GPU",
    "HABANA_GAUDI",
    "APPLE_SILICON",
)

_KEYS_OF = {
    "entry": frozenset({"class", "aliases", "mig", "topologies", "nvidia_smi", "flyte", "latch"}),
    "nvidia_smi": frozenset({"pattern", "products"}),
    "flyte": frozenset({"name", "counts", "mig"}),
}
_SCHEMA = (
    "an entry has class, flyte (name, counts, mig) and latch, and may have aliases, mig, "
    "topologies and nvidia_smi (pattern, products)"
)


@dataclass(frozen=True)
class DeviceFacts:
    """One accelerator as ``devices.yaml`` describes it: the one place a device's facts live."""

    name: str
    device_class: DeviceClass
    aliases: tuple[str, ...]
    mig: tuple[str, ...]
    """The MIG profiles a GPU supports (none: not a MIG GPU)."""
    topologies: tuple[str, ...]
    """The slice topologies a TPU offers."""
    product: re.Pattern[str] | None
    """Finds this GPU in the product name the driver reports (``nvidia-smi``, NVML)."""
    products: tuple[str, ...]
    """Product names seen in the wild, each found by :attr:`product`."""
    flyte_name: str
    flyte_counts: tuple[int, ...]
    """The counts Flyte's accelerator string (``"A100:2"``) takes; none for a TPU."""
    flyte_mig: tuple[str, ...]
    """The MIG partitions Flyte lists for this GPU."""
    latch: tuple[str, ...]
    """The Latch presets that offer this device, smallest first; empty where Latch has none."""


def _strings(entry: Mapping[str, object], key: str, name: str) -> tuple[str, ...]:
    """A list of strings in an entry of ``devices.yaml``, checked."""
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError(f"devices.yaml: {name}.{key} must be a list of strings, got {shown(value)}")
    return tuple(value)


def _facts(name: str, entry: dict[str, Any]) -> DeviceFacts:
    """One entry of ``devices.yaml`` read; unknown keys or class fail at import, naming them."""
    smi, flyte = entry.get("nvidia_smi", {}), entry.get("flyte", {})
    given = {"entry": set(entry), "nvidia_smi": set(smi), "flyte": set(flyte)}
    odd = sorted(key for part, keys in given.items() for key in keys - _KEYS_OF[part])
    if odd or not {"class", "flyte", "latch"} <= given["entry"] or "name" not in flyte:
        raise SpecError(f"devices.yaml: {name} has keys {sorted(entry)}, unknown {odd}; {_SCHEMA}")
    if entry["class"] not in DEVICE_CLASSES:
        raise SpecError(
            f"devices.yaml: {name}'s class {shown(entry['class'])} is not one of "
            f"{', '.join(DEVICE_CLASSES)}"
        )
    pattern = smi.get("pattern")
    return DeviceFacts(
        name=name,
        device_class=entry["class"],
        aliases=_strings(entry, "aliases", name),
        mig=_strings(entry, "mig", name),
        topologies=_strings(entry, "topologies", name),
        product=None if pattern is None else re.compile(pattern, re.IGNORECASE),
        products=_strings(smi, "products", name),
        flyte_name=flyte["name"],
        flyte_counts=tuple(int(n) for n in flyte.get("counts", [])),
        flyte_mig=_strings(flyte, "mig", name),
        latch=_strings(entry, "latch", name),
    )


DEVICES: Mapping[str, DeviceFacts] = MappingProxyType(
    {name: _facts(name, entry) for name, entry in package_yaml("devices.yaml").items()}
)
"""Every accelerator taskcell knows by name (canonical spelling), read once from
``devices.yaml``: the one table the spec, machine detection and the export targets read."""

KNOWN_GPUS: tuple[str, ...] = tuple(n for n, d in DEVICES.items() if d.device_class == "GPU")
"""Canonical spellings of the GPUs taskcell knows by name (Flyte's ``GPUType``)."""

SHARED_GPUS = frozenset(name for name in KNOWN_GPUS if name.endswith(" shared"))
"""Time-sliced (or MPS) shares of one GPU, Flyte's ``SharedGPUType``: they take no partition."""

MIG_PROFILES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {name: device.mig for name, device in DEVICES.items() if device.mig}
)
"""The MIG partitions each GPU supports, keyed by canonical GPU name."""

TPU_TOPOLOGIES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {name: device.topologies for name, device in DEVICES.items() if device.device_class == "TPU"}
)
"""The slice topologies each TPU generation supports, keyed by canonical TPU name."""

ACCELERATORS: Mapping[str, DeviceClass] = MappingProxyType(
    {name: device.device_class for name, device in DEVICES.items()}
)
"""Every accelerator taskcell knows by name (canonical spelling) and its device class."""

MAX_DEVICES = 128
"""The most devices (GPUs, MIG slices, other accelerators) one task may ask for: more than any
machine holds (16 GPUs, or 112 MIG slices of them)."""

_FREE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_. -]*", re.ASCII)
_DIGITS_RE = re.compile(r"[0-9]+", re.ASCII)
_NUMBER_RE = re.compile(rf"[+-]?{DECIMAL}", re.ASCII)
_CLASS_PREFIX_RE = re.compile(r"([a-z_]+):", re.ASCII | re.IGNORECASE)
_FORMS = (
    'a GPU count such as 1, or an accelerator such as "A100:2", "A100 80G:1", "L40s", '
    '"A100/1g.5gb:1", "V5P/2x2x1", "Trn1:4", "device:NAME:2" or "neuron:NAME:2"'
)


def device_key(name: str) -> str:
    """The one case rule for device names: the form two spellings of a device compare in,
    without regard to case, spaces, ``-_``, a trailing ``B`` and a vendor prefix
    (``"nvidia a100-80GB"`` -> ``"A10080G"``)."""
    key = re.sub(r"[^0-9A-Z]", "", name.upper())
    key = re.sub(r"^(?:NVIDIA|TESLA|TPU)", "", key)
    return re.sub(r"(?<=\dG)B$", "", key)


_KEYS = {
    device_key(spelling): name
    for name, device in DEVICES.items()
    for spelling in (name, *device.aliases)
}
_LONGEST_NAME = 32


def _distance(a: str, b: str) -> int:
    """Levenshtein distance between two short strings."""
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def _nearest(name: str, candidates: Iterable[str]) -> str | None:
    """The known name a typo away from ``name`` (one edit, two for longer names), else None."""
    key = device_key(name)
    if len(key) > _LONGEST_NAME:  # no typo of a known name; and the distance is quadratic
        return None
    allowed = 1 if len(key) <= 5 else 2
    scored = [
        (_distance(key, device_key(c)), -_shared_prefix(key, device_key(c)), i, c)
        for i, c in enumerate(candidates)
    ]
    best = min(scored, default=None)
    return best[-1] if best is not None and 0 < best[0] <= allowed else None


def _shared_prefix(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share: ``"MI300"`` is nearer ``"MI300A"``."""
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def _hint(name: str, candidates: Iterable[str]) -> str:
    found = _nearest(name, candidates)
    return f'; did you mean "{found}"?' if found else ""


def _unknown(name: str, field: str) -> SpecError:
    gpus = ", ".join(KNOWN_GPUS)
    others = ", ".join(n for n, c in ACCELERATORS.items() if c != "GPU")
    classes = ", ".join(c.lower() for c in DEVICE_CLASSES)
    return SpecError(
        f"{field}= accelerator {name!r} is not a known GPU, TPU or other device"
        f"{_hint(name, ACCELERATORS)} (GPUs: {gpus}; others: {others}); for any other "
        f"accelerator write 'device:NAME' (a GPU) or 'CLASS:NAME' (CLASS: {classes}), "
        f"or Device(1, 'GPU', {name!r})"
    )


def _check_name_type(name: object, field: str, what: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise SpecError(f"{field}= {what} must be a non-empty string, got {shown(name)}")
    return name


def _known(name: str) -> str | None:
    """The canonical spelling of a known accelerator name, else None."""
    return _KEYS.get(device_key(name))


def _gpu_name(name: object, field: str) -> str:
    name = _check_name_type(name, field, "GPU device")
    canonical = _known(name)
    if canonical is None:
        raise _unknown(name, field)
    kind = ACCELERATORS[canonical]
    if kind == "TPU":
        raise SpecError(f"{field}= {name!r} is a TPU; use TPU({name!r}) or the form 'V5P/2x2x1'")
    if kind != "GPU":
        raise SpecError(
            f"{field}= {name!r} is a {kind} device, not a GPU; write {canonical!r} (with a count, "
            f'"{canonical}:1") or Device(1, {kind!r}, {canonical!r})'
        )
    return canonical


def _tpu_name(name: object, field: str) -> str:
    name = _check_name_type(name, field, "TPU device")
    canonical = _known(name)
    if canonical is None or ACCELERATORS[canonical] != "TPU":
        raise SpecError(
            f"{field}= TPU device {name!r} is not known{_hint(name, TPU_TOPOLOGIES)} "
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
    if device in SHARED_GPUS:
        raise SpecError(
            f"{field}= a shared GPU takes no partition, got {shown(partition)} for {device!r}; "
            f"ask for a whole {device.removesuffix(' shared')!r} to use a MIG partition"
        )
    profiles = MIG_PROFILES.get(device or "")
    if profiles is None:
        supported = ", ".join(MIG_PROFILES)
        on = f"on {device!r}" if device else "without a GPU device"
        raise SpecError(
            f"{field}= MIG partition {shown(partition)} is not available {on}; "
            f"MIG partitions exist on {supported}"
        )
    return _choice(partition, profiles, field, f"{device} MIG partition")


def _free_name(name: object, field: str, what: str) -> str:
    if not isinstance(name, str) or not _FREE_NAME_RE.fullmatch(name.strip()):
        raise SpecError(
            f"{field}= {what} must be a name of letters, digits, spaces and '_.-', "
            f"got {shown(name)}"
        )
    return name.strip()


def _class_named(word: str) -> DeviceClass | None:
    """The device class ``word`` names, in any case (``"neuron"`` -> ``"NEURON"``), else None."""
    return next((kind for kind in DEVICE_CLASSES if kind == word.strip().upper()), None)


def _device_class(value: object, field: str) -> DeviceClass:
    kind = _class_named(value) if isinstance(value, str) else None
    if kind is not None:
        return kind
    raise SpecError(
        f"{field}= device_class must be one of {', '.join(DEVICE_CLASSES)}, got {shown(value)}"
        f"{_hint(value, DEVICE_CLASSES) if isinstance(value, str) else ''}"
    )


@dataclass(frozen=True)
class GPU:
    """One or more GPUs, of a given type or of any type, or a MIG slice (Flyte's ``GPU``).

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

    @property
    def device_class(self) -> DeviceClass:
        """``"GPU"``, as Flyte's ``GPU(...).device_class``."""
        return "GPU"


@dataclass(frozen=True)
class TPU:
    """A Google Cloud TPU slice (Flyte's ``TPU``).

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

    @property
    def device_class(self) -> DeviceClass:
        """``"TPU"``, as Flyte's ``TPU(...).device_class``."""
        return "TPU"

    @property
    def quantity(self) -> int:
        """1: a task asks for one slice, as Flyte's ``TPU(...).quantity``."""
        return 1


@dataclass(frozen=True)
class Device:
    """An accelerator of any class, with Flyte's signature ``Device(quantity, device_class, ...)``.

    Parameters
    ----------
    quantity : int
        How many, at least 1.
    device_class : str, optional
        One of :data:`DEVICE_CLASSES`, in any case; ``"GPU"`` by default (seed 002 writes
        ``Device(device="custom_accelerator", quantity=2, partition="large")``).
    device : str, optional
        The accelerator's name: a known one (``"Trn1"``, spelled canonically) or any name of
        letters, digits, spaces and ``_.-``. Only a ``"GPU"`` may leave it unset (any GPU).
    partition : str, optional
        A partition name in the same alphabet.

    Raises
    ------
    SpecError
        For a quantity below 1 (or a name where the quantity goes: the signature is Flyte's),
        an unknown class, a malformed name or partition, a known name of another class, or an
        Apple Silicon device other than one.

    Examples
    --------
    >>> Device(2, "neuron", "trn1")
    Device(quantity=2, device_class='NEURON', device='Trn1', partition=None)
    """

    quantity: int
    device_class: DeviceClass = "GPU"
    device: str | None = None
    partition: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.quantity, str):
            raise SpecError(
                f"gpu= Device() takes Flyte's signature Device(quantity, device_class, device, "
                f"partition), got quantity={shown(self.quantity)}; write "
                f"Device(1, 'GPU', {shown(self.quantity)})"
            )
        _count(self.quantity, "gpu")
        kind = _device_class(self.device_class, "gpu")
        object.__setattr__(self, "device_class", kind)
        if self.device is None and kind != "GPU":
            raise SpecError(
                f"gpu= a {kind} Device needs a device name, e.g. "
                f"Device({self.quantity}, {kind!r}, {_example(kind)!r})"
            )
        if self.device is not None:
            object.__setattr__(self, "device", self._name(kind))
        if self.partition is not None:
            partition = _free_name(self.partition, "gpu", "device partition")
            object.__setattr__(self, "partition", partition)
        if kind == "APPLE_SILICON" and self.quantity != 1:
            raise SpecError(
                f"gpu= an Apple Silicon device is the Mac's one Metal GPU; quantity must be 1, "
                f"got {self.quantity}"
            )

    def _name(self, kind: DeviceClass) -> str:
        """The device name, canonical when known; a known name must be of ``kind``."""
        name = _free_name(self.device, "gpu", "device name")
        canonical = _known(name)
        if canonical is None:
            return name
        if ACCELERATORS[canonical] != kind:
            raise SpecError(
                f"gpu= {name!r} is a {ACCELERATORS[canonical]} device, not {kind}; write "
                f"Device({self.quantity}, {ACCELERATORS[canonical]!r}, {canonical!r})"
            )
        return canonical


def _example(kind: DeviceClass) -> str:
    return next(name for name, c in ACCELERATORS.items() if c == kind)


def Neuron(device: str) -> Device:
    """An AWS Neuron device (``"Inf1"``, ``"Inf2"``, ``"Trn1"``, ...), as Flyte's ``Neuron``."""
    return _named(device, "NEURON")


def AMD_GPU(device: str) -> Device:
    """An AMD GPU (``"MI300X"``, ...), as Flyte's ``AMD_GPU``."""
    return _named(device, "AMD_GPU")


def HABANA_GAUDI(device: str) -> Device:
    """A Habana Gaudi device (``"Gaudi1"``), as Flyte's ``HABANA_GAUDI``."""
    return _named(device, "HABANA_GAUDI")


def APPLE_SILICON() -> Device:
    """The Metal GPU of the Mac a Flyte devbox runs on, as Flyte's ``APPLE_SILICON``."""
    return Device(1, "APPLE_SILICON", "AppleSilicon")


def _named(device: object, kind: DeviceClass) -> Device:
    """One known device of ``kind``: Flyte's helpers refuse names they do not list."""
    name = _check_name_type(device, "gpu", f"{kind} device")
    canonical = _known(name)
    if canonical is None or ACCELERATORS[canonical] != kind:
        known = [n for n, c in ACCELERATORS.items() if c == kind]
        raise SpecError(
            f"gpu= {kind} device {name!r} is not known{_hint(name, known)} "
            f"(known: {', '.join(known)}; write Device(1, {kind!r}, {name!r}) for another)"
        )
    return Device(1, kind, canonical)


Accelerator = GPU | TPU | Device
"""What a ``gpu=`` request holds once parsed."""


def _canonical(device: Device) -> Accelerator:
    """The record a request holds: a known GPU or TPU as :class:`GPU` or :class:`TPU`."""
    if device.device_class == "GPU" and (device.device is None or device.device in ACCELERATORS):
        return GPU(device.device, device.quantity, device.partition)
    if device.device_class == "TPU" and device.device is not None and device.device in ACCELERATORS:
        if device.quantity != 1:
            raise SpecError(
                f"gpu= a TPU slice is chosen by its topology, not counted; got quantity="
                f"{device.quantity} for {device.device!r}"
            )
        return TPU(device.device, device.partition)
    return device


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


def _class_prefix(text: str, field: str) -> tuple[DeviceClass, str] | None:
    """``("NEURON", "Trn3:16")`` for ``"neuron:Trn3:16"``; ``device:`` is the GPU class."""
    found = _CLASS_PREFIX_RE.match(text)
    if found is None:
        return None
    word, body = found.group(1), text[found.end() :]
    kind = "GPU" if word.upper() == "DEVICE" else _class_named(word)
    if kind is None and ":" in body:
        classes = ", ".join(c.lower() for c in DEVICE_CLASSES)
        raise SpecError(
            f"{field}= {word!r} in {shown(text)} is not a device class "
            f"(CLASS:NAME:COUNT takes one of device, {classes}){_hint(word, DEVICE_CLASSES)}"
        )
    return None if kind is None else (kind, body)


def _split(body: str, field: str, value: str) -> tuple[str, str | None, int | None]:
    """``NAME[/PARTITION][:COUNT]``: the name, and the partition and count if given."""
    name, colon, count_text = body.partition(":")
    count = _parse_count(count_text.strip(), field, value) if colon else None
    name, slash, partition = name.partition("/")
    if not name.strip():
        raise SpecError(f"{field}= must be {_FORMS}, got {shown(value)}")
    return name, partition.strip() if slash else None, count


def _parse_prefixed(kind: DeviceClass, body: str, field: str, value: str) -> Accelerator:
    """``CLASS:NAME[/PARTITION][:COUNT]``, or ``gpu:COUNT`` / ``device:COUNT`` for any GPU."""
    if kind == "GPU" and _DIGITS_RE.fullmatch(body.strip()):
        return GPU(quantity=_parse_count(body.strip(), field, value))
    name, part, count = _split(body, field, value)
    device = Device(count or 1, kind, _free_name(name, field, "device name"), part)
    return _canonical(device)


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
    prefixed = _class_prefix(text, field)
    if prefixed is not None:
        return _parse_prefixed(*prefixed, field, value)
    return _known_accelerator(*_split(text, field, value), field, value)


def _known_accelerator(
    name: str, part: str | None, count: int | None, field: str, value: str
) -> Accelerator:
    """A record for a known accelerator written ``NAME[/PARTITION][:COUNT]``."""
    canonical = _known(name)
    if canonical is None:
        raise _unknown(name, field)
    kind = ACCELERATORS[canonical]
    if kind == "TPU":
        if count is not None:
            raise SpecError(
                f"{field}= TPU {shown(value)} takes no count; a TPU slice is chosen by its "
                f'topology, e.g. "V5P/2x2x1"'
            )
        if part is not None:
            part = _choice(part, TPU_TOPOLOGIES[canonical], field, f"{canonical} topology")
        return TPU(canonical, part)
    if kind == "GPU":
        partition = _mig(canonical, part, field) if part is not None else None
        return GPU(canonical, count or 1, partition)
    return Device(count or 1, kind, canonical, part)


def parse_gpu(value: object, field: str = "gpu") -> Accelerator | None:
    """Parse a ``gpu=`` request.

    Parameters
    ----------
    value : int, str, GPU, TPU, Device or None
        A count (``1``; ``0`` and None mean no accelerator), a string in the form
        ``NAME[/PARTITION][:COUNT]`` (``"A100:2"``, ``"A100 80G:1"``, ``"L40s"``,
        ``"A100/1g.5gb:1"``, ``"V5P/2x2x1"``, ``"Trn1:4"``, ``"device:custom/large:2"``,
        ``"neuron:Trn3:16"``, a bare count ``"2"``), or an accelerator record.
    field : str, optional
        The option being parsed, named in errors.

    Returns
    -------
    GPU, TPU, Device or None
        The accelerator, with canonical names; None for no accelerator. A :class:`Device`
        naming a known GPU or TPU (or any GPU) comes back as that :class:`GPU` or :class:`TPU`;
        other records are returned as they are.

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
    >>> parse_gpu("trn1:4")
    Device(quantity=4, device_class='NEURON', device='Trn1', partition=None)
    """
    if value is None or isinstance(value, GPU | TPU):
        return value
    if isinstance(value, Device):
        return _canonical(value)
    if isinstance(value, bool):
        raise SpecError(f"{field}= must be {_FORMS}, got {shown(value)}")
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
        (typed GPUs always carry their count), ``"V5P/2x2x1"``, ``"Trn1:4"`` (a known device),
        ``"device:NAME/PART:2"`` (any other GPU-class device), ``"neuron:NAME:2"`` (any other
        device of another class).

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
        raise SpecError(f"format_gpu() takes a GPU, TPU or Device, got {shown(accelerator)}")
    record = _canonical(accelerator) if isinstance(accelerator, Device) else accelerator
    part = f"/{record.partition}" if record.partition else ""
    if isinstance(record, TPU):
        return f"{record.device}{part}"
    if isinstance(record, GPU) and record.device is None:
        return str(record.quantity)
    if isinstance(record, Device) and record.device not in ACCELERATORS:
        prefix = "device" if record.device_class == "GPU" else record.device_class.lower()
        return f"{prefix}:{record.device}{part}:{record.quantity}"
    return f"{record.device}{part}:{record.quantity}"
