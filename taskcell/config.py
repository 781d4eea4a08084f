"""taskcell's options, kept in Dask's config under ``taskcell.*``.

Defaults ship in ``taskcell.yaml``; Dask's YAML files and ``DASK_TASKCELL__...`` environment
variables override them, as for any Dask option. An option set to something taskcell cannot
use is a :class:`~taskcell.errors.SpecError` naming the option, the value and where it was
written (the environment variable or the YAML file), read when the option is first needed.
"""

from __future__ import annotations

import math
import os
import pathlib
from collections.abc import Mapping
from typing import Any

import dask.config
import yaml

from taskcell.errors import SpecError
from taskcell.spec import PROFILES, PlatformLimits, Resources, catalogue
from taskcell.spec._util import shown

_DEFAULTS = pathlib.Path(__file__).with_name("taskcell.yaml")

with _DEFAULTS.open() as f:
    dask.config.update_defaults(yaml.safe_load(f))


def get(key: str, default: Any = None) -> Any:
    """Read ``taskcell.<key>`` from Dask's config."""
    return dask.config.get(f"taskcell.{key}", default)


def where(key: str) -> str:
    """Where ``taskcell.<key>`` was set: ``taskcell.presets in ~/.config/dask/taskcell.yaml``,
    ``taskcell.presets (DASK_TASKCELL__PRESETS)``, or the key alone when it was set in Python
    (``dask.config.set``) or not at all."""
    wanted = ["taskcell", *key.split(".")]
    for name in os.environ:
        if name.startswith("DASK_") and _parts(name[5:].split("__")) == _parts(wanted):
            return f"taskcell.{key} ({name})"
    found = None
    for path in _config_files():
        try:
            data = yaml.safe_load(path.read_text())
        except (OSError, ValueError, yaml.YAMLError):
            continue
        if _lookup(data, wanted):
            found = path  # Dask merges the files in this order: the last one wins
    return f"taskcell.{key} in {found}" if found else f"taskcell.{key}"


def _parts(words: list[str]) -> list[str]:
    return [w.lower().replace("_", "-") for w in words]


def _config_files() -> list[pathlib.Path]:
    files = []
    for entry in map(pathlib.Path, dask.config.paths):
        if entry.is_dir():
            files += sorted(p for p in entry.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
        elif entry.is_file():
            files.append(entry)
    return files


def _lookup(data: object, parts: list[str]) -> bool:
    for part in _parts(parts):
        if not isinstance(data, Mapping):
            return False
        keys = {str(k).lower().replace("_", "-"): k for k in data}
        if part not in keys:
            return False
        data = data[keys[part]]
    return True


def presets() -> dict[str, Resources]:
    """Every preset a user can name: Latch's, then pyproject's, then Dask config's."""
    configured = get("presets")
    return catalogue({} if configured is None else configured, origin=where("presets"))


def platform() -> PlatformLimits | None:
    """The platform profile every request is checked against (``taskcell.platform``)."""
    name = get("platform")
    if name is None:
        return None
    if not isinstance(name, str) or name not in PROFILES:
        raise SpecError(
            f"{where('platform')} must be one of {', '.join(PROFILES)} or null, got {shown(name)}"
        )
    return PROFILES[name]


def seconds(key: str) -> float:
    """``taskcell.<key>`` as seconds: ``10s``, ``2 minutes``, ``1.5``."""
    return duration(get(key), where(key))


def duration(value: Any, name: str, *, zero: bool = False) -> float:
    """``value`` as a finite number of seconds: ``10s``, ``2 minutes``, ``1.5`` (a number is
    seconds), as Dask's ``parse_timedelta`` reads it.

    Parameters
    ----------
    value : object
        What the user wrote.
    name : str
        What the error calls it: the option and where it was set (see :func:`where`).
    zero : bool, optional
        Whether 0 is accepted (a pool's ``idle-timeout``: retire at once); else it must be
        positive.

    Raises
    ------
    SpecError
        Naming ``name``, the value and the accepted forms, for anything else (parse_timedelta's
        own TypeError, KeyError, AttributeError, OverflowError ... do not reach the user).
    """
    from dask.utils import parse_timedelta

    try:
        number = float(parse_timedelta(value, default="s"))
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError):
        number = math.nan
    if not (number >= 0 if zero else number > 0) or number == math.inf:
        accepted = "a duration (zero or more)" if zero else "a positive duration"
        raise SpecError(f"{name} must be {accepted} such as 10s or 2 minutes, got {shown(value)}")
    return number


def count(key: str) -> int | None:
    """``taskcell.<key>`` as a whole number of 1 or more, or None where it is unset (null)."""
    value = get(key)
    if value is None:
        return None
    text = value.strip() if isinstance(value, str) else ""
    if text.isascii() and text.isdigit() and len(text) <= 6:  # int() refuses 4300 digits
        value = int(text)  # as a DASK_TASKCELL__... variable gives it
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10_000:
        raise SpecError(
            f"{where(key)} must be a whole number from 1 to 10000 or null, got {shown(value)}"
        )
    return value


_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def flag(key: str) -> bool:
    """``taskcell.<key>`` as true or false: a YAML boolean, or ``true``/``false`` (also
    ``yes``/``no``, ``on``/``off``, ``1``/``0``) as a ``DASK_TASKCELL__...`` variable gives it."""
    value = get(key)
    if isinstance(value, bool):
        return value
    # 0 and 1 as YAML gives them (str() refuses an int of more than 4300 digits).
    word = value.strip().lower() if isinstance(value, str) else None
    if isinstance(value, int) and value in (0, 1):
        word = str(value)
    if word in _TRUE or word in _FALSE:
        return word in _TRUE
    raise SpecError(f"{where(key)} must be true or false, got {shown(value)}")
