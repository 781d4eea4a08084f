"""Workload profiles: how much memory, scratch disk and GPU a kind of work needs per input byte.

A few are built in; users add their own (or change a built-in one) in Dask's configuration::

    taskcell:
      profiles:
        genomics:
          memory-per-byte: 6
          scratch-per-byte: 3
          cpu: 8
          description: alignment and variant calling

or ``dask.config.set({"taskcell.profiles.genomics": {...}})`` in a notebook. Keys may be
written with ``-`` or ``_``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from taskcell.errors import SpecError
from taskcell.spec import GPU, parse_gpu, parse_quantity


@dataclass(frozen=True)
class Profile:
    """What a kind of work needs for each byte of input.

    Parameters
    ----------
    name : str
    memory_per_byte : float
        Memory needed per input byte (pandas work commonly needs 3-5x its input).
    scratch_per_byte : float
        Scratch disk per input byte (spills, intermediate files).
    gpu : str or int, optional
        GPUs needed, in ``gpu=`` form: ``1``, ``"A100:1"``; None for none.
    cpu : float, optional
        Cores needed at least, whatever the input.
    min_memory : int
        Memory needed at least, in bytes, whatever the input.
    description : str
    """

    name: str
    memory_per_byte: float = 4.0
    scratch_per_byte: float = 1.0
    gpu: str | int | None = None
    cpu: float | None = None
    min_memory: int = 0
    description: str = ""

    def __post_init__(self) -> None:
        for field in ("memory_per_byte", "scratch_per_byte"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise SpecError(
                    f"profile {self.name!r}: {field.replace('_', '-')} must be a number of zero "
                    f"or more, got {value!r}"
                )
        if self.gpu is not None:
            accelerator = parse_gpu(self.gpu)
            if not isinstance(accelerator, GPU) and accelerator is not None:
                raise SpecError(
                    f"profile {self.name!r}: gpu must be a GPU count or type such as 1 or "
                    f'"A100:1", got {self.gpu!r}'
                )
        if self.cpu is not None and (isinstance(self.cpu, bool) or not self.cpu > 0):
            raise SpecError(
                f"profile {self.name!r}: cpu must be a positive number, got {self.cpu!r}"
            )

    @property
    def accelerator(self) -> GPU | None:
        """The GPUs this profile needs, parsed; None when it needs none."""
        gpu = parse_gpu(self.gpu) if self.gpu is not None else None
        return gpu if isinstance(gpu, GPU) else None


BUILTIN_PROFILES: Mapping[str, Profile] = {
    p.name: p
    for p in (
        Profile("default", 4, 1, description="dataframe work: 4x the input in memory, 1x scratch"),
        Profile("light", 2, 0, description="filtering and streaming: 2x in memory, no scratch"),
        Profile("heavy", 8, 2, description="joins, sorts and pivots: 8x in memory, 2x scratch"),
        Profile(
            "gpu-training",
            4,
            1,
            gpu=1,
            description="model training: 1 GPU, 4x the input in memory, 1x scratch",
        ),
        Profile(
            "gpu-inference",
            2,
            0,
            gpu=1,
            description="batch inference: 1 GPU, 2x the input in memory",
        ),
    )
}
"""The profiles every user has; ``taskcell.profiles`` in Dask's config adds or replaces them."""

_KEYS = {
    "memory-per-byte": "memory_per_byte",
    "scratch-per-byte": "scratch_per_byte",
    "gpu": "gpu",
    "cpu": "cpu",
    "min-memory": "min_memory",
    "description": "description",
}


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``'; did you mean "X"?'`` for the nearest choice (case aside), or ``""``: spec's wording."""
    folded = {choice.casefold(): choice for choice in choices}
    close = difflib.get_close_matches(word.casefold(), folded, n=1)
    return f'; did you mean "{folded[close[0]]}"?' if close else ""


def _from_config(name: str, entry: Any) -> Profile:
    if not isinstance(entry, Mapping):
        raise SpecError(
            f"taskcell.profiles.{name} must be a mapping such as "
            f"{{'memory-per-byte': 4, 'scratch-per-byte': 1, 'gpu': 1}}, got {entry!r}"
        )
    fields: dict[str, Any] = {}
    for key, value in entry.items():
        field = _KEYS.get(str(key).replace("_", "-"))
        if field is None:
            hint = _did_you_mean(str(key), _KEYS)
            raise SpecError(
                f"taskcell.profiles.{name} has unknown key {key!r}{hint} "
                f"(known: {', '.join(_KEYS)})"
            )
        fields[field] = value
    if "min_memory" in fields:
        fields["min_memory"] = parse_quantity(fields["min_memory"], f"profiles.{name}.min-memory")
    return Profile(name, **fields)


def profiles() -> dict[str, Profile]:
    """Every profile: the built-in ones, then ``taskcell.profiles`` from Dask's config."""
    from taskcell import config

    out = dict(BUILTIN_PROFILES)
    configured = config.get("profiles") or {}
    if not isinstance(configured, Mapping):
        raise SpecError(
            f"taskcell.profiles must be a mapping of name to profile, got {configured!r}"
        )
    for name, entry in configured.items():
        out[str(name)] = _from_config(str(name), entry)
    return out


#: The profile the planner uses when none is named.
DEFAULT_PROFILE = "default"


def profile_names() -> list[str]:
    """The names of every profile, built-in first."""
    return list(profiles())


def describe_profile(name: str) -> str:
    """One line saying what a profile needs per input byte (its description, else its factors)."""
    p = get_profile(name)
    if p.description:
        return p.description
    parts = [f"{p.memory_per_byte:g}x the input in memory", f"{p.scratch_per_byte:g}x scratch"]
    if p.gpu is not None:
        parts.insert(0, f"GPU {p.gpu}")
    return ", ".join(parts)


def get_profile(profile: str | Profile) -> Profile:
    """A profile by name (or the profile itself); :class:`SpecError` names the known ones."""
    if isinstance(profile, Profile):
        return profile
    known = profiles()
    if not isinstance(profile, str) or profile not in known:
        hint = _did_you_mean(str(profile), known)
        raise SpecError(
            f"profile= {profile!r} is not a known profile{hint} (known: {', '.join(known)}); "
            "define your own under taskcell.profiles in Dask's config"
        )
    return known[profile]
