"""The IPython extension: ``%load_ext taskcell`` registers ``%%task`` and its companions."""

from __future__ import annotations

from typing import Any


def load_ipython_extension(shell: Any) -> None:
    """Register the magics with ``shell`` (called by ``%load_ext taskcell``)."""
    from taskcell.kernel_magics.magics import TaskMagics

    shell.register_magics(TaskMagics(shell))
