"""A real Jupyter server (pytest-jupyter) with the taskcell extension, and its HTTP helpers.

pytest-jupyter's fixtures and its coroutine-test hooks are imported here rather than listed in
``pytest_plugins`` (pytest allows that only in the root conftest), so they apply to this folder
alone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
from conftest import free_port
from pytest_jupyter.jupyter_server import *  # noqa: F403  (fixtures and hooks, this folder only)
from traitlets.config import Config


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

    async def wait(cluster_id: str, predicate: Callable[[dict], bool], timeout: float = 30):
        deadline = time.monotonic() + timeout
        state = await api("clusters", cluster_id)
        while not predicate(state):
            left = deadline - time.monotonic()
            assert left > 0, f"no state matched within {timeout} s; last: {state}"
            state = await api(
                "clusters",
                cluster_id,
                params={"since": state["version"], "timeout": min(left, 10)},
            )
        return state

    return wait
