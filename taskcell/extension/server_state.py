"""What the handlers read of the extension app, as a ``Protocol``: the app
(:class:`~taskcell.extension.app.TaskcellExtension`) registers the handlers, so they sit below it
and name only this."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from taskcell.extension.control import ServerClusters
    from taskcell.extension.watch import ClusterHub


class ServerState(Protocol):
    """The extension's settings and state, as the handlers use them."""

    hub: ClusterHub
    started: ServerClusters
    """The clusters this server started."""
    stopped: set[str]
    """Addresses of the kernels' embedded clusters the sidebar stopped (not listed)."""
    scheduler_addresses: list[str]
    connect_timeout: float
