"""The occupancy wire codec: the plugin's compact records, encoded and decoded in this one place.

The scheduler's :class:`~taskcell.planner.plugin.OccupancyPlugin` builds its messages with the
``*_record`` and ``*_message`` functions here; every client (a kernel's
:class:`~taskcell.planner.feed.OccupancyFeed`, and through it the Jupyter server's watch) turns
them into :mod:`taskcell.planner.schema` records with :func:`decode` and its parts::

    worker = [address, name, nthreads, memory_limit, {resource: [total, running, assigned]},
              [task, ...], n_running, n_assigned]
    task   = [key, name or None, {resource: amount}, state, since] (+ [waiting_for] when queued)
             state: "r" running, "a" assigned, "q" queued on the scheduler; a task's name is
             sent only when the client cannot derive it from a string key, and its worker and
             what an assigned task waits for are derived by the client from the worker record
    ended  = [key, name or None, {resource: amount}, state, ended, worker, wall, peak_memory,
              error]   state: "f" finished, "x" failed, "c" cancelled
    pool   = [kernel, name, backend, {resource: amount}, max_workers, waiting, [pool_worker, ...]]
    pool_worker = [name, state, started, address, since, idle_since, error]
    update = {"v", "epoch", "seq", "time", "scheduler", "workers": [worker, ...] (changed ones),
              "removed": [address, ...], "queue": [task, ...] or None (unchanged), "queued",
              "totals": {resource: [total, running, assigned]},
              "recent": [ended, ...] (latest first) or None (unchanged),
              "dashboard": port or None, "pools": [pool, ...] or None (unchanged), "full": bool}
    sample = [time, queued, {resource: [total, running, assigned]}]

The encoding functions run inside the scheduler, shipped by value with the plugin (see
:func:`taskcell.planner.feed.install`), so they use nothing but the standard library and the
constants they are given; the decoding ones run in clients.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from taskcell.planner.schema import (
    STRIP_SECONDS,
    STRIP_STEPS,
    THREADS,
    EndedTask,
    PoolInfo,
    PoolWorker,
    ResourceUse,
    Snapshot,
    TaskInfo,
    UsageStrip,
    WorkerSnapshot,
)
from taskcell.spec.amounts import show_amount

if TYPE_CHECKING:
    from taskcell.cluster.mapping import WorkerCapacity

#: Version of the wire format; a client that finds another version re-registers the plugin.
WIRE_VERSION = 4
#: Updates carrying this many workers or more travel compressed (see :func:`pack`).
COMPRESS_FROM = 64

_CODES = {"running": "r", "assigned": "a", "queued": "q"}
_STATES = {code: state for state, code in _CODES.items()}
_END_CODES = {"finished": "f", "failed": "x", "cancelled": "c"}
_END_STATES = {code: state for state, code in _END_CODES.items()}
_UUID_SUFFIX = re.compile(r"-[0-9a-f]{32}$")
#: Resources shown first, in this order; then typed GPUs and MIG slices, then the rest.
_FIRST = ("threads", "cpu", "memory", "disk", "shm", "gpu")


# -- encoding (in the scheduler) ------------------------------------------------------------


def amount(value: float) -> float | int:
    """A whole amount as an int: smaller on the wire and read back exactly."""
    if value.__class__ is float and value.is_integer():
        return int(value)
    return value


def request_record(restrictions: Mapping[str, float] | None) -> dict[str, float | int]:
    """A task's resource restrictions on the wire."""
    if not restrictions:
        return {}
    return {r: amount(a) for r, a in restrictions.items()}


def task_record(
    key: Any,
    prefix: str,
    request: dict[str, float | int],
    state: str,
    since: float,
    waiting_for: str | None = None,
    name: str | None = None,
) -> list:
    """A task on the wire; its name (Dask's key ``prefix``) only where a string key lacks it,
    or where it has one of its own (``name``: a ``%%task --graph`` cell's task)."""
    if name is None and not isinstance(key, str):
        name = prefix
    record = [str(key), name, request, _CODES[state], since]
    if state == "queued":
        record.append(waiting_for)
    return record


def ended_record(
    key: Any,
    prefix: str,
    request: dict[str, float | int],
    state: str,
    ended: float,
    worker: str | None,
    wall: float | None,
    peak_memory: int | None,
    error: str | None,
) -> list:
    """A task that ended, on the wire; its name only where a string key lacks it."""
    name = None if isinstance(key, str) else prefix
    return [str(key), name, request, _END_CODES[state], ended, worker, wall, peak_memory, error]


_POOL_WORKER_KEYS = ("name", "state", "started", "address", "since", "idle_since", "error")


def pool_record(pool: Mapping[str, Any]) -> dict:
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
        "workers": [{k: w[k] for k in _POOL_WORKER_KEYS} for w in pool["workers"]],
    }


def worker_record(
    address: str,
    name: str,
    nthreads: int,
    memory_limit: int,
    resources: dict[str, list],
    tasks: list[list],
    n_running: int,
    n_assigned: int,
) -> list:
    """A worker on the wire: ``resources`` maps each to ``[total, running, assigned]``."""
    return [address, name, nthreads, memory_limit, resources, tasks, n_running, n_assigned]


def worker_address(record: Sequence) -> str:
    """The address of a worker on the wire."""
    return record[0]


def sum_totals(workers: Iterable[Sequence]) -> dict[str, list]:
    """The cluster's ``{resource: [total, running, assigned]}``, summed over worker records."""
    totals: dict[str, list[float]] = {}
    for record in workers:
        for resource, (total, running, assigned) in record[4].items():
            sums = totals.setdefault(resource, [0, 0, 0])
            sums[0] += total
            sums[1] += running
            sums[2] += assigned
    return {r: [amount(v) for v in sums] for r, sums in totals.items()}


def update_message(
    epoch: str,
    seq: int,
    time: float,
    scheduler: str,
    workers: list[list],
    removed: list[str],
    queue: list[list] | None,
    queued: int,
    totals: dict[str, list],
    recent: list[list] | None,
    dashboard: int | None,
    pools: list[dict] | None,
    full: bool,
) -> dict:
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


def sample_record(time: float, queued: int, totals: dict[str, list]) -> list:
    """One sample of the cluster's totals, for :func:`taskcell.occupancy_history`."""
    return [time, queued, totals]


def history_message(samples: list[list]) -> dict:
    """The reply to ``taskcell_occupancy_history``: every sample kept."""
    return {"v": WIRE_VERSION, "samples": samples}


def pack(message: dict) -> dict:
    """A large update as zlib-compressed msgpack: ``{"v", "epoch", "seq", "zlib"}``; small as is.

    Whole states of large clusters repeat the same structure worker after worker and shrink
    three- to fourfold; Dask's comms compress nothing by default.
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


def unpack(message: dict) -> dict:
    """The update :func:`pack` made (or the message itself when it was not packed)."""
    if "zlib" not in message:
        return message
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


def uses(resources: Mapping[str, Sequence[float]]) -> list[ResourceUse]:
    """``{resource: [total, running, assigned]}`` as records, in :func:`resource_order`."""
    return [
        ResourceUse(resource=r, total=v[0], running=v[1], assigned=v[2])
        for r, v in sorted(resources.items(), key=lambda item: resource_order(item[0]))
    ]


def assigned_reason(request: Mapping[str, float], worker: WorkerSnapshot) -> str:
    """What a task assigned to ``worker`` waits for there, from the worker's amounts."""
    by_name = {u["resource"]: u for u in worker["resources"]}
    held = []
    for resource, asked in request.items():
        use = by_name.get(resource)
        total = use["total"] if use else 0.0
        running = use["running"] if use else 0.0
        if asked > total - running:
            held.append(
                f"{resource}={show_amount(resource, asked)} ({show_amount(resource, running)} of "
                f"{show_amount(resource, total)} held by running tasks)"
            )
    if held:
        return "waiting on this worker for " + "; ".join(held)
    threads = by_name.get(THREADS)
    if threads is not None and threads["running"] >= threads["total"]:
        busy, total = threads["running"], threads["total"]
        return f"waiting on this worker for a free thread ({busy:g} of {total:g} busy)"
    return "starting"


def _name(key: Any, name: str | None) -> str:
    """The name a record carries, or, where it left it out, the one its key implies."""
    if name is not None:
        return name
    from dask.utils import key_split

    return task_name(key, key_split(key))


def decode_task(record: Sequence, worker: str | None = None) -> TaskInfo:
    """A task from the wire; ``worker`` is the address of the worker record it came in."""
    key, name, request, state, since = record[:5]
    return TaskInfo(
        key=key,
        name=_name(key, name),
        request=dict(request),
        state=_STATES[state],  # type: ignore[typeddict-item]
        since=since,
        worker=worker,
        waiting_for=record[5] if len(record) > 5 else None,
    )


def decode_ended(record: Sequence) -> EndedTask:
    """A task that ended, from the wire."""
    key, name, request, state, ended, worker, wall, peak_memory, error = record
    return EndedTask(
        key=key,
        name=_name(key, name),
        request=dict(request),
        state=_END_STATES[state],  # type: ignore[typeddict-item]
        worker=worker,
        ended=ended,
        wall=wall,
        peak_memory=peak_memory,
        error=error,
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


def decode_worker(record: Sequence) -> WorkerSnapshot:
    """A worker from the wire, with what each of its assigned tasks waits for."""
    address, name, nthreads, memory_limit, resources, tasks, n_running, n_assigned = record
    worker = WorkerSnapshot(
        address=address,
        name=name,
        nthreads=nthreads,
        memory_limit=memory_limit,
        resources=uses(resources),
        tasks=[decode_task(t, address) for t in tasks],
        running_tasks=n_running,
        assigned_tasks=n_assigned,
    )
    for task in worker["tasks"]:
        if task["state"] == "assigned":
            task["waiting_for"] = assigned_reason(task["request"], worker)
    return worker


def snapshot(
    scheduler: str,
    time: float,
    seq: int,
    workers: Iterable[Sequence],
    totals: Mapping[str, Sequence[float]],
    queue: Iterable[Sequence],
    queued: int,
    recent: Iterable[Sequence] = (),
    samples: Sequence[Sequence] = (),
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


def decode(full: dict, samples: Sequence[Sequence] = (), address: str | None = None) -> Snapshot:
    """A whole-state message of the plugin (packed or not) as a snapshot; its strips from the
    history ``samples``, its dashboard link as seen from a client of ``address``."""
    full = unpack(full)
    return snapshot(
        full["scheduler"],
        full["time"],
        full["seq"],
        full["workers"],
        full["totals"],
        full["queue"],
        full["queued"],
        full["recent"],
        samples,
        dashboard_link(address or full["scheduler"], full["dashboard"]),
        full["pools"],
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


def strips(samples: Sequence[Sequence], now: float) -> list[UsageStrip]:
    """Per resource, the highest share of its total that running tasks held in each of the
    ``STRIP_STEPS`` steps up to ``now``, from history samples (oldest first)."""
    if not samples:
        return []
    last = math.floor(now / STRIP_SECONDS)
    first = last - STRIP_STEPS + 1
    # The sample in force when the strip begins, and every one after it.
    times = [s[0] for s in samples]
    begin = max(bisect.bisect_right(times, first * STRIP_SECONDS) - 1, 0)
    shares: dict[str, list[float | None]] = {}
    for i in range(begin, len(samples)):
        # Each sample holds from its time until the next one's (excluded), the last until now.
        since = math.floor(times[i] / STRIP_SECONDS)
        until = math.ceil(times[i + 1] / STRIP_SECONDS) - 1 if i + 1 < len(samples) else last
        lo = max(since, first) - first
        hi = min(max(until, since), last) - first
        for resource, (total, running, _) in samples[i][2].items():
            share = round(min(running / total, 1.0), 3) if total > 0 else 0.0
            steps = shares.setdefault(resource, [None] * STRIP_STEPS)
            for k in range(max(lo, 0), hi + 1):
                steps[k] = max(steps[k] or 0.0, share)
    return [
        UsageStrip(resource=r, start=first * STRIP_SECONDS, shares=shares[r])
        for r in sorted(shares, key=resource_order)
    ]


def decode_samples(samples: Iterable[Sequence]) -> list[tuple[float, int, list[ResourceUse]]]:
    """History samples as ``(time, queued, totals)``."""
    return [(t, queued, uses(totals)) for t, queued, totals in samples]


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
