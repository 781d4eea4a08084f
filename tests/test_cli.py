"""The ``taskcell`` command as a user types it."""

from __future__ import annotations

import subprocess
import sys


def taskcell(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "taskcell.cli", *args], capture_output=True, text=True, timeout=60
    )


def test_presets_prints_the_catalogue():
    out = taskcell("presets")
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()[1:]}
    assert rows["small_task"][1:3] == ["2", "4Gi"]
    assert rows["g6e_24xlarge_task"][1:4] == ["96", "768Gi", "L40s:4"]


def test_worker_dry_run_shows_the_dask_worker_it_would_start():
    out = taskcell("worker", "tcp://127.0.0.1:8786", "--dry-run")
    assert out.returncode == 0, out.stderr
    assert "distributed.cli.dask_worker tcp://127.0.0.1:8786" in out.stdout
    assert "CPU=" in out.stdout and "MEMORY=" in out.stdout


def test_unknown_command_is_a_usage_error():
    out = taskcell("frobnicate")
    assert out.returncode == 2
    assert "invalid choice: 'frobnicate'" in out.stderr
