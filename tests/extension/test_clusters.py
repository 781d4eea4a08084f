"""The cluster endpoints against a real Jupyter server and real ``dask scheduler``/``dask worker``
processes: listing, snapshots, long polls that wake on a task, and schedulers that are not
there or go away."""

from __future__ import annotations

import asyncio

import pytest

from taskcell.extension.clusters import cluster_id
from taskcell.extension.handlers import MAX_WAIT

pytestmark = pytest.mark.slow


def use(state: dict, worker: str, resource: str) -> dict | None:
    """The ResourceUse of ``resource`` on the worker named ``worker`` in a ClusterState."""
    snapshot = state["snapshot"] or {"workers": []}
    for w in snapshot["workers"]:
        if w["name"] == worker:
            return next((u for u in w["resources"] if u["resource"] == resource), None)
    return None


def holder(event: str):
    """A task body that holds its resources until ``event`` is set (pickled by value)."""

    def hold() -> None:
        from distributed import Event

        Event(event).wait(600)

    return hold


def gpus_running(worker: str, amount: float):
    def check(state: dict) -> bool:
        found = use(state, worker, "GPU")
        return state["status"] == "connected" and found is not None and found["running"] == amount

    return check


class TestConfiguredCluster:
    @pytest.fixture
    def taskcell_config(self, dask_processes) -> dict:
        dask_processes.worker("--resources", "GPU=2", name="gpu-box")
        # Spelled without the scheme, as people type it: the server lists it as Dask records it.
        return {"scheduler_addresses": [dask_processes.address.removeprefix("tcp://")]}

    async def test_is_listed_with_its_source(self, api, dask_processes):
        listed = await api("clusters")
        assert listed == {
            "clusters": [
                {
                    "id": cluster_id(dask_processes.address),
                    "address": dask_processes.address,
                    "sources": ["config"],
                    "notebooks": [],
                    "kernels": [],
                    "status": None,
                }
            ]
        }

    async def test_snapshot_follows_a_gpu_task_from_start_to_end(
        self, api, wait_for, dask_processes
    ):
        from distributed import Client, Event

        cid = cluster_id(dask_processes.address)
        idle = await wait_for(cid, gpus_running("gpu-box", 0))
        assert use(idle, "gpu-box", "GPU") == {
            "resource": "GPU",
            "total": 2,
            "running": 0,
            "assigned": 0,
        }
        assert (await api("clusters"))["clusters"][0]["status"] == "connected"

        async with Client(dask_processes.address, asynchronous=True) as client:
            held = f"held-{cid}"
            future = client.submit(holder(held), resources={"GPU": 1}, pure=False)
            busy = await wait_for(cid, gpus_running("gpu-box", 1))
            worker = next(w for w in busy["snapshot"]["workers"] if w["name"] == "gpu-box")
            assert [t["state"] for t in worker["tasks"]] == ["running"]
            assert worker["tasks"][0]["request"] == {"GPU": 1}
            await Event(held, client=client).set()
            await future
            done = await wait_for(cid, gpus_running("gpu-box", 0))
        assert done["version"] > busy["version"] > idle["version"]

    async def test_a_long_poll_waits_for_the_next_change_or_its_timeout(
        self, api, wait_for, dask_processes
    ):
        from distributed import Client, Event

        cid = cluster_id(dask_processes.address)
        state = await wait_for(cid, gpus_running("gpu-box", 0))
        again = await api("clusters", cid, params={"since": state["version"], "timeout": 1})
        assert again["version"] == state["version"]  # nothing changed: its timeout answered

        # A version this watch never had (a browser from before a server restart) is answered
        # at once: long before the poll's own timeout, with nothing changing meanwhile.
        other = api("clusters", cid, params={"since": state["version"] + 100, "timeout": MAX_WAIT})
        other = await asyncio.wait_for(other, MAX_WAIT / 2)
        assert other["version"] == state["version"]

        # A poll that is waiting answers with the change that comes.
        waiting = asyncio.ensure_future(
            api("clusters", cid, params={"since": state["version"], "timeout": MAX_WAIT})
        )
        async with Client(dask_processes.address, asynchronous=True) as client:
            held = f"polled-{cid}"
            future = client.submit(holder(held), resources={"GPU": 1}, pure=False)
            changed = await asyncio.wait_for(waiting, MAX_WAIT / 2)
            assert changed["version"] > state["version"]
            await Event(held, client=client).set()
            await future

    async def test_many_tabs_share_one_subscription(self, api, wait_for, dask_processes, extension):
        cid = cluster_id(dask_processes.address)
        state = await wait_for(cid, gpus_running("gpu-box", 0))
        polls = [
            api("clusters", cid, params={"since": state["version"], "timeout": 1}) for _ in range(8)
        ]
        await asyncio.gather(*polls)
        assert list(extension.hub.statuses()) == [cid]

    async def test_the_scheduler_going_away_is_a_state_not_an_error(
        self, api, wait_for, dask_processes
    ):
        cid = cluster_id(dask_processes.address)
        await wait_for(cid, gpus_running("gpu-box", 0))
        dask_processes.scheduler.kill()  # the scheduler vanishes; its worker is still up
        gone = await wait_for(cid, lambda s: s["status"] == "unreachable", timeout=30)
        assert dask_processes.address in gone["message"]
        # The last snapshot stays, for the sidebar to show dimmed.
        assert use(gone, "gpu-box", "GPU")["total"] == 2
        listed = await api("clusters")
        assert listed["clusters"][0]["status"] == "unreachable"


class TestUnreachableCluster:
    @pytest.fixture
    def address(self, unreachable_address) -> str:
        return unreachable_address

    @pytest.fixture
    def taskcell_config(self, address) -> dict:
        return {"scheduler_addresses": [address]}

    async def test_reports_unreachable_with_the_address(self, wait_for, address):
        state = await wait_for(cluster_id(address), lambda s: s["status"] != "connecting")
        assert state["status"] == "unreachable"
        assert state["message"].startswith(f"cannot reach the scheduler at {address}")
        assert state["snapshot"] is None
