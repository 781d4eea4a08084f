"""Submit one call to Dask with the resources of its request, after checking it can run."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from taskcell import config
from taskcell.cluster.connect import answered_workers, departed, forget_workers, on_connected
from taskcell.cluster.feasibility import check_feasible
from taskcell.cluster.mapping import WorkerCapacity, dask_resources
from taskcell.cluster.pools import choose, configured_pools
from taskcell.cluster.provision import announce, claim, leaving
from taskcell.cluster.provision_core import Placement
from taskcell.cluster.spellings import align
from taskcell.errors import InfeasibleError
from taskcell.spec import Resources, check_limits

if TYPE_CHECKING:
    from distributed import Client, Future


def plan(request: Resources, client: Client) -> Placement:
    """Where ``request`` can run; :class:`InfeasibleError` if no live worker, and no worker of
    a pool in ``taskcell.pools``, can run it.

    The platform profile in ``taskcell.platform`` (e.g. ``latch``) is checked first. A request
    that looks infeasible against the cached view of the workers is checked again against a
    fresh one before failing, so a worker that just joined is seen. A request no live worker
    can run goes to the first pool whose workers can, with its resources spelled so that only
    such a worker runs it; the error, when no pool can either, says what each pool lacks.
    """
    platform = config.platform()
    if platform is not None:
        check_limits(request, platform)
    gone = leaving(client)  # retired by a pool, though a cached view may still list them
    workers = [w for w in answered_workers(client) if w.address not in gone]
    resources = dask_resources(request, workers)
    try:
        able = check_feasible(request, resources, _aligned(client, resources, workers))
    except InfeasibleError:
        workers = [w for w in answered_workers(client, refresh=True) if w.address not in gone]
        resources = dask_resources(request, workers)
        try:
            able = check_feasible(request, resources, _aligned(client, resources, workers))
        except InfeasibleError as e:
            try:
                pool = choose(request, workers, configured_pools(), e)
            except InfeasibleError as refused:
                raise _with_departed(refused, departed(client, workers)) from None
            return Placement(dask_resources(request, [*workers, pool.capacity()]), [], pool)
    return Placement(resources, able)


def _with_departed(error: InfeasibleError, gone: list[str]) -> InfeasibleError:
    """``error``, saying which workers left since this kernel saw them, and what to do."""
    if not gone:
        return error
    shown = ", ".join(gone[:3]) + (f" and {len(gone) - 3} more" if len(gone) > 3 else "")
    return InfeasibleError(
        f"{error} Worker(s) this kernel saw before have left: {shown} (a Dask worker shuts "
        f"itself down once it has lost its scheduler for longer than its death timeout: start "
        f"it again with the scheduler's address, `dask worker` or `taskcell worker`)."
    )


def _aligned(
    client: Client, resources: dict[str, float], workers: list[WorkerCapacity]
) -> list[WorkerCapacity]:
    """``workers``, each advertising ``resources`` as spelled there where it used another case
    (see :mod:`taskcell.cluster.spellings`); the cached view is dropped when one changed."""
    aligned = align(client, resources, workers)
    if aligned != workers:
        forget_workers(client)
    return aligned


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
    """``client.submit(fn, *args, **kwargs)`` under ``request``, with a unique key; a worker of
    a pool is started for it when no live worker can run it.

    The way in of the Python API and of exported notebooks: the pools are announced on each
    scheduler they connect to from here on, as the extension has them announced once loaded.
    """
    on_connected(announce)  # once: registering again does nothing
    placement = plan(request, client)
    future = client.submit(
        fn,
        *args,
        key=unique_key(name),
        resources=placement.resources or None,
        retries=retries,
        pure=False,
        **kwargs,
    )
    claim(client, placement, future)
    return future


#: The annotation naming the ``%%task --graph`` cell a graph's task came from; the occupancy
#: plugin shows such a task under the cell's name.
CELL_ANNOTATION = "taskcell_cell"
