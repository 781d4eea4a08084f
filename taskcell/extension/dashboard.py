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

A page relayed this way is one or more folders deeper than on the dashboard itself, so a link
that climbs above the dashboard's root (Dask's Info pages load ``../../../statics/...`` from
``/info/main/``, which a browser stops at ``/``) would leave the cluster's folder: the relay
makes such a link climb to the cluster's folder and no higher. A dashboard that stops answering
is a 502 for a page, and a close with a reason for a panel's websocket, never an exception in
the server's log.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from jupyter_server_proxy.handlers import ProxyHandler  # type: ignore[import-untyped]
from jupyter_server_proxy.websocket import pingable_ws_connect  # type: ignore[import-untyped]
from tornado import httpclient, web
from tornado.iostream import StreamClosedError
from tornado.websocket import WebSocketClosedError, WebSocketError

from taskcell.extension.sidebar_view import dashboard_target

if TYPE_CHECKING:
    from jupyter_server_proxy.handlers import RewritableResponse

    from taskcell.extension.server_state import ServerState

#: What a failed connection to a dashboard raises: refused or reset (OSError), closed during the
#: handshake (StreamClosedError, WebSocketError), or answered with an error (HTTPClientError).
UNREACHABLE = (OSError, StreamClosedError, WebSocketError, httpclient.HTTPClientError)

#: The close code of a relayed websocket whose dashboard closed without one or cannot be
#: reached: "going away" (RFC 6455, 7.4.1); the reason says which cluster.
GOING_AWAY = 1001

#: A link in an HTML attribute that starts by climbing folders: ``href="../../statics/x.css"``.
_CLIMBING = re.compile(rb"""(\b(?:href|src)\s*=\s*["'])((?:\.\./)+)""", re.IGNORECASE)


def clamp_climbing_links(body: bytes, depth: int) -> bytes:
    """``body``, an HTML page ``depth`` folders below the dashboard's root, with each relative
    link that climbs above that root made to climb to it exactly, as a browser reads it on the
    dashboard itself.

    Examples
    --------
    >>> clamp_climbing_links(b'<link href="../../../statics/base.css">', 2)
    b'<link href="../../statics/base.css">'
    >>> clamp_climbing_links(b'<a href="../worker/a.html">', 2)
    b'<a href="../worker/a.html">'
    """

    def clamp(match: re.Match[bytes]) -> bytes:
        climbs = len(match.group(2)) // 3
        return match.group(1) + b"../" * min(climbs, depth)

    return _CLIMBING.sub(clamp, body)


class DashboardHandler(ProxyHandler):
    """Relay one cluster's Dask dashboard (HTTP and websockets)."""

    def initialize(self, extension: ServerState) -> None:
        self.extension = extension
        self._allowed: str | None = None
        self._cluster = ""
        self.rewrite_response = (self._rewriter(),)

    def _target(self, cluster_id: str) -> tuple[str, int]:
        watch = self.extension.hub.find(cluster_id)
        target = dashboard_target(watch.dashboard, watch.address) if watch is not None else None
        if watch is None or target is None:
            raise web.HTTPError(
                404, f"no dashboard is known for the cluster {cluster_id!r}; open it in the sidebar"
            )
        self._allowed = target[0]
        self._cluster = cluster_id
        self.proxy_base = url_path_join("taskcell", "dashboard", cluster_id)
        return target

    def _depth(self) -> int:
        """How many folders below the cluster's relay root the requested page is, counted on
        the path as the browser sent it (a ``%2F`` in a worker's address is no folder)."""
        root = url_path_join(self.base_url, self.proxy_base) + "/"
        tail = self.request.path[len(root) :] if self.request.path.startswith(root) else ""
        return tail.count("/")

    def _rewriter(self) -> Callable[[RewritableResponse], None]:
        """The rewrite of a relayed response that keeps its links in the cluster's folder."""
        # jupyter-server-proxy calls a rewrite with the arguments its parameters name, read from
        # its code object: a plain function, not a bound method.
        depth = self._depth

        def rewrite(response: RewritableResponse) -> None:
            if "html" in response.headers.get("Content-Type", "") and response.body:
                response.body = clamp_climbing_links(response.body, depth())

        return rewrite

    def _gone(self) -> str:
        return (
            f"the dashboard of the cluster {self._cluster!r} does not answer: it may have stopped"
        )

    async def _relay(self, cluster_id: str, path: str) -> Any:
        host, port = self._target(cluster_id)
        try:
            return await self.proxy(host, port, path)
        except UNREACHABLE:
            raise web.HTTPError(502, self._gone()) from None

    def _check_host_allowlist(self, host: str) -> bool:
        return host == self._allowed

    def check_xsrf_cookie(self) -> None:
        """Jupyter's XSRF check, which the relay's base class skips: a page of another origin
        must not make a signed-in browser POST through the server."""
        JupyterHandler.check_xsrf_cookie(self)

    async def get(self, cluster_id: str, path: str) -> Any:
        if self.request.headers.get("Upgrade", "").lower() == "websocket":
            self._target(cluster_id)  # an unknown cluster: a 404, before the handshake
        return await super().get(cluster_id, path)

    async def http_get(self, cluster_id: str, path: str) -> Any:
        return await self._relay(cluster_id, path)

    async def post(self, cluster_id: str, path: str) -> Any:
        return await self._relay(cluster_id, path)

    async def head(self, cluster_id: str, path: str) -> Any:
        return await self._relay(cluster_id, path)

    # The websocket relay, in place of jupyter-server-proxy's, which lets a dashboard that is
    # gone raise out of ``open``, ``on_message`` and ``on_ping`` into the server's log, and
    # closes the browser's socket without saying why.

    async def open(self, cluster_id: str, path: str) -> None:
        host, port = self._target(cluster_id)
        uri = self.get_client_uri("ws", host, port, "/" + path.lstrip("/"))
        request = httpclient.HTTPRequest(url=uri, headers=self.proxy_request_headers())
        self._record_activity()
        try:
            self.ws = await pingable_ws_connect(
                request=request,
                on_message_callback=self._from_dashboard,
                on_ping_callback=self._ping_from_dashboard,
                subprotocols=self._requested_subprotocols,
            )
        except UNREACHABLE:
            self.close(GOING_AWAY, self._gone())

    def _from_dashboard(self, message: str | bytes | None) -> None:
        self._record_activity()
        if message is None:
            upstream = getattr(self, "ws", None)
            code = upstream.close_code if upstream is not None else None
            reason = upstream.close_reason if upstream is not None else None
            if code is None or code in (1004, 1005, 1006, 1015):  # none, or one never sent
                code, reason = GOING_AWAY, self._gone()
            self.close(code, reason or self._gone())
        elif self.ws_connection is not None and not self.ws_connection.is_closing():
            _quietly(self.write_message(message, binary=isinstance(message, bytes)))

    def _ping_from_dashboard(self, data: bytes) -> None:
        self._record_activity()
        if self.ws_connection is not None and not self.ws_connection.is_closing():
            self.ping(data)

    def on_message(self, message: str | bytes) -> None:
        self._record_activity()
        upstream = getattr(self, "ws", None)
        if upstream is None or upstream.protocol is None:
            self.close(GOING_AWAY, self._gone())
            return
        try:
            _quietly(upstream.write_message(message, binary=isinstance(message, bytes)))
        except WebSocketClosedError:
            self.close(GOING_AWAY, self._gone())

    def on_ping(self, data: bytes) -> None:
        self._record_activity()
        upstream = getattr(self, "ws", None)
        if upstream is not None and upstream.protocol is not None:
            upstream.protocol.write_ping(data)


def _quietly(sent: asyncio.Future[None]) -> None:
    """Let a websocket write fail unseen: its peer closed meanwhile, and the close relays that."""

    def retrieve(done: asyncio.Future[None]) -> None:
        if not done.cancelled():
            done.exception()

    sent.add_done_callback(retrieve)


def dashboard_handlers(extension: ServerState) -> list[tuple[str, type, dict[str, Any]]]:
    """The URL pattern of the relay, relative to the server's base URL."""
    return [(r"/taskcell/dashboard/([^/]+)/?(.*)", DashboardHandler, {"extension": extension})]
