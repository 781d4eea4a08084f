"""``jupyter nbconvert --to taskcell NOTEBOOK``: the exporter as an nbconvert exporter.

Registered under the ``nbconvert.exporters`` entry point ``taskcell``. The target is a
configurable trait: ``--TaskcellExporter.target=flyte``.
"""

from __future__ import annotations

from typing import Any

from nbconvert.exporters import Exporter
from traitlets import Enum

from taskcell.export import TARGETS, export_notebook


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

    def from_notebook_node(
        self, nb: Any, resources: dict[str, Any] | None = None, **kw: Any
    ) -> tuple[str, dict[str, Any]]:
        """Return the module's source and nbconvert's resources (``output_extension`` set)."""
        nb_copy, resources = super().from_notebook_node(nb, resources, **kw)
        resources["output_extension"] = ".py"
        return export_notebook(nb_copy, self.target), resources
