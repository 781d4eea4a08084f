"""The cluster in the sidebar's hands: start, scale and stop an embedded cluster, cancel a task,
retire a pool's worker, read a task's output, all from the server's own client of the cluster.

A kernel's embedded cluster (:mod:`taskcell.cluster.embedded`) scales and stops itself through
two handlers of its scheduler (``SCALE`` and ``STOP`` in :mod:`~taskcell.extension.control_plugin`,
whose ``info`` says whether they are there), so the server never runs code in a kernel. The
clusters this server starts (:class:`ServerClusters`) are a scheduler and workers on this machine
in processes of their own, advertising what it has as the embedded cluster's workers do; the
server scales and stops them itself, and stops them when it stops. A pool's worker is retired
through the scheduler (``retire_workers``), which moves the results it holds; the kernel's
provisioner then sees it gone. One more worker of a pool is asked of its kernel's provisioner
through an event on the scheduler (:func:`start_worker`), so the server never runs code in a
kernel for that either.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

from taskcell.extension import control_plugin
from taskcell.extension.payloads import TaskOutput
from taskcell.planner.schema import START_TOPIC
from taskcell.planner.view import clock_offset

if TYPE_CHECKING:
    from distributed import Client
    from distributed.deploy.spec import SpecCluster


class ControlError(RuntimeError):
    """The cluster cannot do what was asked: the message says why."""


_installed: set[tuple[str, str]] = set()


def pickled_plugin() -> bytes:
    """The control plugin, pickled by value with its module, for a scheduler without taskcell."""
    import cloudpickle
    from distributed.protocol.pickle import dumps

    cloudpickle.register_pickle_by_value(control_plugin)
    return dumps(control_plugin.ControlPlugin())


async def install(client: Client, replace: bool = False) -> None:
    """Register the control plugin on ``client``'s scheduler (idempotent unless ``replace``)."""
    await client.scheduler.register_scheduler_plugin(
        plugin=pickled_plugin(), name=control_plugin.PLUGIN_NAME, idempotent=not replace
    )
    _installed.add((client.id, client.scheduler.address))


async def _call(client: Client, op: str, /, **kwargs: Any) -> dict:
    """One of the plugin's handlers, installing (or replacing an older) plugin as needed."""
    if (client.id, client.scheduler.address) not in _installed:
        await install(client)
    reply = await getattr(client.scheduler, op)(**kwargs)
    if not isinstance(reply, dict) or reply.get("v") != control_plugin.VERSION:
        await install(client, replace=True)
        reply = await getattr(client.scheduler, op)(**kwargs)
    if "error" in reply:
        raise ControlError(reply["error"])
    return reply


async def scheduler_offset(client: Client) -> float:
    """Seconds to add to this server's clock to read the scheduler's."""
    sent = time.time()
    remote = await client.run_on_scheduler(time.time)
    return clock_offset(sent, float(remote), time.time())


async def info(client: Client) -> bool:
    """Whether the cluster is an embedded cluster that scales and stops itself."""
    return bool((await _call(client, "taskcell_control_info"))["embedded"])


async def scale(client: Client, n: int) -> int:
    """Ask a kernel's embedded cluster for ``n`` workers; how many it is asked for now."""
    reply = await getattr(client.scheduler, control_plugin.SCALE)(n=n)
    if "error" in reply:
        raise ControlError(reply["error"])
    return int(reply["workers"])


async def stop(client: Client) -> None:
    """Stop a kernel's embedded cluster (its process ends once it answered)."""
    await getattr(client.scheduler, control_plugin.STOP)()


async def start_worker(client: Client, kernel: str, pool: str) -> None:
    """Ask ``kernel``'s provisioner for one more worker of its ``pool``: the request is logged
    on the scheduler's topic the provisioner subscribes to, and the worker starts in the
    background (the snapshot shows it starting)."""
    await client.log_event(START_TOPIC, {"kernel": kernel, "pool": pool})


async def cancel(client: Client, key: str) -> bool:
    """Stop the task ``key`` (:func:`taskcell.runner.stopping.cancel_task`): True if it ran."""
    from taskcell.runner.stopping import cancel_task

    return await cancel_task(client, key)


async def retire(client: Client, address: str) -> None:
    """Retire the worker at ``address``: its results move to other workers, then it closes."""
    await client.retire_workers(workers=[address], close_workers=True)


async def output(client: Client, key: str) -> TaskOutput | None:
    """What the cell ``key`` printed, displayed and raised; None when the scheduler has no
    record of it (its kernel left, or its events were pushed out of the log)."""
    reply = await _call(client, "taskcell_task_output", key=key)
    if not reply["found"]:
        return None
    return TaskOutput(
        key=key,
        worker=reply["worker"],
        text=reply["text"],
        truncated=reply["truncated"],
        error=reply["raised"],
    )


#: Most workers a cluster of this server may be scaled to (they all run on this machine).
MAX_WORKERS = 64
#: Seconds a cluster's scheduler process may take to start (importing Dask on a busy machine).
START_TIMEOUT = 120


def worker_options() -> dict[str, Any]:
    """A worker of this machine as the embedded cluster's only worker is: all its cores,
    memory and GPUs, advertised as resources."""
    from taskcell.cluster.detect import advertised_resources, detect_machine

    (share,) = advertised_resources(detect_machine(), 1)
    return {
        "nthreads": max(1, int(share.resources.get("CPU", 1))),
        "memory_limit": int(share.resources.get("MEMORY", 0)) or "auto",
        "resources": share.resources,
        "env": share.environ(),
    }


def _named(worker_class: type) -> type:
    """``worker_class`` (distributed's ``SubprocessWorker``) giving its worker the name its
    cluster gives it, as the embedded cluster's workers are named (``taskcell-0``...)."""

    class Named(worker_class):
        def __init__(self, scheduler: str, name: int | None = None, **options: Any) -> None:
            super().__init__(scheduler, name=name, **options)
            if name is not None:
                self.worker_kwargs["name"] = f"taskcell-{name}"

    return Named


class ServerClusters:
    """The clusters this server started from the sidebar, by scheduler address.

    Each is distributed's ``SpecCluster`` of a scheduler process and worker processes (Nannies)
    on 127.0.0.1, with a dashboard; a new worker is like the first (all of this machine's
    cores, memory and GPUs), so two or more advertise the machine more than once.
    """

    def __init__(self) -> None:
        self._clusters: dict[str, SpecCluster] = {}

    def addresses(self) -> list[str]:
        """Their scheduler addresses, oldest first."""
        return list(self._clusters)

    def owns(self, address: str) -> bool:
        return address in self._clusters

    async def start(self, workers: int = 1) -> str:
        """Start a cluster of ``workers`` workers; its scheduler's address."""
        from distributed.deploy.spec import SpecCluster
        from distributed.deploy.subprocess import SubprocessScheduler, SubprocessWorker

        scheduler = {
            "cls": SubprocessScheduler,
            "options": {
                "scheduler_kwargs": {"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"},
                "timeout": START_TIMEOUT,
            },
        }
        worker = {
            "cls": _named(SubprocessWorker),
            "options": {
                "worker_class": "distributed.Nanny",
                "worker_kwargs": {"host": "127.0.0.1", **worker_options()},
            },
        }
        cluster = await SpecCluster(
            workers=dict.fromkeys(range(workers), worker),  # named as scale() names new ones
            scheduler=scheduler,
            worker=worker,
            asynchronous=True,
            name="taskcell-server",
        )
        address = str(cluster.scheduler_address)
        self._clusters[address] = cluster
        return address

    async def scale(self, address: str, n: int) -> int:
        """Give the cluster at ``address`` ``n`` workers (retired through the scheduler, which
        moves their results, when fewer); how many it is asked for."""
        if not 0 <= n <= MAX_WORKERS:
            raise ControlError(f"a cluster of this server has 0 to {MAX_WORKERS} workers, not {n}")
        self._clusters[address].scale(n)  # its workers start or retire in the background
        return n

    async def stop(self, address: str) -> None:
        """Stop the cluster at ``address``, its workers first, and wait for it."""
        cluster = self._clusters.pop(address, None)
        if cluster is not None:
            await cluster.close()  # type: ignore[misc]  # typed for a blocking cluster too

    async def close(self) -> None:
        """Stop them all (the server is stopping)."""
        for address in list(self._clusters):
            with contextlib.suppress(OSError, RuntimeError):
                await self.stop(address)
