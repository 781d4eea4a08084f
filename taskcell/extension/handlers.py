"""The REST API under ``/taskcell/api/``: thin handlers over :mod:`~taskcell.extension.clusters`,
:mod:`~taskcell.extension.watch` and :mod:`~taskcell.extension.planning`.

=======  ==================================  =================================================
GET      /taskcell/api/clusters              the clusters this server knows (ClusterList)
GET      /taskcell/api/clusters/<id>         a cluster's snapshot (ClusterState); with
                                             ``?since=<version>&timeout=<s>`` a long poll
POST     /taskcell/api/clusters/<id>/cancel  stops ``{"key"}``, a task the snapshot shows
                                             running or waiting (CancelResult;
                                             :mod:`~taskcell.extension.cancelling`)
GET      /taskcell/api/planner               the planner's profiles and presets
POST     /taskcell/api/planner               a suggestion for ``{"size", "profile", "cluster"}``
POST     /taskcell/api/export                writes ``<notebook>.py`` for ``{"path", "target",
                                             "overwrite"}``
                                             (:mod:`~taskcell.extension.export_handler`)
=======  ==================================  =================================================

Every verb needs an authenticated user (Jupyter's token or login cookie; a POST with a cookie
also needs Jupyter's XSRF token). Bad input is a 400 (a body over :data:`MAX_BODY`, a 413), an
unknown cluster (or a task it does not show) a 404, a cluster the server is not connected to a
409, an export onto a file taskcell did not write a 409: each with a JSON
``{"message", "reason"}`` body whose message names the bad value. Every input is bounded before
work is done on it, so no request holds the server's event loop; the export runs in a thread.
"""

from __future__ import annotations

import asyncio
import json
from http.client import responses
from typing import TYPE_CHECKING, Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

from taskcell.cluster import registry
from taskcell.extension import cancelling, planning
from taskcell.extension.clusters import configured_addresses, discover
from taskcell.extension.payloads import CancelResult, ClusterInfo, ClusterList, ErrorBody, shown

if TYPE_CHECKING:
    from taskcell.extension.app import TaskcellExtension

#: Longest wait of one long poll (seconds); browsers ask again when it ends.
MAX_WAIT = 60.0
DEFAULT_WAIT = 25.0

#: Largest request body read (bytes); every body of this API is a few short fields.
MAX_BODY = 64 * 1024


class TaskcellHandler(APIHandler):
    """Base of the taskcell handlers: the extension app and its hub, JSON in and out."""

    auth_resource = "taskcell"

    def initialize(self, extension: TaskcellExtension) -> None:
        self.extension = extension

    def reply(self, body: Any) -> None:
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(body))

    async def known_clusters(self) -> list[ClusterInfo]:
        sessions = await self.session_manager.list_sessions()
        return discover(
            registry.recorded(),
            self.kernel_manager.list_kernel_ids(),
            sessions,
            configured_addresses(self.extension.scheduler_addresses),
            self.extension.hub.statuses(),
        )

    async def find_cluster(self, cluster_id: str) -> ClusterInfo:
        for info in await self.known_clusters():
            if info["id"] == cluster_id:
                return info
        raise web.HTTPError(404, f"no cluster with id {cluster_id!r} is known to this server")

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        # Tornado 6.5 doubles every "%" of an HTTPError's log_message (its printf-style
        # escape), which APIHandler sends as is: "cell 2 (%%task ...)" would reach the browser
        # as "%%%%task". get_message() is the message as raised.
        error = kwargs.get("exc_info", (None, None, None))[1]
        if not isinstance(error, web.HTTPError) or not hasattr(error, "get_message"):
            super().write_error(status_code, **kwargs)
            return
        message = error.get_message() or responses.get(status_code, "Unknown HTTP Error")
        self.set_header("Content-Type", "application/json")
        self.log.warning("wrote error: %r", message)
        body: ErrorBody = {"message": message, "reason": error.reason}
        self.finish(json.dumps(body))

    def body(self) -> dict[str, Any]:
        """The request's JSON object, or a 400 that says what is wrong with it."""
        raw = self.request.body or b""
        if len(raw) > MAX_BODY:
            raise web.HTTPError(
                413, f"the request body must be at most {MAX_BODY} bytes, got {len(raw)}"
            )
        try:
            data = json.loads(raw.decode("utf-8")) if raw.strip() else None
        except (UnicodeDecodeError, ValueError) as e:  # also an integer of 4300+ digits
            raise web.HTTPError(400, f"the request body must be JSON: {e}") from None
        except RecursionError:
            raise web.HTTPError(400, "the request body must be JSON nested less deeply") from None
        if not isinstance(data, dict):
            raise web.HTTPError(
                400, f"the request body must be a JSON object, got {type(data).__name__}"
            )
        return data


class ClustersHandler(TaskcellHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.reply(ClusterList(clusters=await self.known_clusters()))


class ClusterHandler(TaskcellHandler):
    @web.authenticated
    @authorized
    async def get(self, cluster_id: str) -> None:
        since = self._number("since", int, None)
        wait = self._number("timeout", float, DEFAULT_WAIT)
        if not 0 <= wait <= MAX_WAIT:
            raise web.HTTPError(
                400, f"timeout= must be between 0 and {MAX_WAIT:g} seconds, got {wait!r}"
            )
        info = await self.find_cluster(cluster_id)
        watch = self.extension.hub.watch(info["address"])
        self.reply(await watch.changed(since, wait))

    def _number(self, name: str, kind: type, default: Any) -> Any:
        raw = self.get_query_argument(name, None)
        if raw is None or raw == "":
            return default
        if not raw.isascii():  # int() and float() read "٣" and "３" as 3
            raise web.HTTPError(400, f"{name}= must be written in ASCII digits, got {raw!r}")
        try:
            value = kind(raw)
        except ValueError:
            raise web.HTTPError(
                400, f"{name}= must be a {'whole ' if kind is int else ''}number, got {raw!r}"
            ) from None
        if value != value or (kind is int and value < 0):  # NaN, or a negative version
            raise web.HTTPError(400, f"{name}= must be a non-negative number, got {raw!r}")
        return value


class CancelHandler(TaskcellHandler):
    @web.authenticated
    @authorized
    async def post(self, cluster_id: str) -> None:
        try:
            key = cancelling.parse_cancel(self.body())
        except cancelling.CancelRequestError as e:
            raise web.HTTPError(400, str(e)) from None
        info = await self.find_cluster(cluster_id)
        watch = self.extension.hub.watch(info["address"])
        state = await watch.settled(self.extension.connect_timeout)
        if state["status"] != "connected":
            raise web.HTTPError(
                409,
                f"the server is not connected to the scheduler at {info['address']}: "
                f"{state['message'] or state['status']}",
            )
        if key not in cancelling.live_keys(state["snapshot"]):
            raise web.HTTPError(
                404,
                f"the cluster at {info['address']} shows no running or waiting task {shown(key)}",
            )
        try:
            running = await watch.cancel(key, self.extension.connect_timeout)
        except asyncio.TimeoutError:  # an OSError too: caught first
            raise web.HTTPError(
                504,
                f"the scheduler at {info['address']} did not answer in time; {shown(key)} may "
                "still be cancelled",
            ) from None
        except OSError as e:  # not connected, or the scheduler went away meanwhile
            raise web.HTTPError(409, f"{shown(key)} was not cancelled: {e}") from None
        self.reply(CancelResult(key=key, was="running" if running else "waiting"))


class PlannerHandler(TaskcellHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.reply(planning.choices())

    @web.authenticated
    @authorized
    async def post(self) -> None:
        data = self.body()
        try:
            request = planning.parse_request(data)
        except planning.RequestError as e:
            raise web.HTTPError(400, str(e)) from None
        snapshot = None
        if request.cluster is not None:
            info = await self.find_cluster(request.cluster)
            watch = self.extension.hub.watch(info["address"])
            snapshot = (await watch.settled(self.extension.connect_timeout))["snapshot"]
        try:
            self.reply(planning.suggest(request, snapshot))
        except planning.RequestError as e:
            raise web.HTTPError(400, str(e)) from None


def handlers(extension: TaskcellExtension) -> list[tuple[str, type, dict[str, Any]]]:
    """The URL patterns, relative to the server's base URL."""
    kwargs = {"extension": extension}
    return [
        (r"/taskcell/api/clusters/?", ClustersHandler, kwargs),
        (r"/taskcell/api/clusters/([^/]+)/?", ClusterHandler, kwargs),
        (r"/taskcell/api/clusters/([^/]+)/cancel/?", CancelHandler, kwargs),
        (r"/taskcell/api/planner/?", PlannerHandler, kwargs),
    ]
