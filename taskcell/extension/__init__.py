"""The jupyter_server extension behind the JupyterLab Resources sidebar.

Enabled by ``etc/jupyter/jupyter_server_config.d/taskcell.json``, which ``pip install``
puts in place; the REST API is described in :mod:`taskcell.extension.handlers`. Importing
this package imports neither jupyter_server nor distributed: the server loads them when it
loads the extension, and the first request for a cluster loads distributed.
"""

from __future__ import annotations

from typing import Any


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    from taskcell.extension.app import TaskcellExtension

    return [{"module": "taskcell.extension", "app": TaskcellExtension}]
