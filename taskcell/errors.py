"""The exceptions taskcell raises; every one subclasses :class:`TaskcellError`."""

from __future__ import annotations


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


class ExportError(TaskcellError, ValueError):
    """A notebook cannot be exported; the message names the cell (number and first line)."""


class CellError(TaskcellError):
    """A ``%%task`` cell raised on its worker.

    Shown in the notebook as the user's own traceback, with the cell's line numbers and none of
    Dask's frames (IPython calls ``_render_traceback_``).
    """

    def __init__(self, traceback_text: str, type_name: str) -> None:
        super().__init__(traceback_text, type_name)
        self.traceback_text = traceback_text
        self.type_name = type_name

    def __str__(self) -> str:
        return self.traceback_text.rstrip().splitlines()[-1]

    def _render_traceback_(self) -> list[str]:
        return self.traceback_text.rstrip("\n").splitlines()


class CellInterrupted(TaskcellError):
    """A ``%%task`` cell was interrupted; its worker stopped it and freed its resources."""
