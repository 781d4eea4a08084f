"""Submit one call to Dask with the resources of its request, after checking it can run."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from taskcell import config
from taskcell.cluster.connect import live_workers
from taskcell.cluster.feasibility import check_feasible
from taskcell.cluster.mapping import WorkerCapacity, dask_resources
from taskcell.errors import InfeasibleError
from taskcell.spec import PROFILES, Resources, check_limits

if TYPE_CHECKING:
    from distributed import Client, Future


@dataclass(frozen=True)
class Placement:
    """The Dask ``resources=`` of a request and the live workers able to run it."""

    resources: dict[str, float]
    workers: list[WorkerCapacity]


def plan(request: Resources, client: Client) -> Placement:
    """Where ``request`` can run; :class:`InfeasibleError` if no live worker can run it.

    The platform profile in ``taskcell.platform`` (e.g. ``latch``) is checked first. A request
    that looks infeasible against the cached view of the workers is checked again against a
    fresh one before failing, so a worker that just joined is seen.
    """
    platform = config.get("platform")
    if platform:
        check_limits(request, PROFILES[platform])
    workers = live_workers(client)
    resources = dask_resources(request, workers)
    try:
        able = check_feasible(request, resources, workers)
    except InfeasibleError:
        workers = live_workers(client, refresh=True)
        resources = dask_resources(request, workers)
        able = check_feasible(request, resources, workers)
    return Placement(resources, able)


def unique_key(name: str) -> str:
    """A fresh Dask key: resources apply only to new keys, so every call needs its own."""
    return f"{name}-{uuid.uuid4().hex}"


def submit(
    client: Client,
    fn: Callable[..., Any],
    *args: Any,
    request: Resources,
    name: str,
    retries: int = 0,
    **kwargs: Any,
) -> Future:
    """``client.submit(fn, *args, **kwargs)`` under ``request``, with a unique key."""
    placement = plan(request, client)
    return client.submit(
        fn,
        *args,
        key=unique_key(name),
        resources=placement.resources or None,
        retries=retries,
        pure=False,
        **kwargs,
    )
