"""``/taskcell/dashboard/<id>/...``: a cluster's Dask dashboard through the Jupyter server.

The dashboard a scheduler serves (``http://127.0.0.1:8787/status``) is reachable only from the
machines that reach the scheduler; a browser on another machine (JupyterHub, a remote server)
reaches the Jupyter server alone. This handler relays the dashboard's pages, its Bokeh
websockets and its individual plots (``individual-task-stream``...), which the sidebar opens as
JupyterLab panels, with jupyter-server-proxy's ``ProxyHandler``.

Only the dashboard of a cluster the server watches can be reached, at the port its scheduler
announced on the scheduler's own machine: a browser names a cluster id, never an address, so
the server cannot be made to fetch from a machine of the browser's or a scheduler's choosing.
Jupyter's authentication applies, and its XSRF check to a request that changes state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from jupyter_server_proxy.handlers import ProxyHandler  # type: ignore[import-untyped]
from tornado import web

from taskcell.extension.views import dashboard_target

if TYPE_CHECKING:
    from taskcell.extension.app import TaskcellExtension


class DashboardHandler(ProxyHandler):
    """Relay one cluster's Dask dashboard (HTTP and websockets)."""

    def initialize(self, extension: TaskcellExtension) -> None:
        self.extension = extension
        self._allowed: str | None = None

    def _target(self, cluster_id: str) -> tuple[str, int]:
        watch = self.extension.hub.find(cluster_id)
        target = dashboard_target(watch.dashboard, watch.address) if watch is not None else None
        if watch is None or target is None:
            raise web.HTTPError(
                404, f"no dashboard is known for the cluster {cluster_id!r}; open it in the sidebar"
            )
        self._allowed = target[0]
        self.proxy_base = url_path_join("taskcell", "dashboard", cluster_id)
        return target

    def _check_host_allowlist(self, host: str) -> bool:
        return host == self._allowed

    def check_xsrf_cookie(self) -> None:
        """Jupyter's XSRF check, which the relay's base class skips: a page of another origin
        must not make a signed-in browser POST through the server."""
        JupyterHandler.check_xsrf_cookie(self)

    async def http_get(self, cluster_id: str, path: str) -> Any:
        host, port = self._target(cluster_id)
        return await self.proxy(host, port, path)

    async def open(self, cluster_id: str, path: str) -> Any:
        host, port = self._target(cluster_id)
        return await self.proxy_open(host, port, path)

    async def post(self, cluster_id: str, path: str) -> Any:
        host, port = self._target(cluster_id)
        return await self.proxy(host, port, path)

    async def head(self, cluster_id: str, path: str) -> Any:
        host, port = self._target(cluster_id)
        return await self.proxy(host, port, path)


def dashboard_handlers(extension: TaskcellExtension) -> list[tuple[str, type, dict[str, Any]]]:
    """The URL pattern of the relay, relative to the server's base URL."""
    return [(r"/taskcell/dashboard/([^/]+)/?(.*)", DashboardHandler, {"extension": extension})]
