"""One live subscription per cluster, shared by every browser tab, in the server's event loop.

A :class:`ClusterWatch` holds one asynchronous ``distributed.Client`` and the planner's pushed
snapshots for one scheduler; browsers long-poll it with the last version they saw
(:meth:`ClusterWatch.changed`), so a hundred open sidebars cost the scheduler one subscriber.
Nothing here blocks the loop: connecting, receiving and closing are all awaited, and a
scheduler that cannot be reached becomes a state (``unreachable``) retried every few seconds,
not an exception in a request.

A watch nobody has asked about for :attr:`ClusterHub.idle_after` seconds is closed, so the
server holds no connection to a cluster whose sidebar is closed. Its client also acts for the
sidebar (:meth:`ClusterWatch.connected`): it stops tasks, scales and stops the embedded cluster,
retires pools' workers and reads a task's output (:mod:`taskcell.extension.control`).

Each state carries the snapshot's view, computed here once per version with
:mod:`taskcell.extension.sidebar_view` (the tasks that ended while the watch ran, the dashboard
through this server), and the scheduler's time as the server answers, from its clock's offset
measured when the watch connected: the sidebar ticks durations from it.

A watch connects with Dask's TLS config, as a kernel does; a kernel's embedded TLS cluster and a
Dask Gateway cluster with their own credentials (:func:`security_for`).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from taskcell.extension import control, sidebar_view
from taskcell.extension.clusters import cluster_id, normalize_address
from taskcell.extension.payloads import ClusterControl, ClusterState, LinkStatus
from taskcell.planner.schema import EndedTask, Snapshot
from taskcell.planner.view import SnapshotView

if TYPE_CHECKING:
    from distributed import Client
    from distributed.security import Security

log = logging.getLogger(__name__)


class FeedHandle(Protocol):
    """A started subscription: its latest snapshot, and how to stop it."""

    def snapshot(self) -> Snapshot: ...

    async def close(self) -> None: ...


#: ``await feed(client, on_change)`` subscribes to ``client``'s cluster, calls ``on_change()``
#: (on the event loop, cheaply) after every pushed change, and returns the handle; the watch
#: builds a snapshot only when a browser asks for one.
Feed = Callable[["Client", Callable[[], None]], Awaitable[FeedHandle]]

#: How often the watch looks at its client's status to notice a lost scheduler (seconds).
#: A local attribute read, no network.
LINK_CHECK = 0.25


class ClusterWatch:
    """The server's one subscription to the scheduler at ``address``.

    Parameters
    ----------
    address : str
        The scheduler's address.
    feed : Feed
        Where snapshots come from (see :mod:`taskcell.extension.snapshots`).
    connect_timeout : float
        Seconds to wait for the scheduler before calling it unreachable.
    retry_every : float
        Seconds between attempts while it is unreachable.
    started_here : callable
        ``started_here(address)``: whether this server started the cluster at ``address``.
    """

    def __init__(
        self,
        address: str,
        feed: Feed,
        *,
        connect_timeout: float = 5,
        retry_every: float = 3,
        started_here: Callable[[str], bool] = lambda address: False,
    ) -> None:
        self.address = normalize_address(address)
        self.id = cluster_id(self.address)
        self._started_here = started_here
        self.last_used = time.monotonic()
        self._feed = feed
        self._connect_timeout = connect_timeout
        self._retry_every = retry_every
        self._status: LinkStatus = "connecting"
        self._message: str | None = None
        self._snapshot: Snapshot | None = None
        self._handle: FeedHandle | None = None
        self._client: Client | None = None
        self._stale = False
        self._offset = 0.0
        self._embedded = False
        self._ended: dict[str, EndedTask] = {}
        self._view: tuple[int, SnapshotView | None] = (-1, None)
        self._version = 0
        self._updated = time.time()
        self._changed = asyncio.Event()
        self._closed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def status(self) -> LinkStatus:
        return self._status

    def start(self) -> None:
        """Start the subscription in the running event loop (idempotent)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"taskcell-watch-{self.address}"
            )

    @property
    def dashboard(self) -> str | None:
        """The Dask dashboard's own link, from the latest snapshot (None without one)."""
        return self._snapshot["dashboard"] if self._snapshot is not None else None

    def now(self) -> float:
        """The scheduler's time now, as this server reads its clock."""
        return time.time() + self._offset

    def state(self) -> ClusterState:
        """The latest snapshot, its view, and how the link stands."""
        self.last_used = time.monotonic()
        self._refresh()
        dashboard = sidebar_view.proxied_dashboard(self.dashboard, self.address, self.id)
        version, view = self._view
        if version != self._version:
            view = None
            if self._snapshot is not None:
                view = sidebar_view.cluster_view(self._snapshot, self._ended, self.now(), dashboard)
            self._view = (self._version, view)
        return ClusterState(
            id=self.id,
            address=self.address,
            status=self._status,
            message=self._message,
            version=self._version,
            updated=self._updated,
            now=self.now(),
            snapshot=self._snapshot,
            view=view,
            dashboard=dashboard,
            control=self.control(),
        )

    def control(self) -> ClusterControl | None:
        """What the sidebar may do to the cluster; None until connected."""
        if self._status != "connected":
            return None
        here = self._started_here(self.address)
        return ClusterControl(scalable=here or self._embedded, started_here=here)

    def _refresh(self) -> None:
        """Build the snapshot after pushed changes, keeping the tasks that ended meanwhile."""
        if self._stale and self._handle is not None:
            self._snapshot = self._handle.snapshot()
            self._stale = False
            sidebar_view.merge_ended(self._ended, self._snapshot["recent"])

    async def changed(self, since: int | None, timeout: float) -> ClusterState:
        """The state once its version differs from ``since``, or after ``timeout`` seconds.

        ``since=None`` answers at once; so does any ``since`` other than the current version
        (a browser that saw an older watch, before a server restart, is not kept waiting).
        """
        self.last_used = time.monotonic()
        if since is not None and since == self._version and not self._closed.is_set():
            event = self._changed
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(event.wait(), timeout)
        return self.state()

    async def settled(self, timeout: float) -> ClusterState:
        """The state once the first connection attempt is over (or after ``timeout`` s)."""
        deadline = time.monotonic() + timeout
        state = self.state()
        while state["status"] == "connecting" and (left := deadline - time.monotonic()) > 0:
            state = await self.changed(state["version"], left)
        return state

    def connected(self) -> Client:
        """This watch's client, to act on the cluster through.

        Raises
        ------
        ConnectionError
            The watch is not connected to its scheduler.
        """
        client = self._client
        if client is None or self._status != "connected":
            raise ConnectionError(f"the server is not connected to the scheduler at {self.address}")
        return client

    async def close(self) -> None:
        """Stop the subscription and release anyone waiting on it."""
        self._closed.set()
        self._bump()
        if self._task is not None:
            await self._task
            self._task = None

    # -- the subscription ------------------------------------------------------------------

    def _bump(self) -> None:
        self._version += 1
        self._updated = time.time()
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    def _set(self, status: LinkStatus, message: str | None = None) -> None:
        if (status, message) != (self._status, self._message):
            self._status, self._message = status, message
            self._bump()

    def _on_change(self) -> None:
        self._stale = True
        self._status, self._message = "connected", None
        self._bump()

    async def _run(self) -> None:
        while not self._closed.is_set():
            client = await self._connect()
            if client is not None:
                await self._follow(client)
            if not self._closed.is_set():
                await self._pause(self._retry_every)

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._closed.wait(), seconds)

    async def _connect(self) -> Client | None:
        from distributed import Client

        if self._status != "unreachable":
            self._set("connecting")
        client = None
        try:
            security = await asyncio.wait_for(security_for(self.address), self._connect_timeout)
            client = Client(
                self.address,
                asynchronous=True,
                timeout=self._connect_timeout,
                set_as_default=False,
                name="taskcell-jupyter-server",
                security=security,
            )
            await client
        except (OSError, asyncio.TimeoutError) as e:
            await self._discard(client)
            self._set("unreachable", f"cannot reach the scheduler at {self.address}: {e}")
            return None
        except Exception as e:  # e.g. a malformed address: a state the sidebar shows
            await self._discard(client)
            self._set("error", f"cannot connect to the scheduler at {self.address}: {e!r}")
            return None
        return client

    @staticmethod
    async def _embedded_info(client: Client) -> bool:
        """Whether the cluster is an embedded cluster that scales and stops itself; False where
        its scheduler refuses the control plugin (the sidebar then offers neither)."""
        try:
            return await control.info(client)
        except (OSError, asyncio.TimeoutError):
            raise
        except Exception as e:  # a scheduler that cannot load it: the rest still works
            log.warning("taskcell: no cluster control on %s: %r", client.scheduler.address, e)
            return False

    @staticmethod
    async def _discard(client: Client | None) -> None:
        """Close a client that never finished connecting (it would retry on its own)."""
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()

    async def _follow(self, client: Client) -> None:
        self._client = client
        try:
            self._offset = await control.scheduler_offset(client)
            self._embedded = await self._embedded_info(client)
            self._handle = await self._feed(client, self._on_change)
            self._on_change()
            while client.status == "running" and not self._closed.is_set():
                self._refresh()  # so the tasks that end are kept though nobody asks
                await self._pause(LINK_CHECK)
            if not self._closed.is_set():
                self._set("unreachable", f"lost the connection to the scheduler at {self.address}")
        except (OSError, asyncio.TimeoutError) as e:
            self._set("unreachable", f"lost the connection to the scheduler at {self.address}: {e}")
        except Exception as e:
            # The feed is the planner's code running against a live scheduler: whatever it
            # raises must become a state the sidebar shows, not a dead task nobody sees.
            log.exception("taskcell: the occupancy feed for %s failed", self.address)
            self._set("error", f"the occupancy feed for {self.address} failed: {e!r}")
        finally:
            await self._release(client)

    async def _release(self, client: Client) -> None:
        self._client = None
        handle, self._handle = self._handle, None
        if handle is not None:
            # Keep the last snapshot to show, dimmed, while the link is down.
            if self._stale:
                self._snapshot = handle.snapshot()
                self._stale = False
            # Always: the feed also forgets itself, whether or not the scheduler can be told.
            with contextlib.suppress(OSError, asyncio.TimeoutError):
                await asyncio.wait_for(handle.close(), self._connect_timeout)
        with contextlib.suppress(OSError, asyncio.TimeoutError, RuntimeError):
            await asyncio.wait_for(client.close(), self._connect_timeout)


async def security_for(address: str) -> Security | None:
    """How the server speaks to the scheduler at ``address``: a Dask Gateway cluster's own
    credentials, asked of the gateway that Dask's ``gateway.*`` config names; a kernel's
    embedded TLS cluster's, as its process left them for this user; else None, Dask's
    ``distributed.comm.tls.*`` config (as for a kernel's client)."""
    if address.startswith("gateway://"):
        return await _gateway_security(address)
    from taskcell.cluster.embedded import kept_security

    return kept_security(address)


async def _gateway_security(address: str) -> Security | None:
    """The credentials of the Gateway cluster at ``gateway://PROXY/NAME``."""
    try:
        gateway_module = importlib.import_module("dask_gateway")  # an optional dependency
    except ImportError:
        raise ConnectionError(
            f"the cluster at {address} is a Dask Gateway cluster, and the Jupyter server needs "
            f'dask-gateway to reach it: pip install "taskcell[gateway]"'
        ) from None
    name = address.rstrip("/").rpartition("/")[2]
    async with gateway_module.Gateway(asynchronous=True) as gateway:
        report = await gateway.get_cluster(name)
    return report.security


class ClusterHub:
    """Every watch of this server, created on first use and closed when idle."""

    def __init__(
        self,
        feed: Feed,
        *,
        idle_after: float = 120,
        connect_timeout: float = 5,
        retry_every: float = 3,
        started_here: Callable[[str], bool] = lambda address: False,
    ) -> None:
        self.feed = feed
        self.idle_after = idle_after
        self.options: dict[str, Any] = {
            "connect_timeout": connect_timeout,
            "retry_every": retry_every,
            "started_here": started_here,
        }
        self._watches: dict[str, ClusterWatch] = {}
        self._reaper: asyncio.Task[None] | None = None

    def statuses(self) -> dict[str, LinkStatus]:
        """Cluster id -> link status, for the clusters watched now."""
        return {cid: w.status for cid, w in self._watches.items()}

    def find(self, cid: str) -> ClusterWatch | None:
        """The watch of the cluster ``cid``, if one runs."""
        return self._watches.get(cid)

    def watch(self, address: str) -> ClusterWatch:
        """The watch of ``address``, started if it was not running."""
        cid = cluster_id(address)
        found = self._watches.get(cid)
        if found is None:
            found = self._watches[cid] = ClusterWatch(address, self.feed, **self.options)
            found.start()
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap())
        return found

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(max(1.0, self.idle_after / 4))
            cutoff = time.monotonic() - self.idle_after
            for cid, w in list(self._watches.items()):
                if w.last_used < cutoff:
                    del self._watches[cid]
                    await w.close()

    async def close(self) -> None:
        """Close every watch (the server is stopping)."""
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        watches, self._watches = list(self._watches.values()), {}
        await asyncio.gather(*(w.close() for w in watches))
