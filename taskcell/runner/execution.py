"""Running a cell as a task: in the foreground, or with ``--bg`` while the notebook goes on."""

from __future__ import annotations

import threading
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any

from taskcell.runner.cell_task import (
    CellSource,
    Display,
    Submission,
    submit_cell,
    wait_for_cell,
    write_back,
)
from taskcell.runner.history import TaskRecord
from taskcell.spec import Resources

if TYPE_CHECKING:
    from distributed import Client


class BackgroundCell:
    """The handle of a background cell: its state, its output so far, and why it failed."""

    def __init__(self, sub: Submission) -> None:
        self.key = sub.job.key
        self.record = sub.record
        self.output: list[str] = []
        self.displays: list[dict] = []
        self.status = "submitted"
        self.error: BaseException | None = None
        self.value: Any = None
        self._done = threading.Event()

    @classmethod
    def start(
        cls, client: Client, sub: Submission, namespace: MutableMapping[str, Any]
    ) -> BackgroundCell:
        """Follow ``sub`` in a thread and bind its outputs in ``namespace`` if it succeeds."""
        handle = cls(sub)
        out = Display(
            stream=lambda name, text: handle.output.append(text),
            display=lambda data, metadata: handle.displays.append(data),
            status=handle._set_status,
        )

        def follow() -> None:
            try:
                result = wait_for_cell(client, sub, out)
                write_back(namespace, sub, result)
                handle.value = result.value
            except BaseException as e:
                handle.error = e
            finally:
                handle._done.set()

        threading.Thread(target=follow, name=f"taskcell-{handle.key}", daemon=True).start()
        return handle

    def _set_status(self, text: str) -> None:
        self.status = text

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> Any:
        """Block until the cell ends; its last value, or its error raised here."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"task {self.key} still {self.record.state} after {timeout} s")
        if self.error is not None:
            raise self.error
        return self.value

    def __repr__(self) -> str:
        why = f": {self.error}" if self.error is not None else ""
        return f"<taskcell background cell {self.record.cell!r}: {self.record.state}{why}>"


def run_cell_task(
    client: Client,
    cell: CellSource,
    namespace: MutableMapping[str, Any],
    request: Resources,
    *,
    name: str,
    history: list[TaskRecord],
    out: Display | None,
    retries: int = 0,
) -> Any:
    """Run ``cell`` as a task: wait and return its last value, or, with no ``out``, return a
    :class:`BackgroundCell` at once."""
    sub = submit_cell(client, cell, namespace, request, name, retries)
    history.append(sub.record)
    if out is None:
        return BackgroundCell.start(client, sub, namespace)
    result = wait_for_cell(client, sub, out)
    write_back(namespace, sub, result)
    return result.value
