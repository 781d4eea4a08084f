"""Where a notebook the browser names lies: its contents-API path checked against the server's
root with real (symlink-resolved) paths, and the place of its workflow module beside it.

Both the export (:mod:`~taskcell.extension.export_handler`) and the planner's measure of the
files beside a notebook (:mod:`~taskcell.extension.handlers`) locate notebooks this way.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from taskcell.extension.payloads import shown


class ExportRequestError(ValueError):
    """A request the server refuses before acting on it: a bad notebook path, or a bad export
    target (a 400)."""


@dataclass(frozen=True)
class NotebookLocation:
    notebook: Path
    """The notebook file (real path)."""
    module: Path
    """Where the module goes: beside the notebook, as the browser named it."""
    module_api_path: str


def locate_notebook(root: str | os.PathLike[str], path: str) -> NotebookLocation:
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
        ``path`` is not a relative ``.ipynb`` path a file can have, it or its module lies
        outside ``root`` once symlinks are resolved, or the module's place is not a file.
    FileNotFoundError
        No file at ``path``.
    """
    if "\0" in path:
        raise ExportRequestError(f"'path' must not contain a NUL character, got {shown(path)}")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise ExportRequestError(
            f"'path' must be text a file name can hold (no lone surrogates), got {shown(path)}"
        ) from None
    api_path = PurePosixPath(path)
    if api_path.is_absolute() or os.path.isabs(path):
        raise ExportRequestError(
            f"'path' must be relative to the server's root, got the absolute path {shown(path)}"
        )
    if api_path.suffix.lower() != ".ipynb":
        raise ExportRequestError(f"'path' must name a notebook (.ipynb), got {shown(path)}")
    real_root = Path(root).resolve()
    given = real_root.joinpath(*api_path.parts)
    module = given.with_suffix(".py")
    try:
        notebook, module_real = given.resolve(), module.resolve()
        found = notebook.is_file()
        blocked = module.exists() and not module.is_file()
    except RuntimeError:  # Python 3.11's resolve() on a symlink loop
        raise ExportRequestError(f"'path' runs into a symlink loop, got {shown(path)}") from None
    except OSError as e:  # a name too long, say
        raise ExportRequestError(
            f"'path' cannot name a file here ({e.strerror}), got {shown(path)}"
        ) from None
    if not (notebook.is_relative_to(real_root) and module_real.is_relative_to(real_root)):
        raise ExportRequestError(f"'path' must lie inside the server's root, got {shown(path)}")
    if not found:
        raise FileNotFoundError(f"no notebook at {shown(path)}")
    module_api_path = str(api_path.with_suffix(".py"))
    if blocked:
        raise ExportRequestError(
            f"cannot write the module {shown(module_api_path)}: a directory or another "
            "non-file is in its place; rename or move it"
        )
    return NotebookLocation(notebook, module, module_api_path)
