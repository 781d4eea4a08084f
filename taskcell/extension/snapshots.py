"""The server's source of snapshots: the planner's pushed occupancy feed, on an async client.

A thin adapter: :class:`taskcell.planner.feed.OccupancyFeed` installs the planner's scheduler
plugin (idempotently) and applies the updates it pushes on the client's event loop, which in
the Jupyter server is the server's own loop. Nothing runs in a kernel, and nothing polls
``run_on_scheduler``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING

from taskcell.planner.schema import Snapshot

if TYPE_CHECKING:
    from distributed import Client

    from taskcell.planner.feed import OccupancyFeed


class PlannerFeed:
    """One started :class:`~taskcell.planner.feed.OccupancyFeed` (a :class:`FeedHandle`)."""

    def __init__(self, feed: OccupancyFeed) -> None:
        self._feed = feed

    def snapshot(self) -> Snapshot:
        return self._feed.snapshot()

    async def close(self) -> None:
        result = self._feed.close()
        if inspect.isawaitable(result):
            await result


async def planner_feed(client: Client, on_change: Callable[[], None]) -> PlannerFeed:
    """Subscribe to ``client``'s cluster; ``on_change()`` after every update it pushes."""
    from taskcell.planner.feed import OccupancyFeed

    feed = OccupancyFeed(client, on_update=lambda _feed: on_change())
    await feed.start()
    return PlannerFeed(feed)
