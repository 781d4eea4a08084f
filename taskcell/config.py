"""taskcell's options, kept in Dask's config under ``taskcell.*``.

Defaults ship in ``taskcell.yaml``; Dask's YAML files and ``DASK_TASKCELL__...`` environment
variables override them, as for any Dask option.
"""

from __future__ import annotations

import pathlib
from collections.abc import Mapping
from typing import Any

import dask.config
import yaml

from taskcell.spec import Resources, catalogue

_DEFAULTS = pathlib.Path(__file__).with_name("taskcell.yaml")

with _DEFAULTS.open() as f:
    dask.config.update_defaults(yaml.safe_load(f))


def get(key: str, default: Any = None) -> Any:
    """Read ``taskcell.<key>`` from Dask's config."""
    return dask.config.get(f"taskcell.{key}", default)


def presets() -> dict[str, Resources]:
    """Every preset a user can name: Latch's, then pyproject's, then Dask config's."""
    configured: Mapping[str, Any] = get("presets") or {}
    return catalogue(configured)
