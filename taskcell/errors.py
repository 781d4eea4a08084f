"""The exceptions taskcell raises; every one subclasses :class:`TaskcellError`."""

from __future__ import annotations

import builtins
import functools
from typing import TypedDict

#: The mime type of a failure shown after its cell returned (a background cell's): Jupyter
#: sends no error into a cell that has finished, so the lab extension turns each output that
#: carries one (an :class:`ErrorOutput`) into an error output of its cell, shown and saved as
#: Jupyter shows and saves an error.
ERROR_MIME = "application/vnd.taskcell.error+json"


class ErrorOutput(TypedDict):
    """An error as a notebook saves it (nbformat's ``error`` output, less its type)."""

    ename: str
    evalue: str
    traceback: list[str]


class TaskcellError(Exception):
    """Base of every error taskcell raises on purpose."""


class SpecError(TaskcellError, ValueError):
    """A resource request, preset or option is malformed.

    The message names the field, the value received and the accepted forms, and suggests the
    nearest valid spelling where there is one.
    """


class LimitError(SpecError):
    """A well-formed request exceeds a platform's maxima (e.g. Latch's 126 cpus)."""


class _StatedError(TaskcellError):
    """An error about the cluster, not the user's code: IPython shows its message alone."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


class InfeasibleError(_StatedError, RuntimeError):
    """No live worker can ever meet a request; nothing was submitted."""


class ClusterError(_StatedError, RuntimeError):
    """The cluster cannot be reached, or a worker died under a task."""

    #: The exit status of the cell's process, where it died (-9: killed, the OOM killer's way).
    exit_code: int | None = None


def worker_lost(worker: str, retries: int) -> ClusterError:
    """The one wording of a worker lost under a cell, whoever sees it first: the kernel (the
    worker left, or the scheduler stopped hearing from it) or the worker Dask gave the cell to
    next (past ``--retries``)."""
    again = f"It was retried {retries} time(s). " if retries else ""
    return ClusterError(
        f"worker {worker} died while running this cell, or the scheduler stopped hearing from "
        f"it; nothing was written back. {again}Use --retries N to run it again on another "
        f"worker when a worker dies."
    )


class InputError(_StatedError, ValueError):
    """An input of a ``%%task`` cell cannot travel to its worker; the message names it."""


class ExportError(TaskcellError, ValueError):
    """A notebook cannot be exported; the message names the cell (number and first line)."""


class CellError(TaskcellError):
    """A ``%%task`` cell raised on its worker.

    Shown in the notebook as the user's own traceback, with the cell's line numbers and none of
    Dask's frames (IPython calls ``_render_traceback_``).
    """

    def __init__(self, traceback_text: str, type_name: str) -> None:
        # Not the builtin's own __init__, whose arguments may be others (UnicodeDecodeError's).
        BaseException.__init__(self, traceback_text, type_name)
        self.traceback_text = traceback_text
        self.type_name = type_name

    @property
    def summary(self) -> str:
        """The traceback's last line: ``ValueError: bad batch``."""
        lines = self.traceback_text.rstrip().splitlines()
        return lines[-1] if lines else self.type_name

    def __str__(self) -> str:
        """The message alone, as ``str()`` of the user's exception gives it: ``bad batch``
        (a traceback names a class outside builtins with its module: ``mod.BadBatch: ...``)."""
        head, colon, message = self.summary.partition(": ")
        if head.rpartition(".")[2] == self.type_name and colon:
            return message.strip()
        return self.summary.removeprefix(f"{self.type_name}:").strip()

    def _render_traceback_(self) -> list[str]:
        return self.traceback_text.rstrip("\n").splitlines()


class CellInterrupted(TaskcellError):
    """A ``%%task`` cell was interrupted; its worker stopped it and freed its resources."""


class Interrupted(KeyboardInterrupt):
    """The notebook's side of an interrupted ``%%task`` cell: one line, as a normal cell shows."""

    def _render_traceback_(self) -> list[str]:
        return [f"KeyboardInterrupt: {self}"]


# The name a notebook shows and nbclient matches, as for any interrupted cell.
Interrupted.__name__ = Interrupted.__qualname__ = "KeyboardInterrupt"


@functools.cache
def _user_error_class(type_name: str) -> type[CellError]:
    builtin = getattr(builtins, type_name, None)
    bases: tuple[type, ...] = (CellError,)
    if isinstance(builtin, type) and issubclass(builtin, Exception):
        bases += (builtin,)
    try:
        return type(type_name, bases, {"__module__": "taskcell.errors"})
    except TypeError:  # a builtin whose layout cannot be combined
        return type(type_name, (CellError,), {"__module__": "taskcell.errors"})


def user_error(error: CellError) -> CellError:
    """``error`` as a :class:`CellError` named after the user's exception type, and an instance
    of it where it is a builtin: the notebook shows ``ValueError``, papermill and nbclient's
    ``allow_error_names`` see it, and ``except ValueError`` catches it."""
    cls = _user_error_class(error.type_name.rpartition(".")[2] or "CellError")
    try:
        named = cls.__new__(cls)
    except TypeError:  # a builtin that makes its instances itself: MemoryError
        return cls(error.traceback_text, error.type_name)
    CellError.__init__(named, error.traceback_text, error.type_name)
    return named


class CellCodeError(_StatedError, ValueError):
    """A ``%%task`` cell uses what can only run in the notebook's kernel (a magic such as
    ``%matplotlib``); the message names it, and nothing ran."""
