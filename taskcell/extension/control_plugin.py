"""The Jupyter server's eyes inside a scheduler: whether it is taskcell's embedded cluster, and
what a task printed, from the scheduler's event log.

:class:`ControlPlugin` is registered by the server's client of each cluster it watches
(:mod:`taskcell.extension.control`), by value, so a scheduler without taskcell installed loads
it; it uses the standard library and distributed alone. It adds two scheduler handlers:

- ``taskcell_control_info``: whether the scheduler serves :data:`SCALE` and :data:`STOP`, the
  handlers with which taskcell's embedded cluster scales and stops itself
  (:mod:`taskcell.cluster.embedded_control`, whose names these are; a test of the server
  against a kernel's embedded cluster holds them in step); the sidebar offers both only then;
- ``taskcell_task_output``: what a cell printed, displayed and raised, from the events its
  worker logged on its kernel's topic (the scheduler keeps the last
  ``distributed.admin.low-level-log-length`` of each topic, while the kernel is connected):
  ``stream`` texts, ``display`` data as text (an update in the place of the display it
  updates; ``clear`` clears), and a ``failed`` event's ``traceback``, else its one-line
  ``error``. The sidebar draws the text as a terminal would (``\\r``, ANSI colours).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from distributed.diagnostics.plugin import SchedulerPlugin

if TYPE_CHECKING:
    from distributed import Scheduler

PLUGIN_NAME = "taskcell-control"
#: Bumped when the handlers change, so a server replaces an older plugin.
VERSION = 4
#: The embedded cluster's handler ``(n) -> {"workers": n}`` (or ``{"error": why}``): start or
#: retire workers until it has ``n`` (new ones like the first, the least busy retired first).
SCALE = "taskcell_embedded_scale"
#: The embedded cluster's handler ``() -> {}``: end the cluster, and its process, after
#: answering; the kernel that started it starts a new one at its next ``%%task``.
STOP = "taskcell_embedded_stop"
#: Most characters of output a reply carries (the last ones).
OUTPUT_LIMIT = 1 << 20


class ControlPlugin(SchedulerPlugin):
    """Tell the Jupyter server what it may do to this cluster, and what a task printed."""

    name = PLUGIN_NAME
    idempotent = True

    def __init__(self) -> None:
        self.scheduler: Scheduler | None = None

    async def start(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        scheduler.handlers.update(
            {"taskcell_control_info": self.handle_info, "taskcell_task_output": self.handle_output}
        )

    def handle_info(self) -> dict:
        assert self.scheduler is not None
        handlers = self.scheduler.handlers
        return {"v": VERSION, "embedded": SCALE in handlers and STOP in handlers}

    # -- a task's output -------------------------------------------------------------------

    def handle_output(self, key: str) -> dict:
        """What the cell ``key`` printed and displayed (as text), what it raised, and where it
        ran. As the notebook shows them: an update of a ``display_id`` replaces what that
        display showed (a progress bar is its last state, once), and ``clear_output`` clears
        (with ``wait``, once the next output comes)."""
        assert self.scheduler is not None
        parts: list[str] = []
        shown: dict[str, list[int]] = {}  # display_id -> where its displays are in parts
        found, worker, error, clearing = False, None, None, False
        for log in self.scheduler.get_events().values():
            for _, msg in log:
                if not isinstance(msg, dict) or msg.get("key") != key:
                    continue
                kind = msg.get("kind")
                if kind in ("stream", "display") and clearing and not msg.get("update"):
                    parts, shown, clearing = [], {}, False
                if kind == "started":
                    found, worker = True, msg.get("worker")
                elif kind == "stream":
                    parts.append(str(msg.get("text", "")))
                elif kind == "display":
                    text = str((msg.get("data") or {}).get("text/plain", "")) + "\n"
                    display_id = str((msg.get("transient") or {}).get("display_id") or "")
                    if msg.get("update"):
                        for at in shown.get(display_id, []):
                            parts[at] = text
                    else:
                        if display_id:
                            shown.setdefault(display_id, []).append(len(parts))
                        parts.append(text)
                elif kind == "clear":
                    if msg.get("wait"):
                        clearing = True
                    else:
                        parts, shown, clearing = [], {}, False
                elif kind == "failed":  # the user's traceback where the worker sends it
                    error = msg.get("traceback") or msg.get("error")
        text = "".join(parts)
        return {
            "v": VERSION,
            "found": found or bool(parts) or error is not None,
            "worker": worker,
            "text": text[-OUTPUT_LIMIT:],
            "truncated": len(text) > OUTPUT_LIMIT,
            "raised": error,
        }
