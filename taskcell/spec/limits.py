"""Platform maxima, checked before a request is exported or submitted.

A request is checked on its limit side (what it may grow to), since that is what the platform
must be able to provide. Latch documents its maxima for ``custom_task`` (126 cpus, 975 GiB memory,
4949 GiB ephemeral storage); Latch's own fixed presets run on other machines and are not held to
them (``v100_x8_task`` has 128 cpus).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from taskcell.errors import LimitError, SpecError
from taskcell.spec._util import did_you_mean, shown
from taskcell.spec.cpu import format_cpu, parse_cpu
from taskcell.spec.devices import GPU, Device
from taskcell.spec.quantity import format_quantity, parse_quantity
from taskcell.spec.ranges import Range
from taskcell.spec.resources import Resources


@dataclass(frozen=True, init=False)
class PlatformLimits:
    """The most one task may ask for on a platform.

    Parameters
    ----------
    name : str
        The profile's name, used in messages (``"latch"``).
    cpu : int, float, str or Fraction
        Most cores, in any form :func:`~taskcell.spec.cpu.parse_cpu` reads; stored as Fraction.
    memory : int or str
        Most memory, in any form :func:`~taskcell.spec.quantity.parse_quantity` reads;
        stored as bytes.
    disk : int or str
        Most ephemeral storage; stored as bytes.
    gpus : int, optional
        Most GPUs or devices; None for no GPU limit.

    Raises
    ------
    SpecError
        For malformed values.
    """

    name: str
    cpu: Fraction
    memory: int
    disk: int
    gpus: int | None = None

    def __init__(
        self, name: str, cpu: object, memory: object, disk: object, gpus: int | None = None
    ) -> None:
        if not isinstance(name, str) or not name:
            raise SpecError(f"a platform profile needs a name, got {shown(name)}")
        if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int)):
            raise SpecError(f"gpus= must be a whole number of devices or None, got {shown(gpus)}")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "cpu", parse_cpu(cpu))
        object.__setattr__(self, "memory", parse_quantity(memory, "memory"))
        object.__setattr__(self, "disk", parse_quantity(disk, "disk"))
        object.__setattr__(self, "gpus", gpus)


LATCH = PlatformLimits("latch", cpu=126, memory="975Gi", disk="4949Gi")
"""Latch's documented maxima for a custom task."""

PROFILES: Mapping[str, PlatformLimits] = MappingProxyType({LATCH.name: LATCH})
"""Every known platform profile, by name."""


def _over(
    field: str,
    asked: Range | None,
    most: int | Fraction,
    spell: Callable[[Any], str],
    unit: str,
    name: str,
) -> str | None:
    """The sentence saying ``asked`` exceeds ``most``, or None when it does not."""
    if asked is None or asked.limit <= most:
        return None
    side = "" if asked.is_fixed else " (the limit of the range)"
    return f"{field}={spell(asked.limit)}{side} exceeds {name}'s maximum of {spell(most)}{unit}"


def check_limits(resources: Resources, profile: PlatformLimits | str) -> None:
    """Check a request against a platform's maxima.

    Parameters
    ----------
    resources : Resources
        The request.
    profile : PlatformLimits or str
        The limits, or the name of one of :data:`PROFILES`.

    Raises
    ------
    LimitError
        Naming every field over the maximum, its value, the maximum and the profile:
        ``cpu=128 exceeds latch's maximum of 126 cpus``.
    SpecError
        For an unknown profile name, suggesting the nearest.

    Examples
    --------
    >>> check_limits(Resources(cpu=8, memory="32Gi"), "latch")
    """
    if not isinstance(resources, Resources):
        raise SpecError(f"check_limits() takes a Resources, got {shown(resources)}")
    if not isinstance(profile, PlatformLimits):
        if not isinstance(profile, str) or profile not in PROFILES:
            hint = did_you_mean(profile, PROFILES) if isinstance(profile, str) else ""
            raise SpecError(
                f"profile= {shown(profile)} is not a known platform{hint} "
                f"(known: {', '.join(PROFILES)})"
            )
        profile = PROFILES[profile]
    name = profile.name
    shm = Range(resources.shm, resources.shm) if isinstance(resources.shm, int) else None
    problems = [
        _over("cpu", resources.cpu, profile.cpu, format_cpu, " cpus", name),
        _over("memory", resources.memory, profile.memory, format_quantity, " memory", name),
        _over("shm", shm, profile.memory, format_quantity, " memory", name),
        _over("disk", resources.disk, profile.disk, format_quantity, " disk", name),
    ]
    gpu = resources.gpu
    if profile.gpus is not None and isinstance(gpu, GPU | Device) and gpu.quantity > profile.gpus:
        problems.append(f"gpu={gpu.quantity} exceeds {name}'s maximum of {profile.gpus} gpus")
    found = [problem for problem in problems if problem]
    if found:
        raise LimitError("; ".join(found))
