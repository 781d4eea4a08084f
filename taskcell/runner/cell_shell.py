"""IPython inside a cell process: ``%time``, ``!cmd``, ``%%capture`` and ``display`` as at home.

A ``("display", event)`` message carries ``data`` and ``metadata`` (a MIME bundle), and where
they apply ``transient`` (its ``display_id``), ``update`` (it replaces that display) and
``after_cell`` (a figure shown once the cell ended: the notebook shows it after ``Out[]``).

A cell process holds one IPython ``InteractiveShell`` (made on its first cell, without history),
whose namespace is each cell's own. The magics a task cell may use (``taskcell.runner.cell_magics``)
run through it exactly as in the notebook's kernel; what it displays, ``display()`` and
``display_id`` updates included, goes to the notebook through the cell's outbox, and so do
``tqdm.notebook``'s and ``tqdm.auto``'s bars (:mod:`taskcell.runner.progress`).

Nobody can type into a cell on a worker: ``input()`` and ``getpass.getpass()`` raise
IPython's ``StdinNotImplementedError`` at once, as a kernel does where its front end cannot
answer, and stdin is at its end for the cell and the processes it starts.
"""

from __future__ import annotations

import builtins
import functools
import getpass
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from taskcell.runner import progress

Send = Callable[[tuple], None]


@functools.cache
def _publisher_class() -> type:
    from IPython.core.displaypub import DisplayPublisher

    class CellPublisher(DisplayPublisher):
        """Sends what the cell displays to the notebook, as the kernel's publisher would;
        once ``after_cell`` is set, marked to be shown after the cell's ``Out[]``."""

        after_cell = False

        def __init__(self, send: Send) -> None:
            super().__init__()
            self._send = send

        def publish(
            self,
            data: dict,
            metadata: dict | None = None,
            source: Any = None,
            *,
            transient: dict | None = None,
            update: bool = False,
            **kwargs: Any,
        ) -> None:
            event: dict[str, Any] = {"data": data, "metadata": metadata or {}}
            if transient:
                event["transient"] = transient
            if update:
                event["update"] = True
            if self.after_cell:
                event["after_cell"] = True
            self._send(("display", event))

        def clear_output(self, wait: bool = False) -> None:
            self._send(("clear", wait))

    return CellPublisher


_shell: Any = None
_making = threading.Lock()


def warm_shell() -> None:
    """Make the shell now, before a cell needs it (a process's start calls it in a thread)."""
    _the_shell()


def _the_shell() -> Any:
    global _shell
    with _making:
        if _shell is None:
            from IPython.core.interactiveshell import InteractiveShell
            from traitlets.config import Config

            config = Config()
            config.HistoryManager.enabled = False
            _shell = InteractiveShell.instance(config=config)
            progress.install()  # tqdm.notebook's and tqdm.auto's bars as displays
    return _shell


@contextmanager
def cell_shell(namespace: dict[str, Any], send: Send, count: int = 0) -> Iterator[Any]:
    """The shell, running in ``namespace`` and displaying through ``send``, while a cell runs:
    ``get_ipython()`` and IPython's ``display`` work in the cell and in what it calls, and its
    prompt count is the cell's own (``count``), as ``%%capture``'s ``Out[N]`` shows it."""
    shell = _the_shell()
    shell.user_module, shell.user_ns = shell.prepare_user_module(user_ns=namespace)
    shell.ns_table.update(user_global=namespace, user_local=namespace)
    # The history a kernel keeps in its namespace, this cell's own: IPython writes to it.
    for name, empty in (("_oh", {}), ("_ih", [""]), ("_dh", [os.getcwd()])):
        namespace.setdefault(name, empty)
    shell.execution_count = count
    shell.display_pub = _publisher_class()(send)
    with shell.builtin_trap, shell.display_trap, _nobody_types():  # as a kernel runs a cell
        yield shell


@contextmanager
def _nobody_types() -> Iterator[None]:
    """While a cell runs, ``input()`` and ``getpass()`` refuse at once and ``sys.stdin`` reads
    as empty: a read that waited for a user would wait until the cell is interrupted."""
    _stdin_at_its_end()
    saved = builtins.input, getpass.getpass, sys.stdin
    with open(0, encoding="utf-8", closefd=False) as stdin:
        builtins.input, getpass.getpass, sys.stdin = _input, _getpass, stdin
        try:
            yield
        finally:
            builtins.input, getpass.getpass, sys.stdin = saved


@functools.cache
def _stdin_at_its_end() -> None:
    """Point this process's stdin at ``/dev/null``, once: it came from the worker, where it may
    be a pipe nobody writes to (the embedded cluster's one worker has the kernel's), and the
    cell's own processes (``!cat``, ``subprocess.run``) inherit it."""
    empty = os.open(os.devnull, os.O_RDONLY)
    if empty != 0:  # 0 already, where the process started without a stdin
        os.dup2(empty, 0)
        os.close(empty)


def _input(prompt: object = "") -> str:
    """``input()`` in a task cell: refused, saying why."""
    raise _no_typing("input()")


def _getpass(prompt: str = "Password: ", stream: Any = None) -> str:
    """``getpass.getpass()`` in a task cell: refused, saying why."""
    raise _no_typing("getpass()")


def _no_typing(what: str) -> Exception:
    """The error for ``what`` asking the user to type: IPython's own, as a kernel raises where
    its front end cannot answer."""
    from IPython.core.error import StdinNotImplementedError

    return StdinNotImplementedError(
        f"{what} is not available in a %%task cell: the cell runs on a worker, where nobody "
        "can type; read the value in a plain cell and use it here."
    )
