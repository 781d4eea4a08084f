"""Workers that spell a resource in another case advertise taskcell's spelling too.

Dask matches resource names exactly, and lower-cases the ones set from the environment
(``DASK_DISTRIBUTED__WORKER__RESOURCES__GPU=1`` advertises ``gpu``), so one worker started with
``--resources GPU=1`` and another with ``gpu=1`` would never both serve one request. Before a
request is submitted, each worker that has one of its resources under another spelling is asked
to advertise the requested spelling as well, with the same amount
(``Worker.set_resources``); its own spelling stays, for code that asks for it. Dask counts the
two spellings apart, so a task asking for ``gpu`` and one asking for ``GPU`` may share a GPU.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from taskcell.cluster.mapping import WorkerCapacity, aliases

if TYPE_CHECKING:
    from distributed import Client


def align(
    client: Client, resources: Mapping[str, float], workers: Sequence[WorkerCapacity]
) -> list[WorkerCapacity]:
    """Have every worker that advertises one of ``resources`` in another case advertise it as
    spelled there too; the workers as they are now. A worker that cannot be asked keeps its
    own spelling (and is left out of the request)."""
    needed = aliases(resources, workers)
    if not needed:
        return list(workers)
    replies = client.run(_advertise, needed, workers=list(needed), on_error="return")
    added = {address for address, reply in replies.items() if reply is True}
    return [
        dataclasses.replace(w, resources={**w.resources, **needed[w.address]})
        if w.address in added
        else w
        for w in workers
    ]


async def _advertise(needed: dict[str, dict[str, float]], dask_worker: Any) -> bool:
    """On the worker (through ``client.run``): advertise its share of ``needed``."""
    await dask_worker.set_resources(**needed[dask_worker.address])
    return True
