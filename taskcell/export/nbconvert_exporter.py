"""``jupyter nbconvert --to taskcell NOTEBOOK``: the exporter as an nbconvert exporter.

Registered under the ``nbconvert.exporters`` entry point ``taskcell`` (without it,
``--to taskcell.export.nbconvert_exporter.TaskcellExporter`` works too). The target is a
configurable trait: ``--TaskcellExporter.target=flyte``. Warnings go to nbconvert's log.

The module begins with :data:`taskcell.export.MARKER`, as ``taskcell export`` writes it; but
nbconvert writes its output itself and, as for every format, replaces whatever file is there.
"""

from __future__ import annotations

import warnings
from typing import Any

from nbconvert.exporters import Exporter
from traitlets import Enum

from taskcell.export import TARGETS, ExportWarning, export_notebook


class TaskcellExporter(Exporter):
    """Export a notebook to a taskcell workflow module (a ``.py`` file)."""

    export_from_notebook = "Workflow module (taskcell)"
    output_mimetype = "text/x-python"

    target = Enum(
        list(TARGETS),
        default_value="dask",
        help="Where the module runs: dask (default), flyte or latch.",
    ).tag(config=True)

    def _file_extension_default(self) -> str:
        return ".py"

    # Exporter declares a NotebookNode result; a text exporter returns str, as nbconvert's
    # own TemplateExporter does (with the same ignore).
    def from_notebook_node(  # type: ignore[override]
        self, nb: Any, resources: dict[str, Any] | None = None, **kw: Any
    ) -> tuple[str, dict[str, Any]]:
        """Return the module's source and nbconvert's resources (``output_extension`` set)."""
        nb_copy, resources = super().from_notebook_node(nb, resources, **kw)
        resources["output_extension"] = ".py"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ExportWarning)
            source = export_notebook(nb_copy, self.target, name=_notebook_name(resources))
        for warning in caught:
            if issubclass(warning.category, ExportWarning):
                self.log.warning("%s", warning.message)
            else:
                warnings.warn_explicit(
                    warning.message, warning.category, warning.filename, warning.lineno
                )
        return source, resources


def _notebook_name(resources: dict[str, Any]) -> str | None:
    """The notebook's file name, from the stem nbconvert keeps in ``resources``, if any."""
    stem = (resources.get("metadata") or {}).get("name")
    return f"{stem}.ipynb" if isinstance(stem, str) and stem else None
