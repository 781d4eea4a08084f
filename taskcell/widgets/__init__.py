"""taskcell.widgets: the live resource panel in the notebook (``taskcell.panel()``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from taskcell.widgets.panel import Panel

__all__ = ["Panel", "panel"]


def panel(client: Any = None, history: list | None = None) -> Panel:
    """Show the live resource panel; see :func:`taskcell.widgets.panel.panel`."""
    from taskcell.widgets.panel import panel as make

    return make(client, history)


def __getattr__(name: str) -> Any:
    if name == "Panel":
        from taskcell.widgets.panel import Panel

        return Panel
    raise AttributeError(f"module 'taskcell.widgets' has no attribute {name!r}")
