"""The client side of the live occupancy view: snapshots, pushed updates, history.

:func:`snapshot` asks the scheduler once for the whole state; :class:`OccupancyFeed` keeps a
snapshot current from the updates the scheduler's :class:`~taskcell.planner.plugin.OccupancyPlugin`
pushes, on the client's own event loop, so it goes on while the kernel's main thread runs a
blocking cell. Both install the plugin on first use (idempotently, by value, so the scheduler
needs no taskcell of its own), and read what it sends with :mod:`taskcell.planner.codec`. Every
function works with a blocking client and, returning an awaitable, with an asynchronous one
(``Client(asynchronous=True)``, as a Jupyter server uses).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from taskcell.cluster import waits
from taskcell.planner import codec, ended, plugin
from taskcell.planner.schema import STRIP_SECONDS, STRIP_STEPS, PoolInfo, Snapshot
from taskcell.spec import amounts

if TYPE_CHECKING:
    import pandas as pd
    from distributed import Client

logger = logging.getLogger(__name__)

_registered: set[tuple[str, str]] = set()
_feeds: dict[str, set[OccupancyFeed]] = {}
_feeds_lock = threading.Lock()


# -- installing the plugin and calling it -----------------------------------------------------


def pickled_plugins() -> tuple[bytes, bytes]:
    """The scheduler plugin and the worker plugin, pickled by value with the code they run, so
    a scheduler and workers without taskcell installed can load them."""
    import cloudpickle
    from distributed.protocol.pickle import dumps

    for module in (plugin, ended, codec, waits, amounts):
        cloudpickle.register_pickle_by_value(module)
    return dumps(plugin.OccupancyPlugin()), dumps(plugin.StartReporter())


async def _install(client: Client, replace: bool = False) -> None:
    scheduler_plugin, worker_plugin = pickled_plugins()
    await client.scheduler.register_scheduler_plugin(
        plugin=scheduler_plugin, name=plugin.PLUGIN_NAME, idempotent=not replace
    )
    await client.scheduler.register_worker_plugin(
        plugin=worker_plugin, name=plugin.WORKER_PLUGIN_NAME, idempotent=not replace
    )
    _registered.add((client.id, client.scheduler.address))


async def _call(client: Client, op: str, /, **kwargs: Any) -> dict:
    """Call one of the plugin's handlers, installing (or upgrading) the plugin as needed."""
    if (client.id, client.scheduler.address) not in _registered:
        await _install(client)
    reply = await getattr(client.scheduler, op)(**kwargs)
    if not isinstance(reply, dict) or reply.get("v") != codec.WIRE_VERSION:
        # A scheduler that restarted without the plugin answers None; an older taskcell's
        # plugin answers another version. Either way, install ours and ask again.
        await _install(client, replace=isinstance(reply, dict))
        reply = await getattr(client.scheduler, op)(**kwargs)
    return reply


def install(client: Client) -> Any:
    """Install the occupancy plugin on ``client``'s scheduler and workers (idempotent)."""
    return client.sync(_install, client)


# -- one-off questions ------------------------------------------------------------------------


def _client(client: Client | None) -> Client:
    if client is not None:
        return client
    from taskcell.cluster.connect import current_client

    return current_client()


async def _snapshot_async(client: Client, strips: bool = True) -> Snapshot:
    """The whole state; its strips from the plugin's history unless ``strips`` is False."""
    full = await _call(client, "taskcell_occupancy")
    samples = (await _call(client, "taskcell_occupancy_history"))["samples"] if strips else []
    return codec.decode(full, samples, client.scheduler.address)


def snapshot(client: Client | None = None) -> Snapshot:
    """The cluster's occupancy now: every worker, its resources, its tasks, and the queue.

    Parameters
    ----------
    client : distributed.Client, optional
        The cluster to ask; taskcell's own (the one ``%%task`` uses) by default.

    Returns
    -------
    Snapshot
        See :mod:`taskcell.planner.schema`. Awaitable for an asynchronous client.
    """
    client = _client(client)
    return client.sync(_snapshot_async, client)


def frame(snap: Snapshot) -> pd.DataFrame:
    """One row per worker and resource: worker, name, resource, total, running, assigned, free."""
    import pandas as pd

    rows = [
        {
            "worker": w["address"],
            "name": w["name"],
            "resource": use["resource"],
            "total": use["total"],
            "running": use["running"],
            "assigned": use["assigned"],
            "free": max(use["total"] - use["running"] - use["assigned"], 0),
        }
        for w in snap["workers"]
        for use in w["resources"]
    ]
    columns = ["worker", "name", "resource", "total", "running", "assigned", "free"]
    return pd.DataFrame(rows, columns=columns)


def occupancy(client: Client | None = None) -> pd.DataFrame:
    """What every worker has and holds, as a DataFrame (one row per worker and resource).

    ``running`` is held by tasks that run, ``assigned`` asked for by tasks placed on the worker
    that wait there, ``free`` what neither takes. ``threads`` is each worker's Dask threads.
    The full picture (tasks, queue and reasons) is :func:`snapshot`.

    Examples
    --------
    >>> taskcell.occupancy()  # doctest: +SKIP
                        worker      name resource  total  running  assigned  free
    0  tcp://127.0.0.1:40211  gpu-box  threads      2        1         1     0
    1  tcp://127.0.0.1:40211  gpu-box      GPU      2        1         1     0
    """
    client = _client(client)
    if client.asynchronous:
        return _frame_async(client)
    return frame(client.sync(_snapshot_async, client, strips=False))


async def _frame_async(client: Client) -> pd.DataFrame:
    return frame(await _snapshot_async(client, strips=False))


def history_frame(samples: list) -> pd.DataFrame:
    """The plugin's samples as a tidy DataFrame (see :func:`occupancy_history`)."""
    import pandas as pd

    rows = [
        {
            "time": t,
            "resource": use["resource"],
            "total": use["total"],
            "running": use["running"],
            "assigned": use["assigned"],
            "free": max(use["total"] - use["running"] - use["assigned"], 0),
            "queued": queued,
        }
        for t, queued, totals in codec.decode_samples(samples)
        for use in totals
    ]
    columns = ["time", "resource", "total", "running", "assigned", "free", "queued"]
    out = pd.DataFrame(rows, columns=columns)
    out["time"] = pd.to_datetime(out["time"], unit="s", utc=True)
    return out


def occupancy_history(client: Client | None = None) -> pd.DataFrame:
    """The cluster's recent past: totals per resource over time, as a tidy DataFrame.

    One row per sample and resource: ``time`` (UTC), ``resource``, ``total``, ``running``,
    ``assigned``, ``free``, and ``queued`` (tasks in the queue at that time). The scheduler
    takes a sample at every change it publishes (at most four a second) and keeps the last 3600,
    from the moment taskcell first asked it about occupancy. Plot it with, e.g.,
    ``h.pivot_table(index="time", columns="resource", values="running")``
    ``.plot(drawstyle="steps-post")``.
    """
    client = _client(client)
    if client.asynchronous:
        return _history_async(client)
    return client.sync(_history_async, client)


async def _history_async(client: Client) -> pd.DataFrame:
    return history_frame((await _call(client, "taskcell_occupancy_history"))["samples"])


# -- live updates -----------------------------------------------------------------------------


def _dispatch(client_id: str) -> Callable[[tuple], None]:
    def handler(event: tuple) -> None:
        _, update = event
        with _feeds_lock:
            feeds = list(_feeds.get(client_id, ()))
        for feed in feeds:
            feed._receive(update)

    return handler


class OccupancyFeed:
    """A snapshot of one cluster, kept current by the updates its scheduler pushes.

    Updates arrive on the client's event loop, not the caller's thread, so the snapshot stays
    current while a notebook runs a blocking cell. ``on_update`` is called there after each
    update, with the feed; keep it short (set an event, schedule work).

    Parameters
    ----------
    client : distributed.Client, optional
        taskcell's client by default.
    on_update : callable, optional
        ``on_update(feed)`` after every applied update.

    Examples
    --------
    >>> feed = OccupancyFeed(client).start()          # doctest: +SKIP
    >>> feed.snapshot()["totals"]                     # doctest: +SKIP
    >>> feed.close()                                  # doctest: +SKIP

    With an asynchronous client, ``await feed.start()`` and ``await feed.close()``.
    """

    def __init__(
        self,
        client: Client | None = None,
        on_update: Callable[[OccupancyFeed], None] | None = None,
    ) -> None:
        self.client = _client(client)
        self.on_update = on_update
        self.updates = 0
        self.bytes_received = 0
        self._lock = threading.Lock()
        self._workers: dict[str, codec.WireWorker] = {}
        self._queue: list[codec.WireTask] = []
        self._queued = 0
        self._totals: dict[str, codec.WireUse] = {}
        self._recent: list[codec.WireEnded] = []
        self._pools: list[PoolInfo] = []
        self._dashboard_port: int | None = None
        self._dashboard: str | None = None
        #: History samples covering the strips' span, oldest first (see :meth:`_sample`).
        self._samples: deque[codec.WireSample] = deque()
        self._seq = -1
        self._epoch = ""
        self._time = 0.0
        self._scheduler = ""
        self._based = False
        self._buffer: list[dict] = []
        self._refetch: asyncio.Task | None = None
        self.closed = False

    def start(self) -> Any:
        """Subscribe and fetch the whole state; returns the feed (awaitable when asynchronous)."""
        return self.client.sync(self._start)

    async def _start(self) -> OccupancyFeed:
        with _feeds_lock:
            first = self.client.id not in _feeds
            _feeds.setdefault(self.client.id, set()).add(self)
        if first:
            self.client.subscribe_topic(plugin.TOPIC, _dispatch(self.client.id))
        try:
            full = await _call(self.client, "taskcell_occupancy_subscribe", client=self.client.id)
            history = await _call(self.client, "taskcell_occupancy_history")
        except BaseException:
            self.closed = True
            if self._forget():
                self.client.unsubscribe_topic(plugin.TOPIC)
            raise
        self._samples.extend(history["samples"])
        self._apply(codec.unpack(full))
        buffered, self._buffer = self._buffer, []
        self._based = True
        for update in buffered:
            self._receive(update)
        return self

    def _receive(self, update: dict) -> None:
        """One pushed update (on the client's event loop)."""
        if self.closed:
            return
        if not self._based:
            self._buffer.append(update)
            return
        if update.get("v") != codec.WIRE_VERSION:
            return
        if update.get("epoch") != self._epoch:
            self._resync()  # another plugin (a restarted scheduler): its numbers start over
            return
        if update["seq"] <= self._seq:
            return
        if update["seq"] != self._seq + 1:
            self._resync()  # missed one: start again from the whole state
            return
        self._apply(codec.unpack(update))

    def _resync(self) -> None:
        if self._refetch is not None and not self._refetch.done():
            return

        async def refetch() -> None:
            try:
                full = await _call(
                    self.client, "taskcell_occupancy_subscribe", client=self.client.id
                )
            except Exception as e:  # the cluster went away; the panel says so
                logger.debug("taskcell: occupancy refetch failed: %r", e)
                return
            if full["seq"] > self._seq or full.get("epoch") != self._epoch:
                self._apply(codec.unpack(full))

        self._refetch = asyncio.ensure_future(refetch())

    def _apply(self, update: codec.Update) -> None:
        with self._lock:
            if update["full"]:
                self._workers = {codec.worker_address(w): w for w in update["workers"]}
            else:
                for address in update["removed"]:
                    self._workers.pop(address, None)
                for w in update["workers"]:
                    self._workers[codec.worker_address(w)] = w
            if update["queue"] is not None:
                self._queue = update["queue"]
            if update["recent"] is not None:
                self._recent = update["recent"]
            if update["pools"] is not None:
                self._pools = update["pools"]
            self._queued = update["queued"]
            self._totals = update["totals"]
            if update["dashboard"] != self._dashboard_port:
                self._dashboard_port = update["dashboard"]
                self._dashboard = codec.dashboard_link(
                    self.client.scheduler.address, self._dashboard_port
                )
            self._sample(update)
            self._seq = update["seq"]
            self._epoch = update.get("epoch", "")
            self._time = update["time"]
            self._scheduler = update["scheduler"]
            self.updates += 1
        if self.on_update is not None:
            try:
                self.on_update(self)
            except Exception:
                logger.exception("taskcell: an occupancy update callback failed")

    def _sample(self, update: codec.Update) -> None:
        """Add the update's totals to the history the strips are drawn from (the plugin keeps
        the same sample of every update it publishes), and drop the samples they no longer
        reach, keeping the one in force where they begin."""
        now = update["time"]
        if not self._samples or codec.sample_time(self._samples[-1]) < now:
            sample = codec.sample_record(time=now, queued=update["queued"], totals=update["totals"])
            self._samples.append(sample)
        start = now - STRIP_SECONDS * (STRIP_STEPS + 1)
        while len(self._samples) > 1 and codec.sample_time(self._samples[1]) <= start:
            self._samples.popleft()

    @property
    def seq(self) -> int:
        """The sequence number of the last update applied (-1 before the first)."""
        return self._seq

    def snapshot(self) -> Snapshot:
        """The latest snapshot (a new, independent record on every call)."""
        with self._lock:  # copied under the lock, decoded outside it
            decode = functools.partial(
                codec.snapshot,
                scheduler=self._scheduler,
                time=self._time,
                seq=self._seq,
                workers=list(self._workers.values()),
                totals=dict(self._totals),
                queue=list(self._queue),
                queued=self._queued,
                recent=list(self._recent),
                samples=list(self._samples),
                dashboard=self._dashboard,
                pools=list(self._pools),
            )
        return decode()

    def close(self) -> Any:
        """Stop receiving updates (awaitable when asynchronous). Safe to call twice."""
        if self.closed:
            return None
        self.closed = True
        last = self._forget()
        if not last or self.client.status not in ("running", "connecting"):
            return None
        with contextlib.suppress(Exception):
            return self.client.sync(self._unsubscribe)
        return None

    def _forget(self) -> bool:
        """Drop this feed from its client's; True when it was the last one."""
        with _feeds_lock:
            feeds = _feeds.get(self.client.id, set())
            feeds.discard(self)
            if feeds:
                return False
            _feeds.pop(self.client.id, None)
            return True

    async def _unsubscribe(self) -> None:
        self.client.unsubscribe_topic(plugin.TOPIC)
        with contextlib.suppress(Exception):
            await self.client.scheduler.taskcell_occupancy_unsubscribe(client=self.client.id)

    def __enter__(self) -> OccupancyFeed:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
