"""The IPython extension: ``%load_ext taskcell`` registers ``%%task`` and its companions.

With no cluster configured, the embedded cluster starts in the background once the cell that
loaded the extension has run (unless that cell chose a cluster: ``%task_cluster``, a
``Client``), and the modules a ``%%task`` cell needs are imported meanwhile, so the first cell
finds everything up. A cluster started so that no cell used is stopped when the user picks
another (``taskcell.embedded-cluster.start-early: false`` turns this off).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import warnings
from typing import Any

from taskcell.cluster import interruptible


def load_ipython_extension(shell: Any) -> None:
    """Register the magics with ``shell`` (called by ``%load_ext taskcell``).

    The cluster layer's hooks (:func:`_register_hooks`) are registered by the early start's
    thread, before it connects to anything: they import Dask, which the loading cell must not.
    """
    from taskcell.kernel_magics.magics import TaskMagics

    magics = TaskMagics(shell)
    shell.register_magics(magics)
    shell.events.register("pre_run_cell", _before_cell)
    shell.events.register("post_run_cell", _after_cell)
    _EarlyStart(shell, magics).watch()


def _before_cell(info: Any = None) -> None:
    """Before a cell that is not a task cell, end the event subscriptions no running cell
    needs: its code may close the client (see :mod:`taskcell.runner.events`)."""
    events = sys.modules.get("taskcell.runner.events")  # not imported: nothing to end
    if events is not None and not (getattr(info, "raw_cell", "") or "").startswith("%%task"):
        events.settle()


def _after_cell(result: Any = None) -> None:
    """After any cell, let go of what taskcell keeps of the notebook's values it deleted or
    rebound (:func:`taskcell.runner.cell_task.forget_rebound`)."""
    from IPython import get_ipython

    cell_task = sys.modules.get("taskcell.runner.cell_task")  # not imported: nothing kept
    shell = get_ipython()
    if cell_task is not None and shell is not None:
        cell_task.forget_rebound(shell.user_ns)


def _prestarted() -> Any:
    """The embedded cluster's process, started before this process imports Dask (which takes
    as long as the cluster's own start) where no cluster can have been chosen yet: Dask is not
    imported, and ``DASK_SCHEDULER_ADDRESS`` is not set. Its process reads its own config, and
    does not start a cluster where that names one."""
    if "dask" in sys.modules or os.environ.get("DASK_SCHEDULER_ADDRESS"):
        return None
    from taskcell.cluster.embedded import EmbeddedCluster

    return EmbeddedCluster()


def _show(text: str) -> None:
    """A line under the running cell: ``taskcell: waiting for ...``."""
    from IPython.display import display

    display({"text/plain": f"taskcell: {text}"}, raw=True)


def _register_hooks() -> None:
    """What the cluster layer tells the extension: a wait for the embedded cluster, shown
    under the cell, and each scheduler connected to, on which the pools are announced (so
    the panel and the sidebar list them). Idempotent."""
    from taskcell.cluster import connect, provision

    connect.on_wait = _show
    connect.on_connected(provision.announce)


class _EarlyStart:
    """Starts the embedded cluster after the loading cell, and drops it if it goes unused.

    Its thread imports what a ``%%task`` cell needs while the cluster's process starts. The
    next cell waits for those imports: two threads importing one package at once can deadlock
    on the package's circular imports (Python's ``_DeadlockError``).
    """

    def __init__(self, shell: Any, magics: Any) -> None:
        self.shell = shell
        self.magics = magics
        self.thread: threading.Thread | None = None
        self.imported = threading.Event()

    def watch(self) -> None:
        self.shell.events.register("post_run_cell", self.after_cell)

    def after_cell(self, result: Any = None) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self.start, name="taskcell-early", daemon=True)
            self.thread.start()
            self.shell.events.register("pre_run_cell", self.before_cell)
            return
        if not self.imported.is_set():  # the wait was interrupted: never import beside it
            return
        from taskcell.cluster import connect

        connect.drop_unused()
        if not self.thread.is_alive() and connect.settled():
            self.shell.events.unregister("post_run_cell", self.after_cell)

    def before_cell(self, info: Any = None) -> None:
        # IPython runs the cell after an interrupt here regardless: a %%task cell then ends
        # first thing (TaskMagics.interrupted_before_start), another runs as it would have.
        try:
            interruptible.wait(self.imported)
            interrupted = False
        except KeyboardInterrupt:
            interrupted = True
        self.magics.interrupted_before_start = interrupted
        if self.imported.is_set() and not interrupted:
            self.shell.events.unregister("pre_run_cell", self.before_cell)

    def start(self) -> None:
        # Any failure here is the first %%task's to report: it starts the cluster itself.
        with contextlib.suppress(Exception):
            embedded = self._start()
            client = embedded.started() if embedded is not None else None
            if client is not None:  # a cell process up on each worker before the first cell
                from taskcell.runner.remote import prestart_cell_process

                client.run(prestart_cell_process)
            if embedded is not None:  # a cluster chosen while it started: no cell may follow
                from taskcell.cluster import connect

                connect.drop_unused()

    def _start(self) -> Any:
        try:
            try:
                cluster = _prestarted()
            finally:  # the pools announced and waits shown, whatever the early start does
                _register_hooks()
            from taskcell import config
            from taskcell.cluster import connect
            from taskcell.errors import SpecError

            refused: SpecError | None = None
            try:
                early = config.flag("embedded-cluster.start-early")
            except SpecError as e:  # the first %%task starts the cluster, as when it is off
                early, refused = False, e
            embedded = connect.start_early(cluster) if early else None
            if embedded is not None:  # start_early closes a cluster it declines
                # What a %%task cell imports, while the cluster's process starts.
                import distributed  # noqa: F401

                import taskcell.runner.cell_task
                import taskcell.runner.execution  # noqa: F401
            elif not early and cluster is not None:
                cluster.close()
            if refused is not None:
                warnings.warn(
                    f"taskcell: {refused}; the cluster starts at the first %%task", stacklevel=2
                )
            return embedded
        finally:
            self.imported.set()
