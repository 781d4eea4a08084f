"""Stopping a cell: from its kernel (an interrupt, ``handle.cancel()``, ``%task_cancel``) or from
anywhere else that has a client of its cluster (the sidebar's cancel button).

A running cell is interrupted on its worker (SIGINT, then SIGTERM and SIGKILL, see
:meth:`~taskcell.runner.processes.CellProcesses.interrupt`) and its task ends when its process
does, so the scheduler counts the worker busy exactly as long as it is. A cell that has not
started is cancelled, and never starts: every worker remembers the key.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from taskcell import config
from taskcell.runner.remote import interrupt_cell

if TYPE_CHECKING:
    from distributed import Client, Future

#: Futures of stopped cells still running, kept until they end: the scheduler forgets a task
#: nobody wants, and would call its worker free while the cell's process still runs.
_stopping: set[Future] = set()


def interrupt_grace() -> float:
    """Seconds between SIGINT, SIGTERM and SIGKILL (``taskcell.interrupt-grace``)."""
    return config.seconds("interrupt-grace")


def stop_cell(client: Client, key: str, future: Future) -> bool:
    """Stop the cell ``key`` whose task is ``future``, waiting at most a second: False if the
    cluster did not answer by then (the stop goes on in the background)."""
    grace = interrupt_grace()

    def stop() -> None:
        try:
            running = client.run(interrupt_cell, key, grace, on_error="ignore")
        except (OSError, TimeoutError):  # unreachable: the cancel waits, behind the submission
            running = {}
        if any(running.values()):
            _stopping.add(future)
            future.add_done_callback(_stopping.discard)
        else:
            future.cancel()

    stopper = threading.Thread(target=stop, name=f"taskcell-stop-{key}", daemon=True)
    stopper.start()
    stopper.join(timeout=1)
    return not stopper.is_alive()


async def cancel_task(client: Client, key: str) -> bool:
    """Stop the cell ``key`` through an asynchronous client that does not own it (another
    process's, like the Jupyter server's); True if it was running."""
    from distributed import Future

    running = await client.run(interrupt_cell, key, interrupt_grace(), on_error="ignore")
    if any(running.values()):
        return True
    await client.cancel([Future(key, client)], force=True)
    return False
