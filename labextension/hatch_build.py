"""Build the JupyterLab extension into ``taskcell/labextension`` during ``pip install``.

hatch-jupyter-builder calls :func:`build` (see ``[tool.hatch.build.hooks.jupyter-builder]`` in
``pyproject.toml``) for wheels, editable installs and sdists. It does nothing when the built
extension matches the sources (a hash of them is stored beside the output), so a reinstall
costs no Node time; otherwise it installs the npm dependencies (the versions ``package-lock.json``
pins), compiles the TypeScript and bundles it with ``@jupyter/builder``.

Set ``HATCH_JUPYTER_BUILDER_SKIP_NPM=1`` to skip it (the wheel then carries whatever was built).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUTPUT = HERE.parent / "taskcell" / "labextension"
STAMP = OUTPUT / "build-inputs.sha256"
INPUTS = ("package.json", "package-lock.json", "tsconfig.json", ".npmrc", "src", "style")
# tsconfig.test.json and test/ only matter to `npm test`, not to what is built.

log = logging.getLogger("taskcell.labextension")


def inputs_digest() -> str:
    """A hash of every file the built extension depends on."""
    digest = hashlib.sha256()
    for name in INPUTS:
        path = HERE / name
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            if file.exists():
                digest.update(str(file.relative_to(HERE)).encode() + b"\0")
                digest.update(file.read_bytes() + b"\0")
    return digest.hexdigest()


def up_to_date() -> bool:
    """Whether ``taskcell/labextension`` was built from the sources as they are now."""
    built = (OUTPUT / "package.json").exists() and (OUTPUT / "static" / "style.js").exists()
    return built and STAMP.exists() and STAMP.read_text().strip() == inputs_digest()


def _npm() -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError(
            "taskcell: building the JupyterLab extension needs Node.js 20 or newer and npm on "
            "PATH; install them, or install taskcell from a wheel, which carries it prebuilt, "
            "or set HATCH_JUPYTER_BUILDER_SKIP_NPM=1 to install without the sidebar"
        )
    return npm


def _run(*cmd: str) -> None:
    log.info("taskcell: %s", " ".join(cmd))
    subprocess.run(cmd, cwd=HERE, check=True)


def _install_node_modules(npm: str) -> None:
    # `npm install`, not `npm ci`, even on a fresh clone: it installs the versions the lock file
    # pins all the same, and it tolerates what `npm ci` refuses, a lock file that lacks an
    # optional platform package (an rspack binary for another OS) the registry did not offer.
    marker = HERE / "node_modules" / ".package-lock.json"
    inputs = (HERE / "package-lock.json", HERE / "package.json")
    if not marker.exists() or any(
        p.exists() and p.stat().st_mtime > marker.stat().st_mtime for p in inputs
    ):
        _run(npm, "install")


def build(target_name: str, version: str, force: bool = False) -> None:
    """The hatch-jupyter-builder build function.

    Parameters
    ----------
    target_name : str
        ``"wheel"`` or ``"sdist"``.
    version : str
        ``"standard"`` or ``"editable"``.
    force : bool
        Build even when the output matches the sources.
    """
    if os.environ.get("HATCH_JUPYTER_BUILDER_SKIP_NPM") == "1":
        log.info("taskcell: HATCH_JUPYTER_BUILDER_SKIP_NPM=1, not building the lab extension")
        return
    if not force and up_to_date():
        log.info("taskcell: the lab extension is up to date")
        return
    npm = _npm()
    _install_node_modules(npm)
    _run(npm, "run", "build:lib")
    # In-process, so the jupyter_builder of the build environment is used whatever PATH says.
    from jupyter_builder.federated_extensions import build_labextension

    build_labextension(str(HERE), logger=log)
    STAMP.write_text(inputs_digest() + "\n")
