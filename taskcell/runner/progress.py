"""tqdm's notebook bar in a task cell: one display, updated in place as the bar moves.

In a notebook's kernel ``tqdm.notebook`` (and ``tqdm.auto``, which picks it there) draws an
ipywidgets bar. A cell process has no front end to hold a widget's model, and
``tqdm.autonotebook`` finds no ``ipykernel`` in it, so the same cell would print a text bar
to stderr instead. :func:`install` makes ``tqdm.notebook``, ``tqdm.autonotebook`` and so
``tqdm.auto`` give :func:`bar_class`'s bar: it is shown with IPython's ``display`` under a
``display_id`` and redrawn with ``update_display``, which the cell shell forwards to the
notebook (:mod:`taskcell.runner.cell_shell`), as often as tqdm redraws (``mininterval``).
Plain ``tqdm.tqdm`` stays a text bar on stderr, its ``\\r`` redraws passed through as a
plain cell's are.

tqdm is not a dependency: nothing here imports it before the cell does.
"""

from __future__ import annotations

import functools
import importlib.abc
import sys
from html import escape
from types import ModuleType
from typing import Any

#: Colours of the bar's ends, as ipywidgets' ``bar_style`` draws them.
_STYLE_COLOURS = {"success": "#5cb85c", "danger": "#d9534f", "info": "#5bc0de"}


@functools.cache
def bar_class() -> type:
    """The bar ``tqdm.notebook.tqdm`` is in a task cell (tqdm is imported here)."""
    from tqdm.std import tqdm as std_tqdm

    class tqdm_task(std_tqdm):
        """``tqdm.notebook``'s bar as one HTML display, updated in place; accepts its
        arguments (``display=False`` shows it only when it is next redrawn)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs = kwargs.copy()
            if kwargs.get("file") in (None, sys.stderr):
                kwargs["file"] = sys.stdout  # as tqdm.notebook: never the red block
            kwargs["gui"] = True  # tqdm's own printer stays off; display() draws
            kwargs["disable"] = bool(kwargs.get("disable", False))
            show_now = kwargs.pop("display", True)
            self._handle: Any = None
            self._style = ""
            super().__init__(*args, **kwargs)
            if self.disable:
                return
            self._visible = show_now and self.delay <= 0
            self.disp = self.display
            self.display(check_delay=False)

        def display(
            self,
            msg: str | None = None,
            pos: int | None = None,
            close: bool = False,
            bar_style: str | None = None,
            check_delay: bool = True,
        ) -> None:
            if bar_style and not (self._style == "danger" and bar_style == "success"):
                self._style = bar_style  # an error's colour outlives the close after it
            if check_delay and self.delay > 0:
                self._visible = True  # redrawn once the delay passed, as tqdm.notebook
            if not self._visible:
                return
            hidden = close and self._style != "danger"  # leave=False, but errors stay
            bundle = {"text/plain": ""} if hidden else self._bundle(msg)
            if self._handle is None:
                from IPython.display import display

                self._handle = display(bundle, raw=True, display_id=True)
            else:
                self._handle.update(bundle, raw=True)

        def _bundle(self, msg: str | None) -> dict[str, str]:
            """The bar as text and as HTML: tqdm's meter either side of a ``<progress>``."""
            d = self.format_dict
            text = msg if msg is not None else self.format_meter(**d)
            d["bar_format"] = (d["bar_format"] or "{l_bar}<bar/>{r_bar}").replace("{bar}", "<bar/>")
            d["colour"] = None  # the text's ANSI colour; the HTML bar takes it below
            meter = msg if msg is not None else self.format_meter(**d)
            left, _, right = meter.partition("<bar/>")
            left, right = left.rstrip("|"), right.lstrip("|")
            colour = _STYLE_COLOURS.get(self._style) or self.colour
            if self.total:
                value, top = self.n, self.total
            else:  # no total: a full bar, as tqdm.notebook's "info" style shows it
                value, top = 1, 1
                colour = colour or _STYLE_COLOURS["info"]
            accent = f"accent-color:{escape(str(colour))};" if colour else ""
            width = f"{int(self.ncols)}px" if isinstance(self.ncols, int) else "20em"
            html = (
                '<div class="jp-taskcell-progress" style="display:flex;align-items:center;'
                'gap:0.5em;white-space:pre">'
                f"<span>{escape(left)}</span>"
                f'<progress value="{value}" max="{top}" style="width:{width};{accent}">'
                "</progress>"
                f"<span>{escape(right)}</span></div>"
            )
            return {"text/plain": text, "text/html": html}

        def close(self) -> None:
            if self.disable:
                return
            super().close()
            # As tqdm.notebook: short of its total, something went wrong.
            if self.total and self.n < self.total:
                self.display(bar_style="danger", check_delay=False)
            elif self.leave:
                self.display(bar_style="success", check_delay=False)
            else:
                self.display(close=True, check_delay=False)

        def clear(self, *_: Any, **__: Any) -> None:
            pass  # tqdm.write() clears text bars before it prints; a display stays

        def __iter__(self) -> Any:
            try:
                yield from super().__iter__()
            except BaseException:
                self.display(bar_style="danger")
                raise

        def update(self, n: float = 1) -> bool | None:
            try:
                return super().update(n=n)
            except BaseException:
                self.display(bar_style="danger")
                raise

        def reset(self, total: float | None = None) -> None:
            self._style = ""
            super().reset(total=total)

    tqdm_task.__module__ = __name__
    tqdm_task.__qualname__ = "tqdm_task"
    return tqdm_task


def _trange(*args: Any, **kwargs: Any) -> Any:
    """``trange`` of ``tqdm.notebook`` and ``tqdm.autonotebook`` in a task cell."""
    return bar_class()(range(*args), **kwargs)


def _patch(module: ModuleType) -> None:
    """Point a freshly imported tqdm module's bar at :func:`bar_class`'s."""
    bar = bar_class()
    name = module.__name__
    if name == "tqdm.notebook":
        module.tqdm = module.tqdm_notebook = bar  # type: ignore[attr-defined]
        module.trange = module.tnrange = _trange  # type: ignore[attr-defined]
    elif name == "tqdm.autonotebook":
        module.tqdm = bar  # type: ignore[attr-defined]
        module.trange = _trange  # type: ignore[attr-defined]
    elif name == "tqdm.auto" and not issubclass(module.tqdm, bar):
        # imported before install(): made again as it makes itself, over our bar (its
        # trange reads this name)
        module.tqdm = type("tqdm", (bar, module.asyncio_tqdm), {})  # type: ignore[attr-defined]


#: The modules whose bar is replaced; ``tqdm.auto`` takes ``tqdm.autonotebook``'s.
_PATCHED = ("tqdm.notebook", "tqdm.autonotebook", "tqdm.auto")


class _Loader(importlib.abc.Loader):
    """A tqdm module's own loader, then :func:`_patch`."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: Any) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _patch(module)

    def __getattr__(self, name: str) -> Any:  # get_source, is_package, ...
        return getattr(self._loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the modules of :data:`_PATCHED` as the other finders do, loaded by :class:`_Loader`."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in _PATCHED:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


@functools.cache
def install() -> None:
    """In this (cell) process, from now on: ``tqdm.notebook`` and ``tqdm.auto`` draw the
    display bar. Modules already imported are patched in place."""
    sys.meta_path.insert(0, _Finder())
    for name in _PATCHED:
        module = sys.modules.get(name)
        if module is not None:
            _patch(module)
