"""The cluster in the sidebar's hands, against a real Jupyter server and real Dask processes: a
cluster started, scaled and stopped through the REST API, its dashboard through the server, the
view the server computes, a task's output, and what is refused on a cluster taskcell did not
start."""

from __future__ import annotations

import json

import pytest
from tornado.httpclient import HTTPClientError

from taskcell.extension.clusters import cluster_id
from taskcell.planner.view import snapshot_view

pytestmark = pytest.mark.slow


async def post(api, *parts: str, body: dict) -> dict:
    return await api(*parts, method="POST", body=json.dumps(body))


async def refused(jp_fetch, *parts: str, body: dict | None = None) -> tuple[int, str]:
    kwargs = {"method": "POST", "body": json.dumps(body)} if body is not None else {}
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch("taskcell", "api", *parts, **kwargs)
    return info.value.code, json.loads(info.value.response.body)["message"]


def workers(n: int):
    def check(state: dict) -> bool:
        snapshot = state["snapshot"]
        return state["status"] == "connected" and bool(snapshot) and len(snapshot["workers"]) == n

    return check


async def test_a_cluster_started_here_is_scaled_shown_through_the_server_and_stopped(
    api, jp_fetch, wait_for, extension
):
    started = await post(api, "clusters", body={})
    cid = started["id"]
    assert cid == cluster_id(started["address"])
    listed = (await api("clusters"))["clusters"]
    assert [(c["id"], c["sources"]) for c in listed] == [(cid, ["server"])]

    state = await wait_for(cid, workers(1), timeout=90)
    assert state["control"] == {"scalable": True, "started_here": True}
    # The view is the notebook panel's, computed by the server on the scheduler's clock.
    view = state["view"]
    assert view == snapshot_view(
        {**state["snapshot"], "dashboard": state["dashboard"]}, view["now"]
    )
    assert view["summary"].startswith("1 worker · 0 running") and view["worker_count"] == 1
    assert [w["name"] for g in view["groups"] for w in g["workers"]] == ["taskcell-0"]
    # What the sidebar asks for: the view alone.
    drawn = await api("clusters", cid, params={"snapshot": "0"})
    assert drawn["snapshot"] is None and drawn["view"]["summary"] == view["summary"]
    bad = await jp_fetch(
        "taskcell", "api", "clusters", cid, params={"snapshot": "no"}, raise_error=False
    )
    assert bad.code == 400
    assert "snapshot= must be 0 or 1, got 'no'" in json.loads(bad.body)["message"]

    # Its dashboard, and a plot of it, through the Jupyter server.
    assert state["dashboard"] == f"taskcell/dashboard/{cid}/status"
    page = await jp_fetch(*state["dashboard"].split("/"))
    assert page.code == 200 and b"bokeh" in page.body.lower()
    plots = json.loads((await jp_fetch("taskcell", "dashboard", cid, "individual-plots.json")).body)
    assert plots["Individual Task Stream"] == "/individual-task-stream"
    stream = await jp_fetch("taskcell", "dashboard", cid, "individual-task-stream")
    assert stream.code == 200

    assert await post(api, "clusters", cid, "scale", body={"workers": 2}) == {"workers": 2}
    state = await wait_for(cid, workers(2), timeout=90)
    assert state["view"]["summary"].startswith("2 workers")

    assert await post(api, "clusters", cid, "stop", body={}) == {"address": started["address"]}
    assert (await api("clusters"))["clusters"] == []


class TestAClusterTaskcellDidNotStart:
    @pytest.fixture
    def taskcell_config(self, dask_processes) -> dict:
        dask_processes.worker(name="plain")
        return {"scheduler_addresses": [dask_processes.address]}

    async def test_is_neither_scaled_nor_stopped_nor_its_workers_retired(
        self, jp_fetch, wait_for, dask_processes
    ):
        cid = cluster_id(dask_processes.address)
        state = await wait_for(cid, workers(1))
        assert state["control"] == {"scalable": False, "started_here": False}
        for action, body in (("scale", {"workers": 3}), ("stop", {})):
            code, message = await refused(jp_fetch, "clusters", cid, action, body=body)
            assert code == 409 and "was not started by taskcell" in message
        (worker,) = state["snapshot"]["workers"]
        code, message = await refused(
            jp_fetch, "clusters", cid, "retire", body={"worker": worker["address"]}
        )
        assert code == 404 and "shows no running pool worker" in message
        assert len((await wait_for(cid, workers(1)))["snapshot"]["workers"]) == 1

    async def test_a_tasks_output_is_read_from_what_its_worker_reported(
        self, api, jp_fetch, wait_for, dask_processes
    ):
        from distributed import Client, get_worker

        cid = cluster_id(dask_processes.address)
        (worker,) = (await wait_for(cid, workers(1)))["snapshot"]["workers"]
        key, other = "cell-3-" + "0" * 32, "cell-4-" + "1" * 32

        def report() -> None:  # as taskcell.runner.remote reports a cell, on its kernel's topic
            worker = get_worker()
            for event in (
                {"key": key, "kind": "started", "worker": worker.address},
                {"key": key, "kind": "stream", "name": "stdout", "text": "reading batch 7\n"},
                {"key": key, "kind": "display", "data": {"text/plain": "<Figure>"}},
                {"key": key, "kind": "failed", "error": "ValueError: bad batch"},
                {"key": other, "kind": "failed", "error": "KeyError: 'x'", "traceback": "Tb\n"},
            ):
                worker.log_event("kernel-client-1", event)

        async with Client(dask_processes.address, asynchronous=True) as client:
            await client.submit(report, pure=False)
        assert await api("clusters", cid, "tasks", key, "output") == {
            "key": key,
            "worker": worker["address"],
            "text": "reading batch 7\n<Figure>\n",
            "truncated": False,
            "error": "ValueError: bad batch",
        }
        # The user's traceback, where the worker sends one.
        assert (await api("clusters", cid, "tasks", other, "output"))["error"] == "Tb\n"
        code, message = await refused(jp_fetch, "clusters", cid, "tasks", "nope-1", "output")
        assert code == 404 and "keeps no output of 'nope-1'" in message
