"""The matplotlib backend of a cell process: its figures appear in the notebook, as inline.

A cell process starts with ``MPLBACKEND=module://taskcell.runner.figures``. As with
matplotlib-inline, ``plt.show()`` displays the open figures and closes them, and the figures
still open when the cell ends are displayed then (:func:`flush`). Each goes through IPython's
display machinery with the notebook's own figure formats, so the notebook receives what its
inline backend would have drawn.
"""

from __future__ import annotations

import sys
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg as FigureCanvas

__all__ = ["FigureCanvas", "configure", "flush", "show"]

_formats: list[str] = ["png"]
_kwargs: dict[str, Any] = {"bbox_inches": "tight"}


def configure(formats: list[str], kwargs: dict[str, Any]) -> None:
    """Draw figures in these formats with these ``savefig`` options (the notebook's)."""
    global _formats, _kwargs
    _formats, _kwargs = list(formats), dict(kwargs)


def show(*args: Any, **kwargs: Any) -> None:
    """``plt.show()``: display the open figures now."""
    flush()


def flush() -> None:
    """Display every open pyplot figure, then close them all, as the inline backend does."""
    if "matplotlib.pyplot" not in sys.modules:
        return
    from IPython import get_ipython
    from IPython.core.pylabtools import select_figure_formats
    from IPython.display import display
    from matplotlib import pyplot
    from matplotlib._pylab_helpers import Gcf

    managers = Gcf.get_all_fig_managers()
    if not managers:
        return
    select_figure_formats(get_ipython(), _formats, **_kwargs)
    try:
        for manager in managers:
            display(manager.canvas.figure)
    finally:
        pyplot.close("all")
