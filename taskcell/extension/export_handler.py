"""``POST /taskcell/api/export``: JupyterLab's "Export notebook to workflow module" command.

The browser names a notebook as the contents API does (a ``/``-separated path relative to the
server's root) and a target; the server writes ``<notebook>.py`` beside it with
:func:`taskcell.export.export_file` and answers with the module's path, in the same terms, and
the warnings of the export (cells kept only as comments).

A browser may name any path, so the path is checked against the contents manager's root with
real (symlink-resolved) paths before anything is read: the notebook and the module both lie
inside the root, and hidden files stay hidden unless the server allows them. The checks and
the export are tornado-free (:func:`locate_notebook`, :func:`export_module`);
:class:`ExportHandler` turns their errors into JSON 400 and 404 replies.
"""

from __future__ import annotations

import asyncio
import os
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, TypedDict

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import authorized
from tornado import web

from taskcell.extension.handlers import TaskcellHandler

if TYPE_CHECKING:
    from taskcell.export import Target


class ExportRequestError(ValueError):
    """A request the server refuses before exporting: a bad path or target (a 400)."""


class ExportResult(TypedDict):
    """The reply (``IExportResult`` in ``labextension/src/api.ts``)."""

    path: str
    """The module written, relative to the server's root, ``/``-separated."""
    target: str
    warnings: list[str]
    """One sentence per cell part kept only as a comment, naming the cell."""


@dataclass(frozen=True)
class NotebookLocation:
    notebook: Path
    """The notebook file (real path)."""
    module: Path
    """Where the module goes: beside the notebook, as the browser named it."""
    module_api_path: str


def locate_notebook(root: str | os.PathLike[str], path: object) -> NotebookLocation:
    """Resolve a contents-API path to a notebook inside ``root``, and its module beside it.

    Parameters
    ----------
    root
        The server's root folder (the contents manager's ``root_dir``).
    path
        The notebook's path relative to ``root``, as JupyterLab names it (``"sub/nb.ipynb"``).

    Returns
    -------
    NotebookLocation

    Raises
    ------
    ExportRequestError
        ``path`` is not a relative ``.ipynb`` path, or it or its module lies outside ``root``
        once symlinks are resolved.
    FileNotFoundError
        No file at ``path``.
    """
    if not isinstance(path, str) or not path.strip("/ "):
        raise ExportRequestError(
            f"'path' must be the notebook's path relative to the server's root, got {path!r}"
        )
    if "\0" in path:
        raise ExportRequestError(f"'path' must not contain a NUL character, got {path!r}")
    api_path = PurePosixPath(path)
    if api_path.is_absolute() or os.path.isabs(path):
        raise ExportRequestError(
            f"'path' must be relative to the server's root, got the absolute path {path!r}"
        )
    if api_path.suffix.lower() != ".ipynb":
        raise ExportRequestError(f"'path' must name a notebook (.ipynb), got {path!r}")
    real_root = Path(root).resolve()
    given = real_root.joinpath(*api_path.parts)
    notebook = given.resolve()
    module = given.with_suffix(".py")
    if not (notebook.is_relative_to(real_root) and module.resolve().is_relative_to(real_root)):
        raise ExportRequestError(f"'path' must lie inside the server's root, got {path!r}")
    if not notebook.is_file():
        raise FileNotFoundError(f"no notebook at {path!r}")
    return NotebookLocation(notebook, module, str(api_path.with_suffix(".py")))


# warnings.catch_warnings swaps process-wide state, so one export records at a time.
_recording = threading.Lock()


def export_module(location: NotebookLocation, target: Target) -> ExportResult:
    """Write the workflow module beside the notebook; nothing is written if the export fails.

    Parameters
    ----------
    location
        From :func:`locate_notebook`.
    target
        One of :data:`taskcell.export.TARGETS`.

    Returns
    -------
    ExportResult
        The module's path and the export's warnings.

    Raises
    ------
    taskcell.errors.ExportError
        The notebook cannot be exported; the message names the cell.
    """
    from taskcell.export import ExportWarning, export_file

    with _recording, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ExportWarning)
        export_file(location.notebook, location.module, target)
    # Warnings another thread raised meanwhile were recorded too: hand those back.
    for w in caught:
        if not issubclass(w.category, ExportWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    return ExportResult(
        path=location.module_api_path,
        target=target,
        warnings=[str(w.message) for w in caught if issubclass(w.category, ExportWarning)],
    )


class ExportHandler(TaskcellHandler):
    """``POST {"path", "target"}`` -> :class:`ExportResult`.

    It reads and writes files of the server's root, so Jupyter authorizes it as a write to
    ``contents``, like saving a file.
    """

    auth_resource = "contents"

    @web.authenticated
    @authorized
    async def post(self) -> None:
        from taskcell.export import TARGETS, ExportError

        data = self.body()
        target = data.get("target", "dask")
        if target not in TARGETS:
            raise web.HTTPError(
                400, f"'target' must be one of {', '.join(map(repr, TARGETS))}, got {target!r}"
            )
        path = data.get("path")
        try:
            location = locate_notebook(self._root(), path)
        except ExportRequestError as e:
            raise web.HTTPError(400, str(e)) from None
        except FileNotFoundError as e:
            raise web.HTTPError(404, str(e)) from None
        await self._refuse_hidden(path)
        try:
            result = await asyncio.to_thread(export_module, location, target)
        except ExportError as e:
            raise web.HTTPError(400, f"cannot export {path}: {e}") from None
        except PermissionError:
            raise web.HTTPError(
                403, f"cannot write {location.module_api_path}: permission denied"
            ) from None
        self.reply(result)

    def _root(self) -> str:
        manager = self.contents_manager
        return getattr(manager, "root_dir", None) or self.extension.serverapp.root_dir

    async def _refuse_hidden(self, path: str) -> None:
        """As the contents API does: hidden files only where the server allows them."""
        manager = self.contents_manager
        if getattr(manager, "allow_hidden", True):
            return
        # The module has the notebook's folder and stem, so it is hidden when the notebook is.
        if await ensure_async(manager.is_hidden(path)):
            raise web.HTTPError(
                400,
                f"{path!r} is hidden, and this server does not serve hidden files "
                "(ContentsManager.allow_hidden)",
            )
