"""``POST /taskcell/api/clusters/<id>/cancel``: what a careless or hostile browser sends is a 4xx
with a JSON message; a task the snapshot shows is stopped, against real ``dask scheduler`` and
``dask worker`` processes, and lands among the snapshot's ended tasks as cancelled."""

from __future__ import annotations

import json
import uuid

import pytest
from tornado.httpclient import HTTPClientError

from taskcell.extension.actions import MAX_KEY
from taskcell.extension.clusters import cluster_id


async def cancel(jp_fetch, cid: str, body: str) -> tuple[int, dict]:
    """POST ``body`` as is; the status and the decoded JSON reply, whatever the status."""
    try:
        response = await jp_fetch(
            "taskcell", "api", "clusters", cid, "cancel", method="POST", body=body
        )
    except HTTPClientError as e:
        return e.code, json.loads(e.response.body)
    return response.code, json.loads(response.body)


def lists(key: str, part: str):
    """Whether a ClusterState's snapshot lists the task ``key`` in ``part``."""
    return lambda s: any(t["key"] == key for t in (s["snapshot"] or {}).get(part, []))


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("", "must be a JSON object, got NoneType"),
        ("[1]", "must be a JSON object, got list"),
        ("{not json", "must be JSON"),
        ("{}", "'key' must be a task's key (a string), got None"),
        ('{"key": 7}', "'key' must be a task's key (a string), got 7"),
        ('{"key": "  "}', "'key' must be a task's key (a string), got '  '"),
        (json.dumps({"key": "k" * (MAX_KEY + 1)}), f"at most {MAX_KEY} characters"),
        ('{"key": "a", "force": true}', "unknown field(s) 'force'; cancel takes 'key' alone"),
    ],
    ids=["empty", "list", "not-json", "no-key", "number", "blank", "too-long", "extra-field"],
)
async def test_a_bad_body_is_a_400_naming_what_is_wrong(jp_fetch, extension, body, words):
    status, reply = await cancel(jp_fetch, cluster_id("tcp://127.0.0.1:1"), body)
    assert status == 400
    assert words in reply["message"]


async def test_an_unknown_cluster_is_a_404(jp_fetch, extension):
    status, reply = await cancel(jp_fetch, "not-a-cluster", '{"key": "a"}')
    assert status == 404
    assert "no cluster with id 'not-a-cluster'" in reply["message"]


class TestUnreachableCluster:
    @pytest.fixture
    def address(self, unreachable_address) -> str:
        return unreachable_address

    @pytest.fixture
    def taskcell_config(self, address) -> dict:
        return {"scheduler_addresses": [address]}

    async def test_is_a_409_that_says_the_server_is_not_connected(self, jp_fetch, address):
        status, reply = await cancel(jp_fetch, cluster_id(address), '{"key": "a"}')
        assert status == 409
        assert f"not connected to the scheduler at {address}" in reply["message"]


@pytest.mark.slow
class TestLiveCluster:
    @pytest.fixture
    def taskcell_config(self, dask_processes) -> dict:
        dask_processes.worker("--resources", "GPU=2", name="gpu-box")
        return {"scheduler_addresses": [dask_processes.address]}

    async def test_only_a_task_the_snapshot_shows_can_be_cancelled(
        self, jp_fetch, wait_for, dask_processes
    ):
        cid = cluster_id(dask_processes.address)
        await wait_for(cid, lambda s: s["status"] == "connected" and s["snapshot"])
        status, reply = await cancel(jp_fetch, cid, '{"key": "<b>no-such-task</b>"}')
        assert status == 404
        assert "shows no running or waiting task '<b>no-such-task</b>'" in reply["message"]

    async def test_a_waiting_task_is_cancelled_and_listed_as_cancelled(
        self, jp_fetch, wait_for, dask_processes
    ):
        from distributed import Client

        cid = cluster_id(dask_processes.address)
        key = f"too-big-{uuid.uuid4().hex}"
        async with Client(dask_processes.address, asynchronous=True) as client:
            future = client.submit(sum, [1], key=key, resources={"GPU": 3})
            await wait_for(cid, lists(key, "queue"))
            status, reply = await cancel(jp_fetch, cid, json.dumps({"key": key}))
            assert (status, reply) == (200, {"key": key, "was": "waiting"})
            state = await wait_for(cid, lists(key, "recent"))
            assert future.cancelled()
        assert state["snapshot"]["queue"] == [] and state["snapshot"]["queued"] == 0
        (ended,) = state["snapshot"]["recent"]
        assert (ended["name"], ended["state"], ended["worker"]) == ("too-big", "cancelled", None)
