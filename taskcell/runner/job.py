"""The records that travel with a cell: what to run, and what running it cost."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Usage:
    """What one run actually used: seconds of wall and CPU time, peak bytes of memory, and
    peak bytes of GPU memory where NVML can tell (else None)."""

    wall: float
    cpu: float
    peak_memory: int
    gpu_memory: int | None = None

    @property
    def cores(self) -> float:
        """Cores kept busy on average (CPU time over wall time)."""
        return self.cpu / self.wall if self.wall > 0 else 0.0


@dataclass(frozen=True)
class CellJob:
    """One cell to run on a worker.

    ``source`` is the cell body after IPython's transforms; ``display_source`` is the cell as
    the user sees it (magic line included), registered under ``filename`` so a traceback shows
    the user's own lines; ``line_offset`` shifts the body's line numbers to match it.
    """

    key: str
    source: str
    display_source: str
    filename: str
    line_offset: int
    outputs: tuple[str, ...]
    #: The Dask event topic the worker reports on: the kernel client's id.
    topic: str
    #: Whole GPUs to pin (0: none visible); None: the worker's own devices (MIG, TPU, ...).
    gpus: int | None = 0
    #: Starts allowed after the first when a worker dies under the cell (``--retries``).
    retries: int = 0
    #: Small inputs, each pickled on its own in the kernel so one that fails is named.
    pickled: dict[str, bytes] = field(default_factory=dict)
    #: Inputs as values: those Dask brought to the worker (scattered, or kept remote).
    inputs: dict[str, Any] = field(default_factory=dict)
