"""The JSON bodies of ``/taskcell/api/``; ``labextension/src/generated.ts`` is generated from
them (:mod:`taskcell.planner.typescript`, ``make generate``).

The occupancy snapshot itself is :class:`taskcell.planner.schema.Snapshot`, unchanged, and how it
is shown is :class:`taskcell.planner.view.SnapshotView`, computed here by the server; these
records say which clusters the server knows, how its link to each one stands, and what the
sidebar may do to them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypedDict

from taskcell.planner.schema import Snapshot
from taskcell.planner.view import SnapshotView

# The one ``shown`` (spec's), with which the handlers quote a request's values in their errors.
from taskcell.spec._util import shown as shown

if TYPE_CHECKING:
    from typing_extensions import NotRequired

    from taskcell.export import Target

#: connecting: the server is opening its subscription; connected: snapshots flow;
#: unreachable: the scheduler cannot be reached (never started, gone, or the network), retried
#: every few seconds while someone watches; error: the scheduler answered but the snapshot feed
#: failed (the message says why).
LinkStatus = Literal["connecting", "connected", "unreachable", "error"]

#: kernel: a kernel of this server recorded that it submits there; config: the extension's
#: ``scheduler_addresses`` or Dask's ``scheduler-address`` configuration names it; server: this
#: server started it from the sidebar (it stops with the server).
ClusterSource = Literal["kernel", "config", "server"]


class NotebookRef(TypedDict):
    """A session of this server whose kernel submits to the cluster."""

    path: str
    name: str
    kernel_id: str


class ClusterInfo(TypedDict):
    """One cluster in ``GET /taskcell/api/clusters``."""

    id: str
    address: str
    sources: list[ClusterSource]
    notebooks: list[NotebookRef]
    kernels: list[str]
    #: None until someone has asked for this cluster's occupancy.
    status: LinkStatus | None


class ClusterList(TypedDict):
    clusters: list[ClusterInfo]


class ClusterControl(TypedDict):
    """What the sidebar may do to a cluster besides cancelling tasks and retiring pools' workers.

    ``scalable``: taskcell started it (a kernel's embedded cluster, or one this server started),
    so it can be scaled and stopped; ``started_here``: this server started it, and stops it when
    it stops.
    """

    scalable: bool
    started_here: bool


class ClusterState(TypedDict):
    """``GET /taskcell/api/clusters/<id>``: the latest snapshot, how it is shown, and how the
    link stands.

    ``version`` grows by one with every change; ``?since=<version>`` waits for the next one.
    ``now`` is the scheduler's time as the server answered (from the offset of its clock,
    measured when it connected): the sidebar ticks the view's durations from it. ``view`` is the
    snapshot as the notebook panel shows it, with the server's own record of the tasks that
    ended while it watched; ``dashboard`` the Dask dashboard through this server, a path
    relative to its base URL (``taskcell/dashboard/<id>/status``; the view links to it too),
    else None.
    """

    id: str
    address: str
    status: LinkStatus
    message: str | None
    version: int
    updated: float
    now: float
    snapshot: Snapshot | None
    view: SnapshotView | None
    dashboard: str | None
    control: ClusterControl | None


class CancelResult(TypedDict):
    """``POST /taskcell/api/clusters/<id>/cancel``: the task stopped, and how.

    ``was`` running: it is interrupted on its worker and frees its resources when its process
    ends; waiting: it was cancelled before it started.
    """

    key: str
    was: Literal["running", "waiting"]


class ScaleResult(TypedDict):
    """``POST /taskcell/api/clusters/<id>/scale`` with ``{"workers": n}``: the workers the
    embedded cluster is asked to have now; they start or retire in the background."""

    workers: int


class StopResult(TypedDict):
    """``POST /taskcell/api/clusters/<id>/stop``: the cluster stopping."""

    address: str


class RetireResult(TypedDict):
    """``POST /taskcell/api/clusters/<id>/retire`` with ``{"worker": address}``: the pool's
    worker retired, its results moved to other workers."""

    worker: str


class StartWorkerResult(TypedDict):
    """``POST /taskcell/api/clusters/<id>/start-worker`` with ``{"kernel", "pool"}``: the
    kernel was asked for one more worker of its pool; the pool shows it starting."""

    kernel: str
    pool: str


class StartedCluster(TypedDict):
    """``POST /taskcell/api/clusters``: the embedded cluster this server started."""

    id: str
    address: str


class TaskOutput(TypedDict):
    """``GET /taskcell/api/clusters/<id>/tasks/<key>/output``: what a cell printed and displayed
    (as text, the last ``OUTPUT_LIMIT`` characters), and its error."""

    key: str
    worker: str | None
    text: str
    truncated: bool
    error: str | None


class ErrorBody(TypedDict):
    """Every 4xx/5xx body, as Jupyter's ``APIHandler.write_error`` writes it."""

    message: str
    reason: str | None


class Profile(TypedDict):
    """A planner profile the sidebar's form offers."""

    name: str
    description: str


class PlannerChoices(TypedDict):
    """``GET /taskcell/api/planner``: the profiles, and the one chosen when none is named."""

    profiles: list[Profile]
    default_profile: str


class SuggestionRequest(TypedDict):
    """``POST /taskcell/api/planner``: ``size`` a quantity, a number of bytes, or paths and globs
    relative to ``notebook``'s folder; ``cluster`` an id of ``GET /taskcell/api/clusters``."""

    size: str | float
    profile: NotRequired[str]
    cluster: NotRequired[str]
    notebook: NotRequired[str]


class ExportRequest(TypedDict):
    """``POST /taskcell/api/export``: a notebook, named as the contents API names it."""

    path: str
    #: ``"dask"`` when left out.
    target: NotRequired[Target]
    #: Replace a file at the module's path that taskcell did not write; without it the server
    #: answers 409 and writes nothing. A module taskcell wrote is replaced either way.
    overwrite: NotRequired[bool]


class ExportResult(TypedDict):
    """The module written beside the notebook."""

    #: Relative to the server's root, as the contents API names it.
    path: str
    target: Target
    #: Whether a file was there before: an earlier export, or any file with ``overwrite``.
    replaced: bool
    #: One sentence per cell part kept only as a comment, naming the cell.
    warnings: list[str]
