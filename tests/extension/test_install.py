"""The two halves of the extension as ``pip install`` leaves them: one version, the server
extension enabled, the prebuilt lab extension where JupyterLab looks for it; and the
TypeScript unit tests, eslint and prettier (the JupyterLab extension template's), run with the
rest of the suite."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import taskcell

REPO = Path(__file__).resolve().parents[2]
LABEXTENSION = REPO / "labextension"


def test_package_json_is_the_one_version_and_python_agrees():
    package = json.loads((LABEXTENSION / "package.json").read_text())
    assert package["version"] == taskcell.__version__


def test_the_server_config_enables_the_extension_module():
    config = json.loads((REPO / "jupyter-config" / "server-config" / "taskcell.json").read_text())
    assert config == {"ServerApp": {"jpserver_extensions": {"taskcell.extension": True}}}
    from taskcell.extension import _jupyter_server_extension_points

    (point,) = _jupyter_server_extension_points()
    assert point["module"] == "taskcell.extension"


def jupyter(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "jupyter", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout + done.stderr


def test_jupyter_lists_the_lab_extension_enabled_at_the_package_version():
    installed = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "taskcell"
    assert (installed / "package.json").exists(), (
        f"no prebuilt lab extension in {installed}: reinstall with `pip install -e .`"
    )
    built = json.loads((installed / "package.json").read_text())
    assert built["version"] == taskcell.__version__
    listing = jupyter("labextension", "list")
    line = next((ln for ln in listing.splitlines() if "taskcell v" in ln), "")
    assert f"taskcell v{taskcell.__version__}" in line, listing
    assert "enabled" in line and "OK" in line, listing


def test_jupyter_lists_the_server_extension_enabled():
    listing = re.sub(r"\x1b\[[0-9;]*m", "", jupyter("server", "extension", "list"))
    assert re.search(r"taskcell\.extension\s+enabled", listing), listing
    assert re.search(r"taskcell\.extension\s+OK", listing), listing


def npm_run(script: str, tool: str) -> subprocess.CompletedProcess:
    """``npm run <script>`` in the lab extension, skipped without Node or its packages."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("the lab extension's checks need Node.js and npm")
    if not (LABEXTENSION / "node_modules" / ".bin" / tool).exists():
        pytest.skip("labextension/node_modules is missing: `pip install -e .` installs it")
    return subprocess.run(
        [npm, "run", "--silent", script],
        cwd=LABEXTENSION,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_typescript_unit_tests_pass():
    done = npm_run("test", "vitest")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_eslint_and_prettier_pass_as_the_extension_template_sets_them():
    done = npm_run("lint:check", "eslint")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "warning" not in output, output
