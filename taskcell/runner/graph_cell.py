"""``%%task --graph``: the cell runs in the kernel, and every task its Dask graphs submit
carries the cell's request.

Dask applies ``dask.annotate(resources=...)`` only to what is submitted inside the block
(dask/dask#5662, #7036; dask-expr keeps annotations only at submission, dask/dask#10937), so a
request meant for "this analysis" is easy to lose. Here the whole cell is that block: the
request, checked against the live workers first, is the annotation of every graph it submits
(``.compute()``, ``.persist()``, ``dask.compute``, ``client.submit``...), on the cell's
cluster, each task also annotated with the cell's name, which the panel shows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from taskcell.cluster.submit import CELL_ANNOTATION, plan, unique_key
from taskcell.runner.history import TaskRecord
from taskcell.spec import Resources
from taskcell.spec.amounts import show_request

if TYPE_CHECKING:
    from distributed import Client


def run_graph_cell(
    client: Client,
    request: Resources,
    run: Callable[[], Any],
    *,
    name: str,
    source: str,
    history: list[TaskRecord],
    status: Callable[[str], None],
    retries: int = 0,
) -> Any:
    """Run ``run`` (the cell, in this kernel) with ``request`` on every task its graphs
    submit; its value. Nothing runs on a request no live worker can meet."""
    import dask

    placement = plan(request, client)
    record = TaskRecord(key=unique_key(name), cell=name, request=request, source=source)
    history.append(record)
    record.start("this kernel (--graph)")
    annotations: dict[str, Any] = {CELL_ANNOTATION: name}
    if placement.resources:
        annotations["resources"] = placement.resources
    if retries:
        annotations["retries"] = retries
    asked = show_request(placement.resources) or "no resources"
    status(f"running here; each task its graphs submit asks for {asked}")
    start = time.perf_counter()
    try:
        with dask.annotate(**annotations), client.as_current():
            value = run()
    except KeyboardInterrupt:
        record.finish("interrupted", error="interrupted")
        raise
    except BaseException as e:
        record.finish("error", error=f"{type(e).__name__}: {e}")
        status(f"failed after {time.perf_counter() - start:.2f} s")
        raise
    record.finish("finished")
    status(f"ran here in {time.perf_counter() - start:.2f} s; its graphs' tasks asked for {asked}")
    return value
