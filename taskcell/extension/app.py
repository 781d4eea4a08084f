"""The taskcell jupyter_server extension: settings, handlers, and the hub's lifetime."""

from __future__ import annotations

from jupyter_server.extension.application import ExtensionApp
from traitlets import Float, List, Unicode

from taskcell.extension import snapshots
from taskcell.extension.control import ServerClusters
from taskcell.extension.dashboard import dashboard_handlers
from taskcell.extension.export_handler import ExportHandler
from taskcell.extension.handlers import handlers
from taskcell.extension.watch import ClusterHub


class TaskcellExtension(ExtensionApp):
    """Serves ``/taskcell/api/`` and ``/taskcell/dashboard/`` for the JupyterLab Resources
    sidebar.

    Configure it in ``jupyter_server_config.py`` as ``c.TaskcellExtension.<name>``.
    """

    name = "taskcell"
    load_other_extensions = True

    scheduler_addresses = List(
        Unicode(),
        help=(
            "Scheduler addresses the sidebar always lists, besides those recorded by the "
            "kernels that use taskcell and Dask's own scheduler-address setting."
        ),
    ).tag(config=True)

    idle_timeout = Float(
        120.0,
        help="Seconds after the last request for a cluster before its subscription is closed.",
    ).tag(config=True)

    connect_timeout = Float(
        5.0, help="Seconds to wait for a scheduler before reporting it unreachable."
    ).tag(config=True)

    retry_interval = Float(
        3.0, help="Seconds between attempts to reach a scheduler that cannot be reached."
    ).tag(config=True)

    def initialize_settings(self) -> None:
        self.started = ServerClusters()
        #: Addresses of the kernels' embedded clusters the sidebar stopped: their kernels
        #: record them until their next %%task starts another, and they are not listed.
        self.stopped: set[str] = set()
        self.hub = ClusterHub(
            snapshots.planner_feed,
            idle_after=self.idle_timeout,
            connect_timeout=self.connect_timeout,
            retry_every=self.retry_interval,
            started_here=self.started.owns,
        )

    def initialize_handlers(self) -> None:
        self.handlers.extend(handlers(self))
        self.handlers.append((r"/taskcell/api/export/?", ExportHandler, {"extension": self}))
        self.handlers.extend(dashboard_handlers(self))

    async def stop_extension(self) -> None:
        await self.hub.close()
        await self.started.close()
