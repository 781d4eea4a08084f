"""Asking the notebook frontend to insert a cell, through a comm the lab extension answers.

A widget's button runs in the kernel, and the kernel cannot edit the notebook:
``set_next_input`` only rides on the reply to an executed cell, and a click is not one. So the
panel opens a comm to target ``"taskcell"``; taskcell's JupyterLab extension registers that
target on every notebook's kernel and, on ``{"action": "insert-cell-below", "source": ...}``,
inserts a code cell below the active cell (the one whose output holds the panel) with that
source, and answers ``{"ok": true}``. A frontend without the extension closes the comm at once;
the panel then shows the line to copy instead.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from comm.base_comm import BaseComm

logger = logging.getLogger(__name__)

TARGET = "taskcell"
PROTOCOL = 1


class Frontend:
    """The notebook frontend as the kernel can reach it."""

    def __init__(self) -> None:
        self.closed = False
        self.acknowledged = 0
        self.sent: list[dict[str, Any]] = []
        self._comm: BaseComm | None = None
        try:
            from comm import create_comm

            comm = create_comm(target_name=TARGET, data={"protocol": PROTOCOL})
        except Exception as e:  # outside a kernel: nothing to talk to
            logger.debug("taskcell: no frontend comm: %r", e)
            self.closed = True
            return
        comm.on_close(self._on_close)
        comm.on_msg(self._on_msg)
        self._comm = comm

    def _on_close(self, msg: Any) -> None:
        self.closed = True

    def _on_msg(self, msg: Any) -> None:
        data = msg.get("content", {}).get("data", {}) if isinstance(msg, dict) else {}
        if data.get("ok"):
            self.acknowledged += 1

    def insert_cell_below(self, source: str) -> bool:
        """Ask for a new code cell below the active one; False when no frontend will do it."""
        if self.closed or self._comm is None:
            return False
        message = {"action": "insert-cell-below", "source": source}
        self._comm.send(message)
        self.sent.append(message)
        return True

    def close(self) -> None:
        if self._comm is not None and not self.closed:
            self.closed = True
            try:
                self._comm.close()
            except Exception as e:
                logger.debug("taskcell: closing the frontend comm failed: %r", e)
