"""The REST API under ``/taskcell/api/``: thin handlers over :mod:`~taskcell.extension.clusters`,
:mod:`~taskcell.extension.watch` and :mod:`~taskcell.extension.planning`.

=======  =========================================  ==========================================
GET      /taskcell/api/clusters                     the clusters this server knows (ClusterList)
POST     /taskcell/api/clusters                     starts an embedded cluster, ``{}``
                                                    (StartedCluster)
GET      /taskcell/api/clusters/<id>                a cluster's snapshot and its view
                                                    (ClusterState); with ``?since=<version>&
                                                    timeout=<s>`` a long poll; ``snapshot=0``
                                                    leaves the snapshot out (the sidebar draws
                                                    the view)
POST     /taskcell/api/clusters/<id>/cancel         stops ``{"key"}``, a task the snapshot
                                                    shows running or waiting (CancelResult)
POST     /taskcell/api/clusters/<id>/scale          ``{"workers": n}`` for the embedded
                                                    cluster (ScaleResult)
POST     /taskcell/api/clusters/<id>/stop           stops the embedded cluster, ``{}``
                                                    (StopResult)
POST     /taskcell/api/clusters/<id>/retire         retires ``{"worker"}``, a pool's worker the
                                                    snapshot shows running (RetireResult)
POST     /taskcell/api/clusters/<id>/start-worker   asks ``{"kernel"}`` for one more worker of
                                                    its ``{"pool"}``, which the snapshot shows
                                                    (StartWorkerResult)
GET      /taskcell/api/clusters/<id>/tasks/<key>    what the task printed and raised
         /output                                    (TaskOutput)
GET      /taskcell/api/planner                      the planner's profiles and presets
POST     /taskcell/api/planner                      a suggestion for ``{"size", "profile",
                                                    "cluster", "notebook"}``
POST     /taskcell/api/export                       writes ``<notebook>.py`` for ``{"path",
                                                    "target", "overwrite"}``
                                                    (:mod:`~taskcell.extension.export_handler`)
GET      /taskcell/dashboard/<id>/<path>            the cluster's Dask dashboard, relayed
                                                    (:mod:`~taskcell.extension.dashboard`)
=======  =========================================  ==========================================

Every verb needs an authenticated user (Jupyter's token or login cookie; a POST with a cookie
also needs Jupyter's XSRF token). Bad input is a 400 (a body over :data:`MAX_BODY`, a 413), an
unknown cluster (or a task or worker it does not show) a 404, a cluster the server is not
connected to, or one that is not taskcell's to scale or stop, a 409, a cluster that does not
answer in time a 504, an export onto a file taskcell did not write a 409: each with a JSON
``{"message", "reason"}`` body whose message names the bad value. What a browser may ask is
checked by :mod:`~taskcell.extension.actions` and done by :mod:`~taskcell.extension.control`.
Every input is bounded before work is done on it, so no request holds the server's event loop;
the export runs in a thread.
"""

from __future__ import annotations

import asyncio
import json
from http.client import responses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

from taskcell.cluster import registry
from taskcell.extension import actions, control, planning
from taskcell.extension.clusters import (
    cluster_id,
    configured_addresses,
    discover,
    normalize_address,
)
from taskcell.extension.notebook_paths import ExportRequestError, locate_notebook
from taskcell.extension.payloads import (
    CancelResult,
    ClusterInfo,
    ClusterList,
    ClusterState,
    ErrorBody,
    RetireResult,
    ScaleResult,
    StartedCluster,
    StartWorkerResult,
    StopResult,
    shown,
)
from taskcell.planner.schema import workers_up

if TYPE_CHECKING:
    from taskcell.extension.server_state import ServerState
    from taskcell.extension.watch import ClusterWatch

#: Longest wait of one long poll (seconds); browsers ask again when it ends.
MAX_WAIT = 60.0
DEFAULT_WAIT = 25.0

#: Largest request body read (bytes); every body of this API is a few short fields.
MAX_BODY = 64 * 1024


class TaskcellHandler(APIHandler):
    """Base of the taskcell handlers: the extension app and its hub, JSON in and out."""

    auth_resource = "taskcell"

    def initialize(self, extension: ServerState) -> None:
        self.extension = extension

    def reply(self, body: Any) -> None:
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(body))

    async def known_clusters(self) -> list[ClusterInfo]:
        sessions = await self.session_manager.list_sessions()
        stopped = self.extension.stopped
        records = {
            k: a for k, a in registry.recorded().items() if normalize_address(a) not in stopped
        }
        return discover(
            records,
            self.kernel_manager.list_kernel_ids(),
            sessions,
            configured_addresses(self.extension.scheduler_addresses),
            self.extension.hub.statuses(),
            self.extension.started.addresses(),
        )

    async def find_cluster(self, cluster_id: str) -> ClusterInfo:
        for info in await self.known_clusters():
            if info["id"] == cluster_id:
                return info
        raise web.HTTPError(404, f"no cluster with id {cluster_id!r} is known to this server")

    async def connected_watch(self, cluster_id: str) -> tuple[ClusterWatch, ClusterState]:
        """The watch of a known cluster and its state, once connected; else a 404 or a 409."""
        info = await self.find_cluster(cluster_id)
        watch = self.extension.hub.watch(info["address"])
        state = await watch.settled(self.extension.connect_timeout)
        if state["status"] != "connected":
            raise web.HTTPError(
                409,
                f"the server is not connected to the scheduler at {info['address']}: "
                f"{state['message'] or state['status']}",
            )
        return watch, state

    @staticmethod
    def scalable(watch: ClusterWatch) -> None:
        """A 409 unless taskcell started the cluster, which alone may be scaled and stopped."""
        control = watch.control()
        if control is None or not control["scalable"]:
            raise web.HTTPError(
                409,
                f"the cluster at {watch.address} was not started by taskcell (a kernel's embedded "
                "cluster, or one started from the sidebar): scale and stop it where it was started",
            )

    async def acting(self, watch: ClusterWatch, action: Any, what: str) -> Any:
        """Await ``action`` (a coroutine on the cluster), its failures as JSON errors: a cluster
        that refuses is a 409, one that does not answer in time a 504."""
        try:
            return await asyncio.wait_for(action, self.extension.connect_timeout)
        except asyncio.TimeoutError:  # an OSError too: caught first
            raise web.HTTPError(
                504,
                f"the scheduler at {watch.address} did not answer in time; {what} may still happen",
            ) from None
        except (OSError, control.ControlError) as e:
            raise web.HTTPError(409, f"could not {what}: {e}") from None

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

    @web.authenticated
    @authorized
    async def post(self) -> None:
        try:
            actions.parse_nothing(self.body(), "starting a cluster")
        except actions.ActionRequestError as e:
            raise web.HTTPError(400, str(e)) from None
        try:
            address = await self.extension.started.start()
        except (OSError, RuntimeError) as e:  # ClusterError is a RuntimeError
            raise web.HTTPError(500, f"the cluster did not start: {e}") from None
        self.reply(StartedCluster(id=cluster_id(address), address=address))


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
        raw = self.get_query_argument("snapshot", "1")
        if raw not in ("0", "1"):
            raise web.HTTPError(400, f"snapshot= must be 0 or 1, got {shown(raw)}")
        info = await self.find_cluster(cluster_id)
        watch = self.extension.hub.watch(info["address"])
        state = await watch.changed(since, wait)
        if raw == "0":
            state = ClusterState(**{**state, "snapshot": None})
        self.reply(state)

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


def _checked(parse: Any, *args: Any) -> Any:
    """A body checked by :mod:`~taskcell.extension.actions`, or a 400 naming what is wrong."""
    try:
        return parse(*args)
    except actions.ActionRequestError as e:
        raise web.HTTPError(400, str(e)) from None


class CancelHandler(TaskcellHandler):
    @web.authenticated
    @authorized
    async def post(self, cluster_id: str) -> None:
        key = _checked(actions.parse_cancel, self.body())
        watch, state = await self.connected_watch(cluster_id)
        if key not in actions.live_keys(state["snapshot"]):
            raise web.HTTPError(
                404,
                f"the cluster at {watch.address} shows no running or waiting task {shown(key)}",
            )
        running = await self.acting(
            watch, control.cancel(watch.connected(), key), f"cancel {shown(key)}"
        )
        self.reply(CancelResult(key=key, was="running" if running else "waiting"))


class ScaleHandler(TaskcellHandler):
    @web.authenticated
    @authorized
    async def post(self, cluster_id: str) -> None:
        n = _checked(actions.parse_scale, self.body())
        watch, _ = await self.connected_watch(cluster_id)
        started, what = self.extension.started, f"scale to {n} workers"
        if started.owns(watch.address):
            scaling = started.scale(watch.address, n)
        else:
            self.scalable(watch)
            scaling = control.scale(watch.connected(), n)
        self.reply(ScaleResult(workers=await self.acting(watch, scaling, what)))


class StopHandler(TaskcellHandler):
    @web.authenticated
    @authorized
    async def post(self, cluster_id: str) -> None:
        _checked(actions.parse_nothing, self.body(), "stop")
        watch, _ = await self.connected_watch(cluster_id)
        started = self.extension.started
        if started.owns(watch.address):
            await started.stop(watch.address)
        else:
            self.scalable(watch)
            await self.acting(watch, control.stop(watch.connected()), "stop the cluster")
            # Its kernel still records it until its next %%task starts another: not listed.
            self.extension.stopped.add(watch.address)
        self.reply(StopResult(address=watch.address))


class RetireHandler(TaskcellHandler):
    @web.authenticated
    @authorized
    async def post(self, cluster_id: str) -> None:
        worker = _checked(actions.parse_retire, self.body())
        watch, state = await self.connected_watch(cluster_id)
        if worker not in actions.pool_workers(state["snapshot"]):
            raise web.HTTPError(
                404, f"the cluster at {watch.address} shows no running pool worker {shown(worker)}"
            )
        await self.acting(
            watch, control.retire(watch.connected(), worker), f"retire {shown(worker)}"
        )
        self.reply(RetireResult(worker=worker))


class StartWorkerHandler(TaskcellHandler):
    @web.authenticated
    @authorized
    async def post(self, cluster_id: str) -> None:
        kernel, pool = _checked(actions.parse_start_worker, self.body())
        watch, state = await self.connected_watch(cluster_id)
        shown_pool = actions.shown_pool(state["snapshot"], kernel, pool)
        if shown_pool is None:
            raise web.HTTPError(
                404,
                f"the cluster at {watch.address} shows no pool {shown(pool)} of kernel "
                f"{shown(kernel)}",
            )
        if not workers_up(shown_pool) < shown_pool["max_workers"]:
            raise web.HTTPError(
                409,
                f"pool {shown(pool)} has its {shown_pool['max_workers']} worker(s) up "
                "(max-workers): retire one first",
            )
        await self.acting(
            watch,
            control.start_worker(watch.connected(), kernel, pool),
            f"ask for a worker of pool {shown(pool)}",
        )
        self.reply(StartWorkerResult(kernel=kernel, pool=pool))


class OutputHandler(TaskcellHandler):
    @web.authenticated
    @authorized
    async def get(self, cluster_id: str, key: str) -> None:
        if len(key) > actions.MAX_KEY:
            raise web.HTTPError(400, f"a task's key is at most {actions.MAX_KEY} characters long")
        watch, _ = await self.connected_watch(cluster_id)
        found = await self.acting(
            watch, control.output(watch.connected(), key), f"read the output of {shown(key)}"
        )
        if found is None:
            raise web.HTTPError(
                404,
                f"the scheduler at {watch.address} keeps no output of {shown(key)}: its kernel "
                "has left, or later events pushed it out of the scheduler's log",
            )
        self.reply(found)


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
            nbytes = request.size
            if nbytes is None:
                nbytes = await self._measure(request)
            self.reply(planning.suggest(request, nbytes, snapshot))
        except planning.RequestError as e:
            raise web.HTTPError(400, str(e)) from None

    async def _measure(self, request: planning.SuggestRequest) -> int:
        """The files' bytes, beside the notebook, read as the contents API would."""
        assert request.files is not None and request.notebook is not None
        root = self.contents_manager.root_dir
        try:
            notebook = locate_notebook(root, request.notebook).notebook
        except ExportRequestError as e:
            raise planning.RequestError(str(e).replace("'path'", "'notebook'")) from None
        except FileNotFoundError as e:
            raise web.HTTPError(404, str(e)) from None
        hidden = bool(getattr(self.contents_manager, "allow_hidden", False))
        return await asyncio.to_thread(
            planning.measure, request.files, notebook, Path(root).resolve(), hidden
        )


def handlers(extension: ServerState) -> list[tuple[str, type, dict[str, Any]]]:
    """The URL patterns, relative to the server's base URL."""
    kwargs = {"extension": extension}
    return [
        (r"/taskcell/api/clusters/?", ClustersHandler, kwargs),
        (r"/taskcell/api/clusters/([^/]+)/?", ClusterHandler, kwargs),
        (r"/taskcell/api/clusters/([^/]+)/cancel/?", CancelHandler, kwargs),
        (r"/taskcell/api/clusters/([^/]+)/scale/?", ScaleHandler, kwargs),
        (r"/taskcell/api/clusters/([^/]+)/stop/?", StopHandler, kwargs),
        (r"/taskcell/api/clusters/([^/]+)/retire/?", RetireHandler, kwargs),
        (r"/taskcell/api/clusters/([^/]+)/start-worker/?", StartWorkerHandler, kwargs),
        (r"/taskcell/api/clusters/([^/]+)/tasks/([^/]+)/output/?", OutputHandler, kwargs),
        (r"/taskcell/api/planner/?", PlannerHandler, kwargs),
    ]
