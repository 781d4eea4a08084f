"""The JSON bodies of ``/taskcell/api/``; ``labextension/src/api.ts`` mirrors them one to one.

The occupancy snapshot itself is :class:`taskcell.planner.schema.Snapshot`, unchanged; these
records only say which clusters the server knows and how its link to each one stands.
"""

from __future__ import annotations

from typing import Literal, TypedDict

from taskcell.planner.schema import Snapshot

#: connecting: the server is opening its subscription; connected: snapshots flow;
#: unreachable: the scheduler cannot be reached (never started, gone, or the network), retried
#: every few seconds while someone watches; error: the scheduler answered but the snapshot feed
#: failed (the message says why).
LinkStatus = Literal["connecting", "connected", "unreachable", "error"]

#: kernel: a kernel of this server recorded that it submits there; config: the extension's
#: ``scheduler_addresses`` or Dask's ``scheduler-address`` configuration names it.
ClusterSource = Literal["kernel", "config"]


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


class ClusterState(TypedDict):
    """``GET /taskcell/api/clusters/<id>``: the latest snapshot and how the link stands.

    ``version`` grows by one with every change; ``?since=<version>`` waits for the next one.
    """

    id: str
    address: str
    status: LinkStatus
    message: str | None
    version: int
    updated: float
    snapshot: Snapshot | None


class CancelResult(TypedDict):
    """``POST /taskcell/api/clusters/<id>/cancel``: the task stopped, and how.

    ``was`` running: it is interrupted on its worker and frees its resources when its process
    ends; waiting: it was cancelled before it started.
    """

    key: str
    was: Literal["running", "waiting"]


class ErrorBody(TypedDict):
    """Every 4xx/5xx body, as Jupyter's ``APIHandler.write_error`` writes it."""

    message: str
    reason: str | None


def shown(value: object) -> str:
    """``repr(value)`` for an error message, cut short: a body may hold 4000 digits or a novel."""
    if isinstance(value, int) and value.bit_length() > 256:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"
