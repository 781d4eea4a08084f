"""The embedded cluster scales and stops itself, through two handlers of its scheduler that the
Jupyter server calls for the sidebar (``taskcell.extension.control``; its control plugin
offers Scale and Stop where the scheduler serves both):

- ``taskcell_embedded_scale(n) -> {"workers": n}``, or ``{"error": why}`` for an ``n`` that is
  not a whole number from 0 to :data:`MAX_WORKERS`: new workers are like the first one (its
  cores, memory, GPUs and environment), each a process of its own; extra ones are retired
  through the scheduler, which moves their results to the others, least busy first, and their
  keepers stop first so that they are not started again. It answers at once; workers start or
  retire in the background, one request after another.
- ``taskcell_embedded_stop() -> {}``: after answering, the cluster ends, and its process with
  it, as when the kernel closes its stdin; the kernel, told before the answer, starts a new
  one at its next ``%%task``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from taskcell.cluster.embedded import announce_stop
from taskcell.cluster.embedded_worker import EmbeddedWorker

if TYPE_CHECKING:
    from distributed import SpecCluster

#: The scheduler handler that scales the embedded cluster.
SCALE = "taskcell_embedded_scale"
#: The scheduler handler that stops the embedded cluster.
STOP = "taskcell_embedded_stop"
#: Most workers the embedded cluster may be scaled to (they all run on this machine).
MAX_WORKERS = 64

_NUMBERED = re.compile(r"taskcell-(\d+)$")


class EmbeddedControls:
    """The handlers :data:`SCALE` and :data:`STOP` of ``cluster``'s scheduler.

    Parameters
    ----------
    cluster
        The embedded cluster, its scheduler in this process.
    first
        The options of its first worker, which new workers copy.
    stop
        Called (on the event loop) to end the cluster.
    """

    def __init__(
        self, cluster: SpecCluster, first: dict[str, Any], stop: Callable[[], None]
    ) -> None:
        self.cluster = cluster
        self.first = dict(first)
        self._stop = stop
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    def install(self) -> None:
        self.cluster.scheduler.handlers.update({SCALE: self.scale, STOP: self.stop})

    def scale(self, n: object = None) -> dict:
        """Ask for ``n`` workers (see the module docstring)."""
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_WORKERS:
            return {
                "error": f"the embedded cluster has 0 to {MAX_WORKERS} workers, "
                f"not {n!r}: give n as a whole number"
            }
        task = asyncio.ensure_future(self._scale(n))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return {"workers": n}

    def stop(self) -> dict:
        """End the cluster once this answer is sent; the kernel is told first."""
        announce_stop()
        asyncio.get_running_loop().call_soon(self._stop)
        return {}

    async def _scale(self, n: int) -> None:
        async with self._lock:  # requests apply in the order they came
            cluster = self.cluster
            have = len(cluster.worker_spec)
            if n > have:
                for _ in range(n - have):
                    name = self._next_name()
                    cluster.worker_spec[name] = {"cls": EmbeddedWorker, "options": self.first}
                await cluster  # starts the new ones; they connect on their own
            elif n < have:
                leaving = self._least_busy(have - n)
                for name in leaving:
                    worker = cluster.workers.get(name)
                    if isinstance(worker, EmbeddedWorker):
                        worker.stop_keeping()
                await cluster.scheduler.retire_workers(names=leaving, close_workers=True)
                await cluster.scale_down(leaving)

    def _next_name(self) -> str:
        numbers = [int(m.group(1)) for m in map(_NUMBERED.match, self.cluster.worker_spec) if m]
        return f"taskcell-{max(numbers, default=-1) + 1}"

    def _least_busy(self, k: int) -> list[str]:
        """The ``k`` workers to retire: those not connected yet, then those with the fewest
        tasks and the least data, the newest first."""
        connected = {str(ws.name): ws for ws in self.cluster.scheduler.workers.values()}
        names = list(self.cluster.worker_spec)

        def cost(i: int) -> tuple[int, int, int, int]:
            ws = connected.get(names[i])
            if ws is None:
                return (0, 0, 0, -i)
            return (1, len(ws.processing), ws.nbytes, -i)

        return [names[i] for i in sorted(range(len(names)), key=cost)[:k]]
