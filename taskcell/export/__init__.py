"""Export a notebook to a workflow module: ``taskcell export NOTEBOOK [--target dask|flyte|latch]``.

A notebook's ``%%task`` cells become resource-annotated task functions, its other code cells
the driver, and its data flow (names one cell binds and a later one reads) the workflow's edges.
See :mod:`taskcell.export.flow` for the rules and :mod:`taskcell.export.dask_target`,
:mod:`~taskcell.export.flyte_target` and :mod:`~taskcell.export.latch_target` for the targets.

>>> source = export_notebook("analysis.ipynb")  # doctest: +SKIP
>>> export_file("analysis.ipynb", target="flyte")  # writes analysis.py  # doctest: +SKIP
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from taskcell.export.notebook import ExportError, ExportWarning

__all__ = ["TARGETS", "ExportError", "ExportWarning", "Target", "export_file", "export_notebook"]

Target = Literal["dask", "flyte", "latch"]
"""Where the module runs.

- ``"dask"``: on a Dask cluster with taskcell (``python workflow.py [--scheduler ADDRESS]``).
- ``"flyte"``: a Flyte 2 program (``flyte.TaskEnvironment`` per distinct request).
- ``"latch"``: Latch SDK tasks (a preset decorator or ``custom_task``).
"""

TARGETS: tuple[Target, ...] = ("dask", "flyte", "latch")


def export_notebook(
    notebook: str | os.PathLike[str] | Mapping[str, Any],
    target: Target = "dask",
    *,
    format: bool = True,
) -> str:
    """Return the workflow module for a notebook, as Python source.

    Parameters
    ----------
    notebook
        A path to an ``.ipynb`` file, or the notebook's JSON (a dict or an ``nbformat`` node).
    target
        ``"dask"`` (default), ``"flyte"`` or ``"latch"``.
    format
        Format the source with ``ruff format`` when ruff is installed.

    Returns
    -------
    str
        The module's source. It compiles; warnings (:class:`ExportWarning`) name each cell part
        that was kept only as a comment.

    Raises
    ------
    ExportError
        For a malformed notebook, a cell that is not valid Python, a bad ``%%task`` line, or a
        request the target cannot express; the message names the cell (number and first line).
    """
    from taskcell import config
    from taskcell.export.codegen import format_source
    from taskcell.export.flow import plan_workflow
    from taskcell.export.notebook import read_notebook

    if target not in TARGETS:
        raise ExportError(f"target= must be one of {', '.join(TARGETS)}, got {target!r}")
    presets = config.presets()
    workflow = plan_workflow(read_notebook(notebook, presets), presets)
    if target == "dask":
        from taskcell.export.dask_target import render_dask as render
    elif target == "flyte":
        from taskcell.export.flyte_target import render_flyte as render
    else:
        from taskcell.export.latch_target import render_latch as render
    source, notes = render(workflow)
    for note in [*workflow.notes, *notes]:
        warnings.warn(f"taskcell: {note}", ExportWarning, stacklevel=2)
    try:
        compile(source, "<exported workflow>", "exec", dont_inherit=True)
    except SyntaxError as e:  # a bug in taskcell, not in the notebook
        raise ExportError(
            f"taskcell generated a module that does not compile ({e.msg}, line {e.lineno}); "
            f"please report this with the notebook"
        ) from e
    return format_source(source) if format else source


def export_file(
    notebook: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    target: Target = "dask",
) -> Path:
    """Export a notebook file and write the module; nothing is written if the export fails.

    Parameters
    ----------
    notebook
        The ``.ipynb`` file.
    output
        Where to write; the notebook's path with ``.py`` by default. Written to a temporary
        file in the same folder first, then renamed over ``output``.
    target
        ``"dask"`` (default), ``"flyte"`` or ``"latch"``.

    Returns
    -------
    Path
        The module written.

    Raises
    ------
    ExportError
        As :func:`export_notebook`; ``output`` is left as it was.
    """
    source = export_notebook(notebook, target)
    path = Path(output) if output is not None else Path(notebook).with_suffix(".py")
    if path.resolve() == Path(notebook).resolve():
        raise ExportError(f"the output {path} is the notebook itself; choose another -o")
    _write_atomically(path, source)
    return path


def _write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(temporary, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
