"""ruff and mypy, as configured in pyproject.toml, find nothing to say about the code."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run(tool: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", tool, *args], cwd=ROOT, capture_output=True, text=True
    )


def test_ruff_check_is_clean():
    out = run("ruff", "check", ".")
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_format_is_clean():
    out = run("ruff", "format", "--check", ".")
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_is_clean():
    # [tool.mypy] names the files (the package) and the Python version (the oldest supported).
    out = run("mypy")
    assert out.returncode == 0, out.stdout + out.stderr
