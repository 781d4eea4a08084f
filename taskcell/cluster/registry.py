"""Where each kernel records the scheduler it uses, so the Jupyter server can find it.

The server never runs code in a kernel to learn its cluster (a kernel busy in a long cell would
block it); instead each kernel writes ``<jupyter runtime dir>/taskcell/kernel-<id>.json`` when it
connects, and the server maps kernel ids to notebooks through its sessions.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import tempfile

_KERNEL_ID = re.compile(r"kernel-(.+)\.json$")


def registry_dir() -> pathlib.Path:
    """The folder of the records: ``taskcell`` under Jupyter's runtime dir."""
    from jupyter_core.paths import jupyter_runtime_dir

    return pathlib.Path(jupyter_runtime_dir()) / "taskcell"


def this_kernel_id() -> str | None:
    """The id of the kernel this process is, from its connection file; None outside one."""
    try:
        from ipykernel.connect import get_connection_file

        match = _KERNEL_ID.search(os.path.basename(get_connection_file()))
    except Exception:  # not in a kernel: nothing to record
        return None
    return match.group(1) if match else None


def record(address: str) -> pathlib.Path | None:
    """Record that this kernel submits to the scheduler at ``address`` (atomically)."""
    kernel_id = this_kernel_id()
    if kernel_id is None:
        return None
    folder = registry_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"kernel-{kernel_id}.json"
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump({"kernel_id": kernel_id, "scheduler": address, "pid": os.getpid()}, f)
    os.replace(tmp, path)
    return path


def recorded() -> dict[str, str]:
    """Kernel id -> scheduler address, for every record in the registry."""
    out = {}
    for path in registry_dir().glob("kernel-*.json"):
        try:
            data = json.loads(path.read_text())
            out[str(data["kernel_id"])] = str(data["scheduler"])
        except (OSError, ValueError, KeyError):
            continue
    return out
