"""The Dask dashboard through the Jupyter server as a browser uses it, against a real server and a
real ``dask scheduler`` with its dashboard: Info pages (a worker's too) with every stylesheet,
script and image they reference, a Bokeh panel's websocket that ends with a close and a reason
when its cluster stops, a 502 for its page then, and a 404 for a websocket to an unknown cluster,
none of which leaves a traceback in the server's log."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest
from conftest import DaskProcesses
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest, HTTPResponse
from tornado.websocket import WebSocketClientConnection, WebSocketClosedError, websocket_connect
from waiting import PATIENCE, eventually_async

from taskcell.extension.clusters import cluster_id

pytestmark = pytest.mark.slow


@pytest.fixture
def dashboard_cluster() -> Iterator[DaskProcesses]:
    cluster = DaskProcesses(dashboard=True)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def taskcell_config(dashboard_cluster) -> dict:
    return {"scheduler_addresses": [dashboard_cluster.address]}


class Collected(logging.Handler):
    """Every record logged, formatted with its traceback."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    def text(self) -> str:
        return "\n".join(self.lines)


@pytest.fixture
def server_log(jp_serverapp) -> Iterator[Collected]:
    """What the server logs: its own log, which tornado's loggers feed and which does not
    propagate, and the root logger's (asyncio's "Task exception was never retrieved")."""
    collected = Collected()
    loggers = [jp_serverapp.log, logging.getLogger()]
    for logger in loggers:
        logger.addHandler(collected)
    try:
        yield collected
    finally:
        for logger in loggers:
            logger.removeHandler(collected)


def assert_no_traceback(log: Collected) -> None:
    text = log.text()
    for sign in ("Traceback", "Uncaught exception", "never retrieved", "Exception in callback"):
        assert sign not in text, text


@pytest.fixture
def dashboard_url(jp_http_port, jp_base_url, extension, wait_for, dashboard_cluster):
    """``await dashboard_url()`` -> the relay's absolute URL path once the server knows the
    cluster's dashboard (``/a%40b/taskcell/dashboard/<id>/``)."""

    async def url() -> str:
        cid = cluster_id(dashboard_cluster.address)
        state = await wait_for(cid, lambda s: s["status"] == "connected" and bool(s["dashboard"]))
        assert state["dashboard"] == f"taskcell/dashboard/{cid}/status"
        return f"{jp_base_url}taskcell/dashboard/{cid}/"

    return url


@pytest.fixture
def get(http_server_client, jp_http_port, jp_auth_header):
    """``await get("/a%40b/...")`` -> the server's response to a signed-in browser's GET."""

    async def fetch(path: str) -> HTTPResponse:
        return await AsyncHTTPClient().fetch(
            f"http://localhost:{jp_http_port}{path}",
            headers=jp_auth_header,
            raise_error=False,
            follow_redirects=False,
        )

    return fetch


class References(HTMLParser):
    """The stylesheets, scripts and images a page loads, and the pages it links to, as written
    in it."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "link" and named.get("href"):
            self.found.append(named["href"] or "")
        elif tag in ("script", "img") and named.get("src"):
            self.found.append(named["src"] or "")
        elif tag == "a" and named.get("href"):
            self.links.append(named["href"] or "")


def references(page: bytes) -> list[str]:
    parser = References()
    parser.feed(page.decode())
    return parser.found


def links(page: bytes) -> list[str]:
    parser = References()
    parser.feed(page.decode())
    return parser.links


async def assert_loads_whole(get, base: str, page: str) -> bytes:
    """Fetch ``page`` (under the relay's ``base``) and everything it loads from the dashboard;
    each must be a 200 under ``base``. Returns the page."""
    response = await get(base + page)
    assert response.code == 200, (page, response.code, response.body[:500])
    for ref in references(response.body):
        if urlsplit(ref).netloc:
            continue  # a CDN's (Bulma's stylesheet), which the browser fetches itself
        resolved = urlsplit(urljoin(base + page, ref))._replace(scheme="", netloc="").geturl()
        assert resolved.startswith(base), (page, ref, resolved)
        loaded = await get(resolved)
        assert loaded.code == 200 and loaded.body, (page, ref, resolved, loaded.code)
    return response.body


@pytest.mark.parametrize(
    "page",
    ["info/main/workers.html", "info/main/logs.html", "status", "individual-task-stream"],
    ids=["info-workers", "info-logs", "status", "task-stream-panel"],
)
async def test_a_dashboard_page_loads_everything_it_references_through_the_server(
    page, dashboard_url, get, server_log
):
    base = await dashboard_url()
    body = await assert_loads_whole(get, base, page)
    assert page.startswith("individual") or any(".css" in r for r in references(body))
    assert_no_traceback(server_log)


async def test_a_workers_info_pages_load_whole_through_the_server(
    dashboard_url, get, dashboard_cluster, server_log
):
    dashboard_cluster.worker(name="info-worker")
    base = await dashboard_url()

    async def worker_links() -> list[str]:
        page = await get(base + "info/main/workers.html")
        return [ref for ref in links(page.body) if ref.startswith("../worker/")]

    (worker_page,) = await eventually_async(worker_links, "the worker on the Info page")
    # The worker's address is one escaped path segment (``tcp%3A%2F%2F...``), no folders.
    await assert_loads_whole(get, base, "info/worker/" + worker_page.removeprefix("../worker/"))
    assert_no_traceback(server_log)


def bokeh_token(page: bytes) -> str:
    """The session token a Bokeh page hands its websocket."""
    match = re.search(rb'"token"\s*:\s*"([^"]+)"', page)
    assert match, page[:2000]
    return match.group(1).decode()


@pytest.fixture
def panel_socket(http_server_client, jp_http_port, jp_auth_header) -> Callable:
    """``await panel_socket(base, token)``: the Task stream panel's websocket through the
    server, opened as Bokeh's client opens it."""

    async def connect(base: str, token: str) -> WebSocketClientConnection:
        request = HTTPRequest(
            f"ws://localhost:{jp_http_port}{base}individual-task-stream/ws",
            headers={**jp_auth_header, "Origin": f"http://localhost:{jp_http_port}"},
            connect_timeout=PATIENCE,
        )
        return await websocket_connect(request, subprotocols=["bokeh", token])

    return connect


async def closed(ws: WebSocketClientConnection) -> None:
    """Read ``ws`` until the server closes it (``read_message`` then gives None)."""

    async def drained() -> bool:
        return await asyncio.wait_for(ws.read_message(), PATIENCE) is None

    await eventually_async(drained, "the relayed websocket to close")


async def test_a_panel_of_a_cluster_that_stops_is_closed_with_a_reason_and_no_traceback(
    dashboard_url, get, panel_socket, dashboard_cluster, server_log
):
    base = await dashboard_url()
    page = await get(base + "individual-task-stream")
    assert page.code == 200
    token = bokeh_token(page.body)
    ws = await panel_socket(base, token)
    assert await ws.read_message() is not None  # Bokeh's first message, relayed

    dashboard_cluster.stop_scheduler()
    with contextlib.suppress(WebSocketClosedError):
        await ws.write_message('{"panel": "still here"}')  # to a dashboard that is gone
    await closed(ws)
    assert ws.close_code is not None, "closed without a close frame"

    # The panel opened again on the stopped cluster: its page a 502, its socket closed saying why.
    again = await get(base + "individual-task-stream")
    assert again.code == 502, again.code
    assert b"does not answer" in again.body
    reopened = await panel_socket(base, token)
    await closed(reopened)
    assert reopened.close_code == 1001
    assert "does not answer" in (reopened.close_reason or ""), reopened.close_reason
    assert_no_traceback(server_log)


async def test_a_websocket_to_an_unknown_cluster_is_refused_before_the_handshake(
    jp_ws_fetch, jp_http_port, extension, server_log
):
    with pytest.raises(HTTPClientError) as refused:
        await jp_ws_fetch(
            "taskcell",
            "dashboard",
            "nope",
            "status",
            "ws",
            headers={"Origin": f"http://localhost:{jp_http_port}"},
        )
    assert refused.value.code == 404
    assert_no_traceback(server_log)
