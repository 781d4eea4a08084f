"""Kernels that use taskcell, as the server sees them: through the registry and its sessions,
never by running code in the kernel, so a kernel busy in a long cell is listed all the same."""

from __future__ import annotations

import contextlib
import json

import pytest
from waiting import eventually_async

from taskcell.cluster import registry
from taskcell.extension.clusters import cluster_id

pytestmark = pytest.mark.slow

ADDRESS = "tcp://127.0.0.1:1"  # never connected to: listing a cluster does not touch it


@contextlib.asynccontextmanager
async def notebook_session(jp_fetch, jp_serverapp):
    """A notebook session with a real kernel, and a client to run code in that kernel."""
    body = {
        "path": "work/train.ipynb",
        "type": "notebook",
        "name": "train.ipynb",
        "kernel": {"name": "python3"},
    }
    reply = await jp_fetch("api", "sessions", method="POST", body=json.dumps(body))
    session = json.loads(reply.body)
    client = jp_serverapp.kernel_manager.get_kernel(session["kernel"]["id"]).client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=60)
        yield session, client
    finally:
        client.stop_channels()
        await jp_fetch("api", "sessions", session["id"], method="DELETE")


async def run(client, code: str) -> None:
    reply = await client.execute_interactive(code, timeout=60)
    assert reply["content"]["status"] == "ok", reply["content"]


async def test_a_busy_kernel_still_shows_its_notebook_and_cluster(
    api, jp_fetch, jp_serverapp, tmp_path
):
    async with notebook_session(jp_fetch, jp_serverapp) as (session, client):
        await busy_kernel_is_listed(api, jp_fetch, session, client, tmp_path / "release")


async def busy_kernel_is_listed(api, jp_fetch, session: dict, client, release) -> None:
    kernel_id = session["kernel"]["id"]
    # What taskcell.cluster.connect does when the kernel first connects to a scheduler.
    await run(client, f"from taskcell.cluster import registry; registry.record({ADDRESS!r})")
    # A cell that runs until the test releases it: meanwhile the kernel answers nothing.
    client.execute(
        f"import os, time\nwhile not os.path.exists({str(release)!r}):\n    time.sleep(0.05)"
    )

    async def execution_state() -> str:
        return json.loads((await jp_fetch("api", "kernels", kernel_id)).body)["execution_state"]

    await eventually_async(execution_state, "the kernel busy", holds=lambda s: s == "busy")
    listed = await api("clusters")
    assert await execution_state() == "busy"  # listed while the cell still held the kernel
    release.touch()
    assert listed == {
        "clusters": [
            {
                "id": cluster_id(ADDRESS),
                "address": ADDRESS,
                "sources": ["kernel"],
                "notebooks": [
                    {"path": "work/train.ipynb", "name": "train.ipynb", "kernel_id": kernel_id}
                ],
                "kernels": [kernel_id],
                "status": None,
            }
        ]
    }


async def test_records_of_kernels_this_server_does_not_run_are_ignored(api, monkeypatch):
    monkeypatch.setattr(registry, "this_kernel_id", lambda: "0000-gone")
    registry.record("tcp://127.0.0.1:2")
    assert registry.recorded() == {"0000-gone": "tcp://127.0.0.1:2"}
    assert await api("clusters") == {"clusters": []}
