"""Workload profiles: how much memory, scratch disk and GPU a kind of work needs per input byte.

A profile's memory is ``base-memory`` (the interpreter and its libraries, whatever the input)
plus ``memory-per-byte`` times the input's size. The built-in profiles' figures were measured
on the planner's workload corpus (``benchmarks/planner_corpus.py``: csv, json, text, numpy,
Parquet and pickle inputs, each cell also run alone under GNU ``time``); ``streaming`` work
reads its input piece by piece and needs no more for a larger one. Users add their own (or
change a built-in one) in Dask's configuration::

    taskcell:
      profiles:
        genomics:
          memory-per-byte: 6
          base-memory: 2Gi
          scratch-per-byte: 3
          cpu: 8
          description: alignment and variant calling

or ``dask.config.set({"taskcell.profiles.genomics": {...}})`` in a notebook. Keys may be
written with ``-`` or ``_``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from taskcell.errors import SpecError
from taskcell.spec import GPU, parse_cpu, parse_gpu, parse_quantity
from taskcell.spec._util import did_you_mean, shown
from taskcell.spec.amounts import show_bytes


@dataclass(frozen=True, kw_only=True)
class Profile:
    """What a kind of work needs for each byte of input.

    Parameters
    ----------
    name : str
    memory_per_byte : float
        Memory needed per input byte beyond ``base_memory`` (pandas reading csv needs 2-12x
        its input, depending on what the columns hold).
    scratch_per_byte : float
        Scratch disk per input byte (spills, intermediate files).
    gpu : str or int, optional
        GPUs needed, in ``gpu=`` form: ``1``, ``"A100:1"``; None for none.
    cpu : float, optional
        Cores needed at least, whatever the input.
    min_memory : int
        Memory needed at least, in bytes, whatever the input.
    base_memory : int
        Memory needed whatever the input (the interpreter and its libraries), in bytes.
    description : str
    """

    name: str
    memory_per_byte: float = 4.0
    scratch_per_byte: float = 1.0
    gpu: str | int | None = None
    cpu: float | None = None
    min_memory: int = 0
    base_memory: int = 0
    description: str = ""

    def __post_init__(self) -> None:
        for field in ("memory_per_byte", "scratch_per_byte"):
            value = getattr(self, field)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not 0 <= value < math.inf
                or value > sys.float_info.max  # an int no float holds: describe_profile's {:g}
            ):
                raise SpecError(
                    f"profile {self.name!r}: {field.replace('_', '-')} must be a finite number "
                    f"of zero or more, got {shown(value)}"
                )
        for field in ("min_memory", "base_memory"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise SpecError(
                    f"profile {self.name!r}: {field.replace('_', '-')} must be a number of "
                    f'bytes (or a quantity such as "2Gi"), got {shown(value)}'
                )
        try:
            accelerator = parse_gpu(self.gpu) if self.gpu is not None else None
            if self.cpu is not None:
                parse_cpu(self.cpu, "cpu")
        except SpecError as e:
            raise SpecError(f"profile {self.name!r}: {e}") from None
        if self.gpu is not None and not isinstance(accelerator, GPU):
            raise SpecError(
                f"profile {self.name!r}: gpu must be a GPU count or type such as 1 or "
                f'"A100:1", got {shown(self.gpu)}'
            )
        if isinstance(self.cpu, bool) or not isinstance(self.cpu, int | float | None):
            raise SpecError(
                f"profile {self.name!r}: cpu must be a number of cores, got {shown(self.cpu)}"
            )
        if not isinstance(self.description, str):
            raise SpecError(
                f"profile {self.name!r}: description must be text, got {shown(self.description)}"
            )

    @property
    def accelerator(self) -> GPU | None:
        """The GPUs this profile needs, parsed; None when it needs none."""
        gpu = parse_gpu(self.gpu) if self.gpu is not None else None
        return gpu if isinstance(gpu, GPU) else None


_MiB = 1 << 20
#: Pandas and the interpreter; numpy and the interpreter; the interpreter alone.
_PANDAS, _NUMPY, _PYTHON = 160 * _MiB, 48 * _MiB, 32 * _MiB

BUILTIN_PROFILES: Mapping[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            name="default",
            memory_per_byte=4,
            scratch_per_byte=1,
            base_memory=_PANDAS,
            description="dataframe work (pandas reading csv and the like): 160 MiB plus 4x the "
            "input in memory, 1x scratch",
        ),
        Profile(
            name="light",
            memory_per_byte=2,
            scratch_per_byte=0,
            base_memory=_PANDAS,
            description="filtering and selecting: 160 MiB plus 2x the input in memory, no scratch",
        ),
        Profile(
            name="heavy",
            memory_per_byte=8,
            scratch_per_byte=2,
            base_memory=_PANDAS,
            description="joins, sorts, pivots and JSON into a DataFrame: 160 MiB plus 8x the "
            "input in memory, 2x scratch",
        ),
        Profile(
            name="streaming",
            memory_per_byte=0,
            scratch_per_byte=0,
            base_memory=_PANDAS,
            description="reads its input piece by piece (lines, blocks, chunksize=): 160 MiB "
            "whatever the input's size",
        ),
        Profile(
            name="python-objects",
            memory_per_byte=12,
            scratch_per_byte=0,
            base_memory=_PYTHON,
            description="JSON, csv rows or a text's words as Python objects: 32 MiB plus 12x "
            "the input",
        ),
        Profile(
            name="numpy",
            memory_per_byte=3,
            scratch_per_byte=0,
            base_memory=_NUMPY,
            description="arrays and their temporaries: 48 MiB plus 3x the input (np.fft needs 9x)",
        ),
        Profile(
            name="gpu-training",
            memory_per_byte=4,
            scratch_per_byte=1,
            gpu=1,
            base_memory=_PANDAS,
            description="model training: 1 GPU, 160 MiB plus 4x the input in memory, 1x scratch",
        ),
        Profile(
            name="gpu-inference",
            memory_per_byte=2,
            scratch_per_byte=0,
            gpu=1,
            base_memory=_PANDAS,
            description="batch inference: 1 GPU, 160 MiB plus 2x the input in memory",
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
    "base-memory": "base_memory",
    "description": "description",
}


def _from_config(name: str, entry: Any) -> Profile:
    """A profile from ``taskcell.profiles.<name>``; errors say where it was set."""
    from taskcell import config

    where = config.where(f"profiles.{name}")
    if not isinstance(entry, Mapping):
        raise SpecError(
            f"{where} must be a mapping such as "
            f"{{'memory-per-byte': 4, 'scratch-per-byte': 1, 'gpu': 1}}, got {shown(entry)}"
        )
    fields: dict[str, Any] = {}
    for key, value in entry.items():
        text = key if isinstance(key, str) else shown(key)  # str() refuses 4300 digits
        field = _KEYS.get(text.replace("_", "-"))
        if field is None:
            hint = did_you_mean(text, _KEYS)
            raise SpecError(
                f"{where} has unknown key {shown(key)}{hint} (known: {', '.join(_KEYS)})"
            )
        fields[field] = value
    for field in ("min_memory", "base_memory"):
        if field in fields:
            key = field.replace("_", "-")
            fields[field] = parse_quantity(fields[field], f"taskcell.profiles.{name}.{key}")
    try:
        return Profile(name=name, **fields)
    except SpecError as e:  # name the configured key, and where it was set
        raise SpecError(str(e).replace(f"profile {name!r}: ", f"{where}: ", 1)) from None


def _configured() -> dict[str, Any]:
    """``taskcell.profiles``: each configured profile's entry by its name, checked later."""
    from taskcell import config

    configured = config.get("profiles")
    if configured is None:  # not `or {}`: an array's or a broken object's truth raises
        return {}
    where = config.where("profiles")
    if not isinstance(configured, Mapping):
        raise SpecError(
            f"{where} must be a mapping of name to profile such as "
            f"{{genomics: {{memory-per-byte: 6}}}}, got {shown(configured)}"
        )
    out = {}
    for name, entry in configured.items():
        # A YAML key may be a number (2024:); as Dask's keys, written as text.
        if not isinstance(name, str) and (
            isinstance(name, bool) or not isinstance(name, int) or name.bit_length() > 64
        ):
            raise SpecError(f"{where}: a profile's name must be text, got {shown(name)}")
        out[str(name)] = entry
    return out


def profiles() -> dict[str, Profile]:
    """Every profile: the built-in ones, then ``taskcell.profiles`` from Dask's config.

    Raises
    ------
    SpecError
        For a configured profile taskcell cannot use, naming its key, the value and where it
        was set.
    """
    out = dict(BUILTIN_PROFILES)
    for name, entry in _configured().items():
        out[name] = _from_config(name, entry)
    return out


#: The profile the planner uses when none is named.
DEFAULT_PROFILE = "default"


def profile_names() -> list[str]:
    """The names of every profile, built-in first (a configured one is checked when used)."""
    return list(dict.fromkeys([*BUILTIN_PROFILES, *_configured()]))


def describe_profile(name: str) -> str:
    """One line saying what a profile needs per input byte (its description, else its factors)."""
    p = get_profile(name)
    if p.description:
        return p.description
    parts = [f"{p.memory_per_byte:g}x the input in memory", f"{p.scratch_per_byte:g}x scratch"]
    if p.base_memory:
        parts[0] = f"{show_bytes(p.base_memory)} plus " + parts[0]
    if p.gpu is not None:
        parts.insert(0, f"GPU {p.gpu}")
    return ", ".join(parts)


def get_profile(profile: str | Profile) -> Profile:
    """A profile by name (or the profile itself); :class:`SpecError` names the known ones."""
    if isinstance(profile, Profile):
        return profile
    configured = _configured()
    if isinstance(profile, str) and profile in configured:
        return _from_config(profile, configured[profile])
    if isinstance(profile, str) and profile in BUILTIN_PROFILES:
        return BUILTIN_PROFILES[profile]
    known = profile_names()
    hint = did_you_mean(profile, known) if isinstance(profile, str) else ""
    raise SpecError(
        f"profile= {shown(profile)} is not a known profile{hint} (known: {', '.join(known)}); "
        "define your own under taskcell.profiles in Dask's config"
    )
