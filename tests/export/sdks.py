"""Where the Flyte and Latch SDKs live for the tests: a venv of its own for each.

The two SDKs conflict with each other, so ``make test`` creates ``.venv-flyte`` (flyte 2.12.1) and
``.venv-latch`` (latch 2.77.2), each with the corpus notebooks' packages, and names them in
``TASKCELL_FLYTE_PYTHON`` and ``TASKCELL_LATCH_PYTHON``. Without a venv the tests that need it
skip, saying how to make it; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def sdk_python(kind: str) -> Path:
    """The interpreter of the SDK's venv; skip (fail under CI=true) when there is none."""
    variable = f"TASKCELL_{kind.upper()}_PYTHON"
    # absolute, not resolved: the venv's python is a link out of the venv
    python = Path(os.path.abspath(os.environ.get(variable) or ROOT / f".venv-{kind}/bin/python"))
    if python.exists():
        return python
    message = f"no {kind} SDK venv at {python}: `make test` creates it (or set {variable})"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)
