"""The records that travel with a cell: what to run, and what running it cost."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from taskcell.runner.crossing import Definitions, Sealed


@dataclass(frozen=True, kw_only=True)
class Usage:
    """What one run actually used: seconds of wall and CPU time, the cell's own peak bytes of
    memory (None where the platform cannot tell it apart from earlier cells'), and peak bytes
    of GPU memory where NVML can tell (else None)."""

    wall: float
    cpu: float
    peak_memory: int | None
    gpu_memory: int | None = None

    @property
    def cores(self) -> float:
        """Cores kept busy on average (CPU time over wall time)."""
        return self.cpu / self.wall if self.wall > 0 else 0.0


@dataclass(frozen=True, kw_only=True)
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
    #: Small inputs, pickled together in the kernel (:mod:`taskcell.runner.crossing`).
    sealed: Sealed | None = None
    #: Inputs Dask brought to the worker: sealed and sent ahead, or results kept there.
    inputs: dict[str, Any] = field(default_factory=dict)
    #: Inputs bound to the same object as another input in the notebook: name -> that input.
    same: dict[str, str] = field(default_factory=dict)
    #: Inputs holding the notebook's Dask ``Client``: in the cell, the cell process's own.
    clients: tuple[str, ...] = ()
    #: Whether the cell may use Dask: its process then connects to the cluster first.
    uses_dask: bool = False
    #: Process-wide state the notebook has (:mod:`taskcell.runner.process_state`).
    state: list = field(default_factory=list)
    #: The cell's execution count, its ``In[N]``.
    count: int = 0
    #: The memory its process may hold: its request's limit (the request where none is given).
    memory_limit: int | None = None
    #: Outputs larger than this stay on the worker (``taskcell.result-threshold``).
    result_threshold: int = 0


class Shown:
    """Stands for a cell's last value that could not travel back: shown by its ``repr``, as
    the notebook would have shown the value itself."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


@dataclass(frozen=True, kw_only=True)
class CellResult:
    """What a cell that finished sends back to the notebook.

    ``outputs`` are the names it bound; ``changed`` the inputs it changed in place (their new
    state, for the notebook's own objects); ``aliases`` the outputs that are an input's object
    (``y = x``: the notebook binds its own ``x``), and ``value_alias`` the same for ``value``,
    its last expression; ``shared`` the outputs bound to the same object as another output.
    ``state`` is the process-wide state it changed, ``environ`` the environment variables it
    set (None: unset); ``lost`` the outputs and ``lost_changes``
    the changed inputs that could not travel back, with why; ``futures`` whether any of these
    hold Dask futures; ``definitions`` what it changed in the notebook's classes and functions
    (their attributes, a function's defaults).
    """

    outputs: dict[str, Any]
    value: Any
    usage: Usage
    worker: str = ""
    changed: dict[str, Any] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    shared: dict[str, str] = field(default_factory=dict)
    value_alias: str | None = None
    state: list = field(default_factory=list)
    environ: dict[str, str | None] = field(default_factory=dict)
    lost: dict[str, str] = field(default_factory=dict)
    lost_changes: dict[str, str] = field(default_factory=dict)
    futures: bool = False
    #: What the cell changed in the notebook's classes and functions.
    definitions: Definitions | None = None
