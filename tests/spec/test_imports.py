"""The resource language is pure Python: importing it pulls in neither Dask nor IPython."""

from __future__ import annotations

import doctest
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import taskcell.spec

FORBIDDEN = ("dask", "distributed", "IPython", "pandas")


def test_import_pulls_in_no_dask_ipython_or_pandas() -> None:
    check = (
        "import sys, taskcell.spec; "
        f"loaded = [m for m in {FORBIDDEN!r} if m in sys.modules]; "
        "assert not loaded, loaded"
    )
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_public_api() -> None:
    expected = {
        "parse_quantity", "format_quantity", "parse_cpu", "format_cpu",
        "GPU", "TPU", "Device", "KNOWN_GPUS", "MIG_PROFILES", "parse_gpu", "format_gpu",
        "Range", "Resources", "BUILTIN_PRESETS", "load_user_presets", "catalogue",
        "get_preset", "presets_frame", "PlatformLimits", "LATCH", "PROFILES", "check_limits",
        "ResourceTemplate", "Expression", "latch_custom", "Environment",
    }  # fmt: skip
    assert expected <= set(taskcell.spec.__all__)
    for name in taskcell.spec.__all__:
        assert hasattr(taskcell.spec, name), name


@pytest.mark.parametrize(
    "module",
    [
        "amounts",
        "cpu",
        "devices",
        "dynamic",
        "environment",
        "limits",
        "presets",
        "quantity",
        "resources",
    ],
)
def test_docstring_examples_hold(
    module: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # presets' examples must not see a pyproject.toml of ours
    failed, _ = doctest.testmod(importlib.import_module(f"taskcell.spec.{module}"))
    assert failed == 0
