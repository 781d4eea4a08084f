"""A real Jupyter server (pytest-jupyter) with the taskcell extension, and its HTTP helpers.

pytest-jupyter's fixtures and its coroutine-test hooks are imported here rather than listed in
``pytest_plugins`` (pytest allows that only in the root conftest), so they apply to this folder
alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from conftest import free_port
from pytest_jupyter.jupyter_server import *  # noqa: F403  (fixtures and hooks, this folder only)
from traitlets.config import Config
from waiting import PATIENCE, eventually_async


@pytest.fixture
def taskcell_config() -> dict:
    """Extra ``TaskcellExtension`` settings; tests override this fixture."""
    return {}


@pytest.fixture
def unreachable_address() -> str:
    """A scheduler address nothing listens on."""
    return f"tcp://127.0.0.1:{free_port()}"


@pytest.fixture
def jp_server_config(taskcell_config: dict) -> Config:
    return Config(
        {
            "ServerApp": {"jpserver_extensions": {"taskcell.extension": True}},
            "TaskcellExtension": {"connect_timeout": 3.0, "retry_interval": 0.5, **taskcell_config},
        }
    )


@pytest.fixture
def extension(jp_serverapp, jp_asyncio_loop):
    """The server's TaskcellExtension; its subscriptions are closed before the test's Dask
    processes stop (pytest-jupyter cleans the server up only after every other fixture)."""
    (app,) = jp_serverapp.extension_manager.extension_apps["taskcell.extension"]
    yield app
    jp_asyncio_loop.run_until_complete(app.hub.close())


@pytest.fixture
def api(jp_fetch, extension) -> Callable:
    """``await api("clusters", ...)`` -> the decoded JSON of ``/taskcell/api/clusters``."""

    async def call(*parts: str, **kwargs):
        response = await jp_fetch("taskcell", "api", *parts, **kwargs)
        return json.loads(response.body)

    return call


@pytest.fixture
def wait_for(api) -> Callable:
    """Long-poll a cluster until ``predicate(state)`` holds; the last state otherwise fails."""

    async def wait(
        cluster_id: str, predicate: Callable[[dict], bool], timeout: float = PATIENCE
    ) -> dict:
        state: dict | None = None

        async def next_state() -> dict:
            nonlocal state
            since = {"since": state["version"], "timeout": 10} if state else {}
            state = await api("clusters", cluster_id, params=since)
            return state

        return await eventually_async(
            next_state, f"a state of {cluster_id} that matches", timeout, holds=predicate, every=0
        )

    return wait
