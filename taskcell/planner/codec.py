"""The occupancy wire codec: the plugin's records, encoded and decoded in this one place.

The scheduler's :class:`~taskcell.planner.plugin.OccupancyPlugin` builds its messages with the
``*_record`` and ``*_message`` functions here; every client (a kernel's
:class:`~taskcell.planner.feed.OccupancyFeed`, and through it the Jupyter server's watch) turns
them into :mod:`taskcell.planner.schema` records with :func:`decode` and its parts. Every record
is a dict with named keys, as distributed's progress stream sends; an update looks like::

    {"v": 5, "epoch": "3f2a9c0d1e4b", "seq": 41, "time": 1764041640.25,
     "scheduler": "tcp://10.0.0.5:8786",
     "workers": [                                  # the workers that changed (all, when full)
         {"address": "tcp://10.0.0.7:40211", "name": "gpu-box", "nthreads": 2,
          "memory_limit": 8589934592,
          "resources": {"threads": {"total": 2, "running": 1, "assigned": 1},
                        "GPU": {"total": 2, "running": 1, "assigned": 1}},
          "tasks": [{"key": "cell-3-<uuid4 hex>", "request": {"GPU": 1}, "state": "running",
                     "since": 1764041630.5},
                    {"key": "('chunk', 0)", "name": "chunk", "request": {"GPU": 1},
                     "state": "assigned", "since": 1764041631.0}],
          "running_tasks": 1, "assigned_tasks": 1}],
     "removed": ["tcp://10.0.0.8:40211"],         # workers that left
     "queue": [{"key": "big-1", "request": {"GPU": 4}, "state": "queued",
                "since": 1764041600.0, "wait": {"code": "no-capable-worker", ...}}],
     "queued": 1,                                  # all queued tasks; "queue" lists the first
     "totals": {"threads": {"total": 2, "running": 1, "assigned": 1}, "GPU": {...}},
     "recent": [{"key": "cell-2-<uuid4 hex>", "request": {"GPU": 1}, "state": "failed",
                 "ended": 1764041620.0, "worker": "tcp://10.0.0.7:40211", "wall": 2.5,
                 "peak_memory": 1048576, "error": "ValueError: bad batch"}],
     "dashboard": 8787,                            # the dashboard's port, or None
     "pools": [pool, ...],                         # as pool_record writes them
     "full": False}                                # True: the whole state

A task carries a ``name`` only where the client cannot derive it from a string key, and a
``wait`` (a :class:`~taskcell.cluster.waits.Wait`: a code and numbers, never words) only when
queued (an assigned task's is derived by the client from its worker's amounts). ``queue``,
``recent`` and ``pools`` are None when unchanged (never in a whole state); ``recent`` holds the
latest first. An update of :data:`COMPRESS_FROM` workers or more travels
packed (:func:`pack`). A history sample holds the totals at one time::

    {"time": 1764041640.25, "queued": 1, "totals": {"GPU": {"total": 2, "running": 1, ...}}}

The encoding functions run inside the scheduler, shipped by value with the plugin (see
:func:`taskcell.planner.feed.install`), so they use nothing but the standard library and the
constants they are given; the decoding ones run in clients.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from taskcell.cluster.waits import Wait, lack, wait
from taskcell.planner.schema import (
    STRIP_SECONDS,
    STRIP_STEPS,
    THREADS,
    EndedTask,
    EndState,
    PoolInfo,
    PoolWorker,
    ResourceUse,
    Snapshot,
    TaskInfo,
    TaskState,
    UsageStrip,
    WorkerSnapshot,
)

if TYPE_CHECKING:
    from typing_extensions import NotRequired

    from taskcell.cluster.mapping import WorkerCapacity

#: Version of the wire format; a client that finds another version re-registers the plugin.
WIRE_VERSION = 6
#: Updates carrying this many workers or more travel compressed (see :func:`pack`).
COMPRESS_FROM = 64

_UUID_SUFFIX = re.compile(r"-[0-9a-f]{32}$")
#: Resources shown first, in this order; then typed GPUs and MIG slices, then the rest.
_FIRST = ("threads", "cpu", "memory", "disk", "shm", "gpu")


class WireUse(TypedDict):
    """One resource's amounts on the wire (see the module docstring)."""

    total: float
    running: float
    assigned: float


class WireTask(TypedDict):
    """A task on the wire."""

    key: str
    #: Only where the client cannot derive it from the key.
    name: NotRequired[str]
    request: dict[str, float]
    state: TaskState
    since: float
    #: Only on a queued task.
    wait: NotRequired[Wait]


class WireEnded(TypedDict):
    """A task that ended, on the wire."""

    key: str
    #: Only where the client cannot derive it from the key.
    name: NotRequired[str]
    request: dict[str, float]
    state: EndState
    ended: float
    worker: str | None
    wall: float | None
    peak_memory: int | None
    error: str | None


@dataclass(kw_only=True)
class EndedEntry:
    """A task that ended, as the plugin keeps it until its cell's last report completes it
    (:mod:`taskcell.planner.ended`); :func:`ended_record` writes it on the wire.

    The one definition of this record on the scheduler's side. A client decodes it as an
    :class:`~taskcell.planner.schema.EndedTask`, deliberately another record: a string key
    and the name the client derives from it, where this one has Dask's key and its prefix.
    """

    key: Any
    prefix: str
    request: dict[str, float]
    state: EndState
    ended: float
    worker: str | None
    wall: float | None
    peak_memory: int | None
    error: str | None


class WireWorker(TypedDict):
    """A worker on the wire."""

    address: str
    name: str
    nthreads: int
    memory_limit: int
    resources: dict[str, WireUse]
    tasks: list[WireTask]
    running_tasks: int
    assigned_tasks: int


class WireSample(TypedDict):
    """One sample of the cluster's totals, as the plugin's history keeps it."""

    time: float
    queued: int
    totals: dict[str, WireUse]


class Update(TypedDict):
    """A whole state (``full``) or the changes since the last update (see the module docstring)."""

    v: int
    epoch: str
    seq: int
    time: float
    scheduler: str
    workers: list[WireWorker]
    removed: list[str]
    queue: list[WireTask] | None
    queued: int
    totals: dict[str, WireUse]
    recent: list[WireEnded] | None
    dashboard: int | None
    pools: list[PoolInfo] | None
    full: bool


# -- encoding (in the scheduler) ------------------------------------------------------------


def amount(value: float) -> float:
    """A whole amount as an int: smaller on the wire and read back exactly."""
    if value.__class__ is float and value.is_integer():
        return int(value)
    return value


def request_record(restrictions: Mapping[str, float] | None) -> dict[str, float]:
    """A task's resource restrictions on the wire."""
    if not restrictions:
        return {}
    return {r: amount(a) for r, a in restrictions.items()}


def use_record(total: float, running: float, assigned: float) -> WireUse:
    """One resource's amounts on the wire; a sum that went below zero is sent as zero."""
    return {
        "total": amount(total),
        "running": amount(max(running, 0)),
        "assigned": amount(max(assigned, 0)),
    }


def task_record(
    *,
    key: Any,
    prefix: str,
    request: dict[str, float],
    state: TaskState,
    since: float,
    wait: Wait | None = None,
    name: str | None = None,
) -> WireTask:
    """A task on the wire; its name (Dask's key ``prefix``) only where a string key lacks it,
    or where it has one of its own (``name``: a ``%%task --graph`` cell's task)."""
    record: WireTask = {"key": str(key), "request": request, "state": state, "since": since}
    if name is not None or not isinstance(key, str):
        record["name"] = prefix if name is None else name
    if wait is not None:
        record["wait"] = wait
    return record


def ended_record(entry: EndedEntry) -> WireEnded:
    """A task that ended, on the wire; its name only where a string key lacks it."""
    record: WireEnded = {
        "key": str(entry.key),
        "request": entry.request,
        "state": entry.state,
        "ended": entry.ended,
        "worker": entry.worker,
        "wall": entry.wall,
        "peak_memory": entry.peak_memory,
        "error": entry.error,
    }
    if not isinstance(entry.key, str):
        record["name"] = entry.prefix
    return record


def pool_record(pool: Mapping[str, Any]) -> PoolInfo:
    """A pool as its kernel published it (a :class:`~taskcell.cluster.pool_records.PoolInfo`),
    on the wire: its known keys only, whole amounts as ints. KeyError or TypeError for one that
    is not a pool."""
    return {
        "kernel": str(pool["kernel"]),
        "name": str(pool["name"]),
        "backend": str(pool["backend"]),
        "resources": request_record(pool["resources"]),
        "max_workers": int(pool["max_workers"]),
        "waiting": int(pool["waiting"]),
        "launched": int(pool["launched"]),
        "workers": [
            {
                "name": w["name"],
                "state": w["state"],
                "started": w["started"],
                "address": w["address"],
                "since": w["since"],
                "idle_since": w["idle_since"],
                "error": w["error"],
            }
            for w in pool["workers"]
        ],
    }


def worker_record(
    *,
    address: str,
    name: str,
    nthreads: int,
    memory_limit: int,
    resources: dict[str, WireUse],
    tasks: list[WireTask],
    running_tasks: int,
    assigned_tasks: int,
) -> WireWorker:
    """A worker on the wire: each of its ``resources`` as :func:`use_record` writes it."""
    return {
        "address": address,
        "name": name,
        "nthreads": nthreads,
        "memory_limit": memory_limit,
        "resources": resources,
        "tasks": tasks,
        "running_tasks": running_tasks,
        "assigned_tasks": assigned_tasks,
    }


def worker_address(record: WireWorker) -> str:
    """The address of a worker on the wire."""
    return record["address"]


def sum_totals(workers: Iterable[WireWorker]) -> dict[str, WireUse]:
    """The cluster's amounts of each resource, summed over worker records."""
    by_resource: dict[str, list[WireUse]] = {}
    for record in workers:
        for resource, use in record["resources"].items():
            by_resource.setdefault(resource, []).append(use)
    return {
        r: use_record(
            sum(u["total"] for u in uses),
            sum(u["running"] for u in uses),
            sum(u["assigned"] for u in uses),
        )
        for r, uses in by_resource.items()
    }


def update_message(
    *,
    epoch: str,
    seq: int,
    time: float,
    scheduler: str,
    workers: list[WireWorker],
    removed: list[str],
    queue: list[WireTask] | None,
    queued: int,
    totals: dict[str, WireUse],
    recent: list[WireEnded] | None,
    dashboard: int | None,
    pools: list[PoolInfo] | None,
    full: bool,
) -> Update:
    """A whole state (``full``) or the changes since the last update."""
    return {
        "v": WIRE_VERSION,
        "epoch": epoch,
        "seq": seq,
        "time": time,
        "scheduler": scheduler,
        "workers": workers,
        "removed": removed,
        "queue": queue,
        "queued": queued,
        "totals": totals,
        "recent": recent,
        "dashboard": dashboard,
        "pools": pools,
        "full": full,
    }


def sample_record(*, time: float, queued: int, totals: dict[str, WireUse]) -> WireSample:
    """One sample of the cluster's totals, for :func:`taskcell.occupancy_history`."""
    return {"time": time, "queued": queued, "totals": totals}


def sample_time(sample: WireSample) -> float:
    """When a history sample was taken."""
    return sample["time"]


def history_message(samples: list[WireSample]) -> dict:
    """The reply to ``taskcell_occupancy_history``: every sample kept, oldest first."""
    return {"v": WIRE_VERSION, "samples": samples}


def pack(message: Update) -> Update | dict[str, Any]:
    """A large update as zlib-compressed msgpack: ``{"v", "epoch", "seq", "zlib"}``; small as is.

    Whole states of large clusters repeat the same structure worker after worker and shrink
    several times; Dask's comms compress nothing by default.
    """
    if len(message["workers"]) < COMPRESS_FROM:
        return message
    import zlib

    import msgpack

    raw = msgpack.packb(message, use_bin_type=True)
    return {
        "v": message["v"],
        "epoch": message["epoch"],
        "seq": message["seq"],
        "zlib": zlib.compress(raw, 1),
    }


def unpack(message: dict) -> Update:
    """The update :func:`pack` made (or the message itself when it was not packed)."""
    if "zlib" not in message:
        return message  # type: ignore[return-value]
    import zlib

    import msgpack

    return msgpack.unpackb(zlib.decompress(message["zlib"]), raw=False)


# -- decoding (in clients) ------------------------------------------------------------------


def resource_order(resource: str) -> tuple[int, str]:
    """Sort key of resources: threads, cpu, memory, disk, shm, gpu, typed GPUs, the rest."""
    folded = resource.casefold()
    if folded in _FIRST:
        return _FIRST.index(folded), folded
    return len(_FIRST) + (0 if folded.startswith(("gpu-", "mig-")) else 1), folded


def task_name(key: str, prefix: str) -> str:
    """A task's name for people: a taskcell key minus its uuid, else Dask's key prefix."""
    match = _UUID_SUFFIX.search(key)
    return key[: match.start()] if match else prefix


def uses(resources: Mapping[str, WireUse]) -> list[ResourceUse]:
    """Each resource's amounts on the wire as records, in :func:`resource_order`."""
    return [
        ResourceUse(resource=r, total=u["total"], running=u["running"], assigned=u["assigned"])
        for r, u in sorted(resources.items(), key=lambda item: resource_order(item[0]))
    ]


def assigned_reason(request: Mapping[str, float], worker: WorkerSnapshot) -> Wait:
    """What a task assigned to ``worker`` waits for there, from the worker's amounts."""
    by_name = {u["resource"]: u for u in worker["resources"]}
    held = []
    for resource, asked in request.items():
        use = by_name.get(resource)
        total = use["total"] if use else 0.0
        running = use["running"] if use else 0.0
        if asked > total - running:
            held.append(lack(resource, asked, total, held=running))
    if held:
        return wait("worker-resources", lacking=held)
    threads = by_name.get(THREADS)
    if threads is not None and threads["running"] >= threads["total"]:
        busy, total = int(threads["running"]), int(threads["total"])
        return wait("worker-thread", count=busy, total=total)
    return wait("worker-starting")


def _name(key: Any, name: str | None) -> str:
    """The name a record carries, or, where it left it out, the one its key implies."""
    if name is not None:
        return name
    from dask.utils import key_split

    return task_name(key, key_split(key))


def decode_task(record: WireTask, worker: str | None = None) -> TaskInfo:
    """A task from the wire; ``worker`` is the address of the worker record it came in."""
    key = record["key"]
    return TaskInfo(
        key=key,
        name=_name(key, record.get("name")),
        request=dict(record["request"]),
        state=record["state"],
        since=record["since"],
        worker=worker,
        wait=record.get("wait"),
    )


def decode_ended(record: WireEnded) -> EndedTask:
    """A task that ended, from the wire."""
    key = record["key"]
    return EndedTask(
        key=key,
        name=_name(key, record.get("name")),
        request=dict(record["request"]),
        state=record["state"],
        worker=record["worker"],
        ended=record["ended"],
        wall=record["wall"],
        peak_memory=record["peak_memory"],
        error=record["error"],
    )


def decode_pool(record: Mapping[str, Any]) -> PoolInfo:
    """A pool a kernel published, from the wire."""
    return PoolInfo(
        kernel=record["kernel"],
        name=record["name"],
        backend=record["backend"],
        resources=dict(record["resources"]),
        max_workers=record["max_workers"],
        waiting=record["waiting"],
        launched=record["launched"],
        workers=[
            PoolWorker(
                name=w["name"],
                state=w["state"],
                started=w["started"],
                address=w["address"],
                since=w["since"],
                idle_since=w["idle_since"],
                error=w["error"],
            )
            for w in record["workers"]
        ],
    )


def decode_worker(record: WireWorker) -> WorkerSnapshot:
    """A worker from the wire, with what each of its assigned tasks waits for."""
    address = record["address"]
    worker = WorkerSnapshot(
        address=address,
        name=record["name"],
        nthreads=record["nthreads"],
        memory_limit=record["memory_limit"],
        resources=uses(record["resources"]),
        tasks=[decode_task(t, address) for t in record["tasks"]],
        running_tasks=record["running_tasks"],
        assigned_tasks=record["assigned_tasks"],
    )
    for task in worker["tasks"]:
        if task["state"] == "assigned":
            task["wait"] = assigned_reason(task["request"], worker)
    return worker


def snapshot(
    *,
    scheduler: str,
    time: float,
    seq: int,
    workers: Iterable[WireWorker],
    totals: Mapping[str, WireUse],
    queue: Iterable[WireTask],
    queued: int,
    recent: Iterable[WireEnded] = (),
    samples: Sequence[WireSample] = (),
    dashboard: str | None = None,
    pools: Iterable[Mapping[str, Any]] = (),
) -> Snapshot:
    """A :class:`~taskcell.planner.schema.Snapshot` from the parts of updates, workers sorted;
    its strips from the history ``samples`` (oldest first)."""
    return Snapshot(
        scheduler=scheduler,
        time=time,
        seq=seq,
        workers=sorted((decode_worker(w) for w in workers), key=lambda w: w["address"]),
        totals=uses(totals),
        queue=[decode_task(t) for t in queue],
        queued=queued,
        recent=[decode_ended(t) for t in recent],
        strips=strips(samples, time),
        dashboard=dashboard,
        pools=[decode_pool(p) for p in pools],
    )


def decode(full: dict, samples: Sequence[WireSample] = (), address: str | None = None) -> Snapshot:
    """A whole-state message of the plugin (packed or not) as a snapshot; its strips from the
    history ``samples``, its dashboard link as seen from a client of ``address``."""
    update = unpack(full)
    return snapshot(
        scheduler=update["scheduler"],
        time=update["time"],
        seq=update["seq"],
        workers=update["workers"],
        totals=update["totals"],
        queue=update["queue"] or (),
        queued=update["queued"],
        recent=update["recent"] or (),
        samples=samples,
        dashboard=dashboard_link(address or update["scheduler"], update["dashboard"]),
        pools=update["pools"] or (),
    )


def dashboard_link(address: str, port: int | None) -> str | None:
    """The link to the dashboard served on ``port`` by the scheduler a client reaches at
    ``address``, as Dask's ``distributed.dashboard.link`` writes it; None without a port."""
    if port is None or "://" not in address:
        return None
    from distributed.utils import format_dashboard_link

    protocol, rest = address.split("://", 1)
    host = "localhost" if protocol == "inproc" else rest.rsplit(":", 1)[0]
    try:
        return format_dashboard_link(host, port)
    except KeyError:  # the link template names an environment variable that is not set
        return None


def strips(samples: Sequence[WireSample], now: float) -> list[UsageStrip]:
    """Per resource, the highest share of its total that running tasks held in each of the
    ``STRIP_STEPS`` steps up to ``now``, from history samples (oldest first)."""
    if not samples:
        return []
    last = math.floor(now / STRIP_SECONDS)
    first = last - STRIP_STEPS + 1
    # The sample in force when the strip begins, and every one after it.
    times = [s["time"] for s in samples]
    begin = max(bisect.bisect_right(times, first * STRIP_SECONDS) - 1, 0)
    shares: dict[str, list[float | None]] = {}
    for i in range(begin, len(samples)):
        # Each sample holds from its time until the next one's (excluded), the last until now.
        since = math.floor(times[i] / STRIP_SECONDS)
        until = math.ceil(times[i + 1] / STRIP_SECONDS) - 1 if i + 1 < len(samples) else last
        lo = max(since, first) - first
        hi = min(max(until, since), last) - first
        for resource, use in samples[i]["totals"].items():
            total = use["total"]
            share = round(min(use["running"] / total, 1.0), 3) if total > 0 else 0.0
            steps = shares.setdefault(resource, [None] * STRIP_STEPS)
            for k in range(max(lo, 0), hi + 1):
                steps[k] = max(steps[k] or 0.0, share)
    return [
        UsageStrip(resource=r, start=first * STRIP_SECONDS, shares=shares[r])
        for r in sorted(shares, key=resource_order)
    ]


def decode_samples(samples: Iterable[WireSample]) -> list[tuple[float, int, list[ResourceUse]]]:
    """History samples as ``(time, queued, totals)``."""
    return [(s["time"], s["queued"], uses(s["totals"])) for s in samples]


def worker_capacity(worker: WorkerSnapshot) -> WorkerCapacity:
    """A snapshot's worker as the feasibility checks read it (:mod:`taskcell.cluster.mapping`):
    ``threads`` is Dask's ``nthreads`` there, not a resource."""
    from taskcell.cluster.mapping import WorkerCapacity

    return WorkerCapacity(
        address=worker["address"],
        name=worker["name"],
        nthreads=worker["nthreads"],
        memory_limit=worker.get("memory_limit", 0),
        resources={
            u["resource"]: u["total"] for u in worker["resources"] if u["resource"] != THREADS
        },
    )


def capacities(snap: Snapshot) -> list[WorkerCapacity]:
    """The workers of a snapshot as :class:`~taskcell.cluster.mapping.WorkerCapacity` records."""
    return [worker_capacity(w) for w in snap["workers"]]
