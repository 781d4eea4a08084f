"""Named requests: Latch's catalogue, shipped as data, and the user's own.

The built-in presets are Latch's prespecified tasks, read from ``presets.yaml`` beside this
module. Users add their own in the nearest ``pyproject.toml``::

    [tool.taskcell.presets]
    gpu_box = { cpu = 8, memory = "32Gi", gpu = "A100:1" }

and a higher layer may pass more (Dask's ``taskcell.presets`` config) to :func:`catalogue`.

Precedence, lowest first: built-in, ``pyproject.toml``, then the ``extra`` argument. A user
preset may reuse a built-in name and then replaces it (a team's ``small_task`` may be bigger than
Latch's); :func:`presets_frame` marks such a row ``source="user"``, so the change is visible.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from taskcell.errors import SpecError
from taskcell.spec._util import did_you_mean, package_yaml, shown
from taskcell.spec.devices import GPU, Device
from taskcell.spec.resources import REQUEST_FIELDS, Resources

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

if TYPE_CHECKING:
    import pandas

_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")
_TEXT_COLUMNS = ("preset", "cpu", "memory", "gpu", "disk", "shm", "source", "description")
_NUMBER_COLUMNS = ("cpu_cores", "memory_bytes", "disk_bytes", "gpu_count")


def _preset(name: object, entry: object, origin: str) -> Resources:
    """One preset entry (a mapping of Resources fields, or a Resources) checked and parsed."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise SpecError(f"preset name {shown(name)} in {origin} must be letters, digits and '_.-'")
    if isinstance(entry, Resources):
        return entry
    if not isinstance(entry, Mapping):
        raise SpecError(
            f"preset {name!r} in {origin} must be a table of resource fields such as "
            f'{{ cpu = 8, memory = "32Gi" }}, got {shown(entry)}'
        )
    try:
        return Resources.from_dict(entry)
    except SpecError as error:
        raise SpecError(f"preset {name!r} in {origin}: {error}") from None


def _load_builtin() -> tuple[Mapping[str, Resources], Mapping[str, str]]:
    presets, descriptions = {}, {}
    for name, entry in package_yaml("presets.yaml").items():
        fields = dict(entry)
        descriptions[name] = fields.pop("description")
        presets[name] = _preset(name, fields, "presets.yaml")
    return MappingProxyType(presets), MappingProxyType(descriptions)


BUILTIN_PRESETS, _DESCRIPTIONS = _load_builtin()
"""Latch's prespecified task resources, by name, in Latch's order."""


def load_user_presets(start: Path | None = None) -> dict[str, Resources]:
    """Read ``[tool.taskcell.presets]`` from the nearest ``pyproject.toml``.

    Parameters
    ----------
    start : Path, optional
        Where to start looking, walking up to the filesystem root; the current directory
        by default. Only the nearest ``pyproject.toml`` is read, with or without presets.

    Returns
    -------
    dict of str to Resources
        The user's presets, in file order; empty when there is no file or no table.

    Raises
    ------
    SpecError
        For a file that is not valid TOML, or an entry that is not a valid request; the
        message names the preset and the file.

    Examples
    --------
    >>> load_user_presets(Path("/nonexistent"))
    {}
    """
    folder = Path.cwd() if start is None else Path(start).resolve()
    for candidate in (folder / "pyproject.toml", *(p / "pyproject.toml" for p in folder.parents)):
        if candidate.is_file():
            break
    else:
        return {}
    try:
        data = tomllib.loads(candidate.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise SpecError(f"{candidate} is not valid TOML: {error}") from None
    except OSError as error:
        raise SpecError(f"cannot read {candidate}: {error.strerror or error}") from None
    table: dict[str, Any] = data
    path: list[str] = []
    for key in ("tool", "taskcell", "presets"):
        path.append(key)
        value = table.get(key, {})
        if not isinstance(value, dict):
            field = ".".join(path)
            raise SpecError(
                f"{field} in {candidate} must be a table ([{field}]), got {shown(value)}; "
                f"presets go in [tool.taskcell.presets]"
            )
        table = value
    origin = f"{candidate} [tool.taskcell.presets]"
    return {name: _preset(name, entry, origin) for name, entry in table.items()}


def catalogue(
    extra: Mapping[str, Mapping[str, Any] | Resources] | None = None,
    origin: str = "configuration",
) -> dict[str, Resources]:
    """Return every preset: built-in, then ``pyproject.toml``, then ``extra``.

    Parameters
    ----------
    extra : mapping, optional
        More presets, each a :class:`Resources` or a mapping of its fields (as Dask's
        ``taskcell.presets`` config holds them). Later sources replace earlier ones by name.
    origin : str, optional
        Where ``extra`` was written, for error messages (``"taskcell.presets in ~/.config/
        dask/taskcell.yaml"``).

    Returns
    -------
    dict of str to Resources

    Raises
    ------
    SpecError
        For a malformed preset in any source, named with its origin.
    """
    if extra is not None and not isinstance(extra, Mapping):
        raise SpecError(
            f"{origin} must be a mapping of preset names to resource fields such as "
            f'{{gpu_box: {{cpu: 8, memory: "32Gi"}}}}, got {shown(extra)}'
        )
    merged = dict(BUILTIN_PRESETS)
    merged.update(load_user_presets())
    for name, entry in (extra or {}).items():
        merged[name] = _preset(name, entry, origin)
    return merged


# get_preset() and presets_frame() take a parameter named ``catalogue``, as the API promises.
_all = catalogue


def get_preset(name: str, catalogue: Mapping[str, Resources] | None = None) -> Resources:
    """Look a preset up by name.

    Parameters
    ----------
    name : str
        ``"small_task"``, ``"v100_x4_task"``, a user preset's name.
    catalogue : mapping, optional
        Where to look; :func:`catalogue` ``()`` by default.

    Returns
    -------
    Resources

    Raises
    ------
    SpecError
        For an unknown name, suggesting the nearest one.

    Examples
    --------
    >>> get_preset("small_task")
    Resources(cpu=2, memory='4Gi')
    """
    presets = _all() if catalogue is None else _mapping(catalogue)
    if not isinstance(name, str) or name not in presets:
        hint = did_you_mean(name, presets, cutoff=0.5) if isinstance(name, str) else ""
        raise SpecError(
            f"preset= {shown(name)} is not a known preset{hint} (known: {', '.join(presets)})"
        )
    return presets[name]


def _mapping(catalogue: object) -> Mapping[str, Resources]:
    """``catalogue`` checked to be a mapping of names to requests, as :func:`catalogue` gives."""
    if not isinstance(catalogue, Mapping) or not all(
        isinstance(k, str) and isinstance(v, Resources) for k, v in catalogue.items()
    ):
        raise SpecError(
            f"catalogue= must map preset names to Resources, as catalogue() does, "
            f"got {shown(catalogue)}"
        )
    return catalogue


def _count(resources: Resources) -> int | None:
    return resources.gpu.quantity if isinstance(resources.gpu, GPU | Device) else None


def presets_frame(catalogue: Mapping[str, Resources] | None = None) -> pandas.DataFrame:
    """Tabulate presets, one row each.

    Parameters
    ----------
    catalogue : mapping, optional
        The presets to show; :func:`catalogue` ``()`` by default.

    Returns
    -------
    pandas.DataFrame
        Columns ``preset, cpu, memory, gpu, disk, shm, source, description`` as canonical
        text (a range as ``REQUEST,LIMIT``; unset fields empty; ``source`` is ``"latch"`` for
        an unchanged built-in and ``"user"`` otherwise), then numbers taken from the request
        side: ``cpu_cores`` (float), ``memory_bytes``, ``disk_bytes``, ``gpu_count``
        (nullable ints; a TPU slice has no count).
    """
    import pandas

    presets = _all() if catalogue is None else _mapping(catalogue)
    rows = []
    for name, resources in presets.items():
        text = resources.to_dict()
        builtin = BUILTIN_PRESETS.get(name) == resources
        row: dict[str, Any] = {"preset": name}
        for field in REQUEST_FIELDS:
            value = text.get(field, "")
            row[field] = ",".join(value) if isinstance(value, list) else value
        row["source"] = "latch" if builtin else "user"
        row["description"] = _DESCRIPTIONS[name] if builtin else ""
        row["cpu_cores"] = float(resources.cpu.request) if resources.cpu else None
        row["memory_bytes"] = resources.memory.request if resources.memory else None
        row["disk_bytes"] = resources.disk.request if resources.disk else None
        row["gpu_count"] = _count(resources)
        rows.append(row)
    frame = pandas.DataFrame(rows, columns=[*_TEXT_COLUMNS, *_NUMBER_COLUMNS])
    return frame.astype({"memory_bytes": "Int64", "disk_bytes": "Int64", "gpu_count": "Int64"})
