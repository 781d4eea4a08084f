"""The few helpers a workflow module exported for the ``dask`` target calls.

A task returns one ``distributed.Future``; a cell that binds several names returns them as a
tuple, which :func:`unpack` splits into one future per name without waiting. :func:`results`
gathers what the workflow bound at the end, and :func:`run` is the module's command line.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distributed import Future

__all__ = ["results", "run", "unpack"]


def unpack(future: Future, n: int) -> tuple[Future, ...]:
    """The futures of the ``n`` items of the tuple ``future`` will hold, without waiting for it.

    Parameters
    ----------
    future
        A task's future whose value is a tuple of ``n`` items.
    n
        How many.

    Returns
    -------
    tuple of Future
        One per item; each is a small task on the cluster that picks the item.
    """
    client = future.client
    return tuple(client.submit(operator.getitem, future, i, pure=False) for i in range(n))


def results(namespace: Mapping[str, Any]) -> dict[str, Any]:
    """Wait for every future in ``namespace``; return its public names with their values.

    Parameters
    ----------
    namespace
        ``locals()`` of a workflow's ``main()``.

    Returns
    -------
    dict
        Every name not starting with ``_``, futures replaced by their values. Futures under
        private names (tasks run for their side effects) are waited for too, so their errors
        are raised here.
    """
    from distributed import Future

    pending = {name: value for name, value in namespace.items() if isinstance(value, Future)}
    values = dict(namespace)
    if pending:
        client = next(iter(pending.values())).client
        values.update(zip(pending, client.gather(list(pending.values())), strict=True))
    return {name: value for name, value in values.items() if not name.startswith("_")}


def run(main: Callable[[], Any], scheduler: str | None = None) -> Any:
    """Run a workflow's ``main()`` on ``scheduler``, or on a cluster started on this machine.

    Parameters
    ----------
    main
        The workflow.
    scheduler
        A Dask scheduler address (``tcp://host:8786``); None uses Dask's ``scheduler-address``
        configuration if set, else starts taskcell's embedded cluster (sized by
        ``taskcell.embedded-cluster.*``) and stops it afterwards.

    Returns
    -------
    object
        What ``main()`` returns.
    """
    from taskcell.cluster import connect

    try:
        if scheduler:
            connect.use_address(scheduler)
        return main()
    finally:
        connect.close()
