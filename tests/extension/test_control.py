"""The cluster in the sidebar's hands, against a real Jupyter server and real Dask processes: a
cluster started, scaled and stopped through the REST API, a kernel's embedded cluster scaled
and stopped through its scheduler, its dashboard through the server, the view the server
computes, a task's output, and what is refused on a cluster taskcell did not start."""

from __future__ import annotations

import json

import pytest
from tornado.httpclient import HTTPClientError

from taskcell.extension.clusters import cluster_id
from taskcell.planner.view import snapshot_view

from .test_kernels import notebook_session

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


async def run(kernel, code: str, timeout: float = 60) -> None:
    reply = await kernel.execute_interactive(code, timeout=timeout)
    assert reply["content"]["status"] == "ok", reply["content"]


def names(state: dict) -> list[str]:
    return sorted(w["name"] for w in state["snapshot"]["workers"])


async def test_a_kernels_embedded_cluster_is_scaled_and_stopped_until_its_next_cell(
    api, jp_fetch, jp_serverapp, wait_for
):
    async with notebook_session(jp_fetch, jp_serverapp) as (_, kernel):
        await run(kernel, "%load_ext taskcell")
        await run(kernel, "%%task\nx = 1", timeout=180)  # on the embedded cluster
        (cluster,) = (await api("clusters"))["clusters"]
        cid = cluster["id"]
        assert cluster["sources"] == ["kernel"]
        state = await wait_for(cid, workers(1), timeout=90)
        assert state["control"] == {"scalable": True, "started_here": False}

        assert await post(api, "clusters", cid, "scale", body={"workers": 2}) == {"workers": 2}
        assert names(await wait_for(cid, workers(2), timeout=120)) == ["taskcell-0", "taskcell-1"]
        assert await post(api, "clusters", cid, "scale", body={"workers": 1}) == {"workers": 1}
        assert names(await wait_for(cid, workers(1), timeout=120)) == ["taskcell-0"]

        assert await post(api, "clusters", cid, "stop", body={}) == {"address": cluster["address"]}
        assert (await api("clusters"))[
            "clusters"
        ] == []  # its kernel records it until its next cell
        await run(kernel, "%%task\ny = 2", timeout=180)  # which starts another
        (again,) = (await api("clusters"))["clusters"]
        assert again["address"] != cluster["address"] and again["sources"] == ["kernel"]
        await wait_for(again["id"], workers(1), timeout=90)


def pool_workers(name: str):
    """The states of the workers the pool ``name`` shows in a state."""

    def states(state: dict) -> list[str]:
        snapshot = state["snapshot"] or {"pools": []}
        return [w["state"] for p in snapshot["pools"] if p["name"] == name for w in p["workers"]]

    return states


#: A local pool of one-thread workers with a T4, which no worker of the cluster has.
SPARE = {"spare": {"shape": {"cpu": 1, "memory": "1Gi", "gpu": "T4:1"}, "max-workers": 1}}


async def test_a_pools_worker_is_started_from_the_sidebar_up_to_max_workers(
    api, jp_fetch, jp_serverapp, wait_for, dask_processes
):
    dask_processes.worker(name="plain")
    cid = cluster_id(dask_processes.address)
    states = pool_workers("spare")
    async with notebook_session(jp_fetch, jp_serverapp) as (session, kernel):
        kernel_id = session["kernel"]["id"]
        configure = f"import dask\ndask.config.set({{'taskcell.pools': {SPARE!r}}})"
        await run(kernel, f"%load_ext taskcell\n{configure}")
        await run(kernel, f"%task_cluster {dask_processes.address}")
        await run(kernel, "%%task\nx = 1", timeout=120)  # on the plain worker: no pool's
        try:
            state = await wait_for(cid, lambda s: bool(s["snapshot"] and s["snapshot"]["pools"]))
            assert states(state) == []
            (pool,) = state["view"]["pools"]
            assert (pool["kernel"], pool["startable"]) == (kernel_id, True)
            for body, code, says in (
                ({"kernel": kernel_id, "pool": "gone"}, 404, "shows no pool 'gone' of kernel"),
                ({"kernel": "other", "pool": "spare"}, 404, "shows no pool 'spare' of kernel"),
                ({"pool": "spare"}, 400, "'kernel' must be the id of the kernel whose pool"),
                ({"kernel": kernel_id, "pool": "spare", "n": 2}, 400, "'kernel' and 'pool'"),
            ):
                refusal = await refused(jp_fetch, "clusters", cid, "start-worker", body=body)
                assert refusal[0] == code and says in refusal[1], refusal

            asked = {"kernel": kernel_id, "pool": "spare"}
            assert await post(api, "clusters", cid, "start-worker", body=asked) == asked
            state = await wait_for(cid, lambda s: states(s) == ["running"], timeout=120)
            (worker,) = state["snapshot"]["pools"][0]["workers"]
            shown = {w["name"] for w in state["snapshot"]["workers"]}
            assert shown == {"plain", worker["name"]} and worker["name"].startswith("spare-")
            assert state["view"]["pools"][0]["startable"] is False
            code, message = await refused(jp_fetch, "clusters", cid, "start-worker", body=asked)
            assert code == 409 and "has its 1 worker(s) up (max-workers)" in message
        finally:
            await run(kernel, "from taskcell.cluster import provision\nprovision.close_all()")


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
        bar = "cell-5-" + "2" * 32

        def shown(text: str, **more) -> dict:  # a display of a progress bar, or its update
            return {"key": bar, "kind": "display", "data": {"text/plain": text}, **more}

        def report() -> None:  # as taskcell.runner.remote reports a cell, on its kernel's topic
            worker = get_worker()
            for event in (
                {"key": key, "kind": "started", "worker": worker.address},
                {"key": key, "kind": "stream", "name": "stdout", "text": "reading batch 7\n"},
                {"key": key, "kind": "display", "data": {"text/plain": "<Figure>"}},
                {"key": key, "kind": "failed", "error": "ValueError: bad batch"},
                {"key": other, "kind": "failed", "error": "KeyError: 'x'", "traceback": "Tb\n"},
                shown(" 0/2", transient={"display_id": "b1"}),
                {"key": bar, "kind": "stream", "name": "stderr", "text": "\r1/3\r2/3"},
                shown(" 1/2", transient={"display_id": "b1"}, update=True),
                shown(" 2/2", transient={"display_id": "b1"}, update=True),
                {"key": bar, "kind": "stream", "name": "stderr", "text": "\r3/3\n"},
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
        # A display's updates in its place, as the notebook shows them; the \r for the
        # sidebar to draw as a terminal.
        text = (await api("clusters", cid, "tasks", bar, "output"))["text"]
        assert text == " 2/2\n\r1/3\r2/3\r3/3\n"
        # The user's traceback, where the worker sends one.
        assert (await api("clusters", cid, "tasks", other, "output"))["error"] == "Tb\n"
        code, message = await refused(jp_fetch, "clusters", cid, "tasks", "nope-1", "output")
        assert code == 404 and "keeps no output of 'nope-1'" in message
