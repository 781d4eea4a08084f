"""``POST /taskcell/api/export``: JupyterLab's "Export notebook to workflow module" command.

The browser names a notebook as the contents API does (a ``/``-separated path relative to the
server's root) and a target; the server writes ``<notebook>.py`` beside it with
:func:`taskcell.export.write_module` and answers with the module's path, in the same terms,
whether a file was replaced, and the warnings of the export (cells kept only as comments).

A file taskcell did not write is not replaced unless the body says ``"overwrite": true``: the
answer is a 409, on which JupyterLab asks the user. A directory in the module's place is a 400.

A browser may name any path, so the path is checked against the contents manager's root with
real (symlink-resolved) paths before anything is read: the notebook and the module both lie
inside the root, and hidden files stay hidden unless the server allows them. The checks and
the export are tornado-free (:func:`parse_request`,
:func:`~taskcell.extension.notebook_paths.locate_notebook`, :func:`export_module`);
:class:`ExportHandler` turns their errors into JSON 4xx replies, and exports in a thread, off
the server's event loop.
"""

from __future__ import annotations

import asyncio
import threading
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import authorized
from tornado import web

from taskcell.extension.handlers import TaskcellHandler
from taskcell.extension.notebook_paths import ExportRequestError, NotebookLocation, locate_notebook
from taskcell.extension.payloads import ExportResult, shown

if TYPE_CHECKING:
    from taskcell.export import Target


@dataclass(frozen=True)
class CheckedExport:
    """A checked ``POST /taskcell/api/export`` body (:class:`~taskcell.extension.payloads.
    ExportRequest`)."""

    path: str
    target: Target
    overwrite: bool
    """Replace a file at the module's path even if taskcell did not write it."""


def parse_request(data: Mapping[str, Any]) -> CheckedExport:
    """Check a request body: ``path``, and optionally ``target`` and ``overwrite``.

    Raises
    ------
    ExportRequestError
        An unknown field, a target not in :data:`taskcell.export.TARGETS`, or an ``overwrite``
        that is not a boolean. The path is checked by
        :func:`~taskcell.extension.notebook_paths.locate_notebook`.
    """
    from taskcell.export import TARGETS

    unknown = sorted(set(data) - {"path", "target", "overwrite"})
    if unknown:
        raise ExportRequestError(
            f"unknown field(s) {', '.join(repr(f[:40]) for f in unknown[:5])}; "
            "the export takes 'path', 'target' and 'overwrite'"
        )
    target = data.get("target", "dask")
    if target not in TARGETS:
        raise ExportRequestError(
            f"'target' must be one of {', '.join(map(repr, TARGETS))}, got {shown(target)}"
        )
    overwrite = data.get("overwrite", False)
    if not isinstance(overwrite, bool):
        raise ExportRequestError(f"'overwrite' must be true or false, got {shown(overwrite)}")
    path = data.get("path")
    if not isinstance(path, str) or not path.strip("/ "):
        raise ExportRequestError(
            f"'path' must be the notebook's path relative to the server's root, got {shown(path)}"
        )
    return CheckedExport(path=path, target=target, overwrite=overwrite)


# warnings.catch_warnings swaps process-wide state, so one export records at a time.
_recording = threading.Lock()


def export_module(location: NotebookLocation, target: Target, overwrite: bool) -> ExportResult:
    """Write the workflow module beside the notebook; nothing is written if the export fails.

    Parameters
    ----------
    location
        From :func:`~taskcell.extension.notebook_paths.locate_notebook`.
    target
        One of :data:`taskcell.export.TARGETS`.
    overwrite
        Replace a file at the module's path even if taskcell did not write it.

    Returns
    -------
    ExportResult
        The module's path, whether a file was replaced, and the export's warnings.

    Raises
    ------
    taskcell.export.OverwriteError
        A file taskcell did not write is at the module's path, and ``overwrite`` is false.
    taskcell.errors.ExportError
        The notebook cannot be exported; the message names the cell.
    """
    from taskcell.export import ExportWarning, write_module

    with _recording, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ExportWarning)
        written = write_module(location.notebook, location.module, target, force=overwrite)
    # Warnings another thread raised meanwhile were recorded too: hand those back.
    for w in caught:
        if not issubclass(w.category, ExportWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    return ExportResult(
        path=location.module_api_path,
        target=target,
        replaced=written.replaced,
        warnings=[str(w.message) for w in caught if issubclass(w.category, ExportWarning)],
    )


class ExportHandler(TaskcellHandler):
    """``POST {"path", "target", "overwrite"}`` -> :class:`ExportResult`.

    It reads and writes files of the server's root, so Jupyter authorizes it as a write to
    ``contents``, like saving a file.
    """

    auth_resource = "contents"

    @web.authenticated
    @authorized
    async def post(self) -> None:
        from taskcell.export import OverwriteError

        try:
            request = parse_request(self.body())
            location = locate_notebook(self._root(), request.path)
        except ExportRequestError as e:
            raise web.HTTPError(400, str(e)) from None
        except FileNotFoundError as e:
            raise web.HTTPError(404, str(e)) from None
        await self._refuse_hidden(request.path)
        module = shown(location.module_api_path)
        try:
            result = await asyncio.to_thread(
                export_module, location, request.target, request.overwrite
            )
        except OverwriteError:
            raise web.HTTPError(
                409,
                f"{module} exists and was not written by taskcell; "
                'send "overwrite": true to replace it',
            ) from None
        # An ExportError (a ValueError) names the cell; others come from what the cells hold.
        except (ValueError, OverflowError) as e:
            raise web.HTTPError(400, f"cannot export {request.path}: {e}") from None
        except PermissionError:
            raise web.HTTPError(403, f"cannot write {module}: permission denied") from None
        except OSError as e:  # the disk is full, say: the server's trouble, told plainly
            raise web.HTTPError(500, f"cannot write {module}: {e.strerror}") from None
        self.reply(result)

    def _root(self) -> str:
        manager = self.contents_manager
        return getattr(manager, "root_dir", None) or self.settings["server_root_dir"]

    async def _refuse_hidden(self, path: str) -> None:
        """As the contents API does: hidden files only where the server allows them."""
        manager = self.contents_manager
        if getattr(manager, "allow_hidden", True):
            return
        # The module has the notebook's folder and stem, so it is hidden when the notebook is.
        if await ensure_async(manager.is_hidden(path)):
            raise web.HTTPError(
                400,
                f"{shown(path)} is hidden, and this server does not serve hidden files "
                "(ContentsManager.allow_hidden)",
            )
