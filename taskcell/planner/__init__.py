"""taskcell.planner: live occupancy, preset suggestions, right-sizing from measured use.

- :func:`occupancy`, :func:`occupancy_history`, :func:`snapshot`, :class:`OccupancyFeed`: what
  every worker has and holds, pushed by a scheduler plugin (:mod:`.plugin`) through one wire
  codec (:mod:`.codec`), in the one schema (:mod:`.schema`) the notebook panel and the JupyterLab
  sidebar share; :func:`snapshot_view` is how both show it (:mod:`.view`; amounts in the words
  of :mod:`taskcell.spec.amounts`).
- :func:`suggest`: the smallest preset for an input's size and a workload profile, and which
  live workers can run it.
- :func:`cell_input` and :func:`estimate_memory`: what a cell reads (notebook values and the
  files it opens) and the memory that comes to, from its code and a sample of its files.
- :func:`review`, :func:`latest_hints` and :func:`auto_preset`: what past runs used against
  what they asked for, and their peaks scaled to the next run's input.
- :func:`memory_failure` and :func:`escalate`: whether a cell failed for memory, and the
  request one rung up that would have held it.

Names are imported on first use, so ``import taskcell.planner`` costs nothing.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "occupancy": "taskcell.planner.feed",
    "occupancy_history": "taskcell.planner.feed",
    "snapshot": "taskcell.planner.feed",
    "install": "taskcell.planner.feed",
    "OccupancyFeed": "taskcell.planner.feed",
    "snapshot_view": "taskcell.planner.view",
    "suggest": "taskcell.planner.suggestion",
    "Suggestion": "taskcell.planner.suggestion",
    "capacities": "taskcell.planner.codec",
    "input_size": "taskcell.planner.sizing",
    "Profile": "taskcell.planner.workloads",
    "profiles": "taskcell.planner.workloads",
    "get_profile": "taskcell.planner.workloads",
    "profile_names": "taskcell.planner.workloads",
    "describe_profile": "taskcell.planner.workloads",
    "DEFAULT_PROFILE": "taskcell.planner.workloads",
    "review": "taskcell.planner.rightsize",
    "latest_hints": "taskcell.planner.rightsize",
    "kernel_history": "taskcell.runner.history",
    "Hint": "taskcell.planner.rightsize",
    "auto_preset": "taskcell.planner.auto",
    "AutoChoice": "taskcell.planner.auto",
    "cell_input": "taskcell.planner.estimate",
    "estimate_memory": "taskcell.planner.estimate",
    "memory_failure": "taskcell.planner.escalation",
    "escalate": "taskcell.planner.escalation",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'taskcell.planner' has no attribute {name!r}")
