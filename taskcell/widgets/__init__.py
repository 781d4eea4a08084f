"""taskcell.widgets: the live resource panel in the notebook (``taskcell.panel()``).

The panel's module is imported here, not on first use: importing a submodule named ``panel``
later would rebind ``taskcell.widgets.panel`` to the module, and a second ``panel()`` (or
``%task_panel``) would fail. It imports ipywidgets only when a panel is made.
"""

from __future__ import annotations

from taskcell.widgets.panel import Panel, panel

__all__ = ["Panel", "panel"]
