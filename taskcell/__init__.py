"""taskcell: run notebook cells and Python functions as resource-annotated Dask tasks.

``%load_ext taskcell`` registers ``%%task``; the Python API is re-exported here and imported
on first use, so loading the extension stays fast. ``__version__`` is the installed
distribution's, whose one source is ``labextension/package.json`` (see ``pyproject.toml``).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Resources": "taskcell.spec",
    "GPU": "taskcell.spec",
    "TPU": "taskcell.spec",
    "Device": "taskcell.spec",
    "TaskEnvironment": "taskcell.tasks",
    "Task": "taskcell.tasks",
    "task": "taskcell.tasks",
    "custom_task": "taskcell.tasks",
    "preset_task": "taskcell.tasks",
    "small_task": "taskcell.tasks",
    "medium_task": "taskcell.tasks",
    "large_task": "taskcell.tasks",
    "small_gpu_task": "taskcell.tasks",
    "large_gpu_task": "taskcell.tasks",
    "v100_x1_task": "taskcell.tasks",
    "v100_x4_task": "taskcell.tasks",
    "v100_x8_task": "taskcell.tasks",
    "g6e_xlarge_task": "taskcell.tasks",
    "g6e_2xlarge_task": "taskcell.tasks",
    "g6e_4xlarge_task": "taskcell.tasks",
    "g6e_8xlarge_task": "taskcell.tasks",
    "g6e_12xlarge_task": "taskcell.tasks",
    "g6e_16xlarge_task": "taskcell.tasks",
    "g6e_24xlarge_task": "taskcell.tasks",
    "panel": "taskcell.widgets",
    "occupancy": "taskcell.planner",
    "occupancy_history": "taskcell.planner",
    "suggest": "taskcell.planner",
    "tasks_frame": "taskcell.kernel_magics.task_table",
}

__all__ = ["__version__", "load_ipython_extension", "presets", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version  # on demand: it costs an import of its own

        return version("taskcell")
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'taskcell' has no attribute {name!r}")


def presets() -> Any:
    """Every preset you can name, as a pandas DataFrame (Latch's, then your own)."""
    from taskcell import config
    from taskcell.spec import presets_frame

    return presets_frame(config.presets())


def load_ipython_extension(shell: Any) -> None:
    """``%load_ext taskcell``: register ``%%task``, ``%task_env``, ``%task_cluster``, ``%tasks``."""
    from taskcell.kernel_magics import load_ipython_extension as load

    load(shell)
