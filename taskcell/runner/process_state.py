"""Process-wide state a cell relies on, carried to its worker and back.

A notebook's cells share one process: its working directory, a seeded ``random`` or
``numpy.random``, matplotlib's style, pandas' display options, scikit-learn's config, the
warnings filters. A task cell runs in another process, so each :class:`Carrier` captures one
such piece in the kernel, sets it in the cell's process before the cell runs, and brings back
what the cell changed (a generator that moved on, an option it set), which the kernel takes
only if the cell succeeds.

This module is the one list of them. Add one for another library with :func:`register`; its
functions travel with each cell (by reference when importable, else by value)::

    import taskcell.runner.process_state as ps
    ps.register("torch.random", "torch", torch.random.get_rng_state, torch.random.set_rng_state)

A carrier is captured only where its module is already imported, so a cell pays nothing for a
library the notebook does not use.
"""

from __future__ import annotations

import functools
import logging
import pickle
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Carrier", "apply", "capture", "changed", "register", "registered"]


@dataclass(frozen=True, kw_only=True)
class Carrier:
    """One piece of process-wide state: how to read it and how to set it.

    Attributes
    ----------
    name
        What it is called in messages and in the state sent with a cell.
    module
        The module that must be imported for the state to exist (``"numpy"``).
    get
        Returns the state, a picklable value.
    set
        Sets the state from what ``get`` returned (in another process).
    returns
        Whether a change the cell makes comes back to the notebook (``sys.path`` does not: the
        cell's process has paths of its own).
    """

    name: str
    module: str
    get: Callable[[], Any]
    set: Callable[[Any], None]
    returns: bool = True


_CARRIERS: dict[str, Carrier] = {}


def register(
    name: str,
    module: str,
    get: Callable[[], Any],
    set: Callable[[Any], None],
    returns: bool = True,
) -> None:
    """Carry one more piece of process-wide state with every ``%%task`` cell (see above)."""
    _CARRIERS[name] = Carrier(name=name, module=module, get=get, set=set, returns=returns)


def registered() -> list[Carrier]:
    """Every carrier, in the order registered: what ``%%task`` and exported modules carry."""
    return list(_CARRIERS.values())


State = list[tuple[Carrier, Any]]
"""Carriers with their states, as sent with a cell and returned by it."""


def capture(carriers: list[Carrier] | None = None) -> State:
    """The state of every carrier (the registered ones by default) whose module this process
    has imported."""
    chosen = list(_CARRIERS.values()) if carriers is None else carriers
    return [(c, c.get()) for c in chosen if c.module in sys.modules]


def apply(state: State) -> None:
    """Set each carrier's state, as captured in another process."""
    for carrier, value in state:
        carrier.set(value)


def changed(before: State) -> State:
    """The states that differ from ``before`` now (a carrier's module newly imported too),
    of the carriers in ``before`` (another process's own among them) and those registered."""
    carriers = {**_CARRIERS, **{carrier.name: carrier for carrier, _ in before}}
    returning = [c for c in carriers.values() if c.returns]
    sent = {carrier.name: value for carrier, value in before}
    return [
        (c, v) for c, v in capture(returning) if c.name not in sent or _differs(v, sent[c.name])
    ]


def _bytes(value: Any) -> bytes | None:
    try:
        return pickle.dumps(value)
    except Exception:  # a state that does not pickle cannot be compared: call it changed
        return None


# -- the built-in carriers -------------------------------------------------------------------


def _random_get() -> Any:
    import random

    return random.getstate()


def _random_set(state: Any) -> None:
    import random

    random.setstate(state)


def _numpy_get() -> Any:
    import numpy

    return numpy.random.get_state()


def _numpy_set(state: Any) -> None:
    import numpy

    numpy.random.set_state(state)


#: rcParams that belong to the process, not to the notebook's style.
_RC_OWN = frozenset({"backend", "backend_fallback", "interactive", "webagg.port", "timezone"})


def _matplotlib_get() -> Any:
    import matplotlib

    defaults = matplotlib.rcParamsDefault
    return {
        k: v
        for k, v in matplotlib.rcParams.items()
        if k not in _RC_OWN and _differs(v, defaults.get(k))
    }


def _differs(a: Any, b: Any) -> bool:
    try:
        return bool(a != b)
    except Exception:  # arrays and the like: compare what they pickle to
        return _bytes(a) != _bytes(b) or _bytes(a) is None


def _matplotlib_set(state: Any) -> None:
    import matplotlib

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        matplotlib.rcdefaults()
        matplotlib.rcParams.update(state)


def _inline_get() -> Any:
    from matplotlib_inline.config import InlineBackend

    config = InlineBackend.instance()
    return {"formats": sorted(config.figure_formats), "kwargs": dict(config.print_figure_kwargs)}


def _inline_set(state: Any) -> None:
    """In a cell process: draw figures as the notebook's inline backend would."""
    from taskcell.runner import figures

    figures.configure(state["formats"], state["kwargs"])


def _pandas_options() -> dict[str, Any]:
    """pandas' options now, read from its own store (``get_option`` one by one is 10x slower),
    deprecated ones aside (they warn when set)."""
    from pandas._config import config

    return {
        key: value
        for key, value in _flattened(config._global_config).items()
        if key not in config._deprecated_options
    }


def _flattened(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(_flattened(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


@functools.cache
def _pandas_defaults() -> dict[str, Any]:
    from pandas._config import config

    return {key: option.defval for key, option in config._registered_options.items()}


def _pandas_get() -> Any:
    defaults = _pandas_defaults()
    return {k: v for k, v in _pandas_options().items() if _differs(v, defaults.get(k))}


def _pandas_set(state: Any) -> None:
    import pandas

    defaults = _pandas_defaults()
    for key, value in _pandas_options().items():
        wanted = state.get(key, defaults.get(key))
        if _differs(value, wanted):
            pandas.set_option(key, wanted)


def _sklearn_get() -> Any:
    import sklearn

    return sklearn.get_config()


def _sklearn_set(state: Any) -> None:
    import sklearn

    sklearn.set_config(**state)


def _printoptions_get() -> Any:
    import numpy

    return numpy.get_printoptions()


def _printoptions_set(state: Any) -> None:
    import numpy

    numpy.set_printoptions(**state)


def _logging_get() -> Any:
    """The root logger's level and its handlers that print to the cell (``basicConfig``)."""
    root = logging.getLogger()
    printing = []
    for handler in root.handlers:
        stream = _printed_to(handler)
        if stream is not None:
            formatter = handler.formatter
            fmt = (formatter._fmt, formatter.datefmt) if formatter else (None, None)
            printing.append((stream, handler.level, *fmt))
    return {"level": root.level, "handlers": printing}


def _printed_to(handler: Any) -> str | None:
    if not isinstance(handler, logging.StreamHandler):
        return None
    if isinstance(handler, _StdHandler):
        return handler.name_of_stream
    stream = handler.__dict__.get("stream")
    return next((n for n in ("stdout", "stderr") if stream is getattr(sys, n)), None)


def _logging_set(state: Any) -> None:
    root = logging.getLogger()
    root.setLevel(state["level"])
    for handler in [h for h in root.handlers if _printed_to(h) is not None]:
        root.removeHandler(handler)
    for stream, level, fmt, datefmt in state["handlers"]:
        handler = _StdHandler(stream)
        handler.setLevel(level)
        handler.setFormatter(logging.Formatter(fmt, datefmt))
        root.addHandler(handler)


class _StdHandler(logging.StreamHandler):
    """Prints to ``sys.stdout`` or ``sys.stderr`` as they are when a record comes: a cell's own
    streams, in a cell's process."""

    def __init__(self, name_of_stream: str) -> None:
        super().__init__()
        self.name_of_stream = name_of_stream

    @property
    def stream(self) -> Any:
        return getattr(sys, self.name_of_stream)

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def _syspath_get() -> Any:
    cwd = _cwd()
    return [p or cwd for p in sys.path if p or cwd]


def _syspath_set(state: Any) -> None:
    missing = [p for p in state if p not in sys.path]
    sys.path[:0] = missing


#: In a cell's process: the notebook's directory, where this machine has none, and the
#: directory the cell ran in instead (the notebook's, as far as the notebook is told).
_cwd_elsewhere: tuple[str | None, str] | None = None


def _cwd() -> str | None:
    """The working directory; None where it was removed under the process."""
    import os

    try:
        return os.getcwd()
    except FileNotFoundError:
        return None


def _cwd_get() -> Any:
    cwd = _cwd()
    if _cwd_elsewhere is not None and cwd == _cwd_elsewhere[1]:
        return _cwd_elsewhere[0]
    return cwd


def _cwd_set(state: Any) -> None:
    """Run where the notebook runs, so its relative paths mean the same files; a worker on a
    machine without that directory (or a notebook whose directory was removed, None) runs where
    it is, and the notebook keeps its own."""
    import os

    global _cwd_elsewhere
    if state is not None and os.path.isdir(state):
        os.chdir(state)
        _cwd_elsewhere = None
    else:
        _cwd_elsewhere = state, _cwd() or ""


def _warnings_get() -> Any:
    return list(warnings.filters)


def _warnings_set(state: Any) -> None:
    warnings.filters[:] = state  # type: ignore[index]
    warnings._filters_mutated()  # type: ignore[attr-defined]


register("sys.path", "sys", _syspath_get, _syspath_set, returns=False)
register("working directory", "os", _cwd_get, _cwd_set)
register("random", "random", _random_get, _random_set)
register("numpy print options", "numpy", _printoptions_get, _printoptions_set)
register("logging", "logging", _logging_get, _logging_set)
register("numpy.random", "numpy", _numpy_get, _numpy_set)
register("matplotlib", "matplotlib", _matplotlib_get, _matplotlib_set)
register("inline figures", "matplotlib_inline.config", _inline_get, _inline_set)
register("pandas options", "pandas", _pandas_get, _pandas_set)
register("sklearn config", "sklearn", _sklearn_get, _sklearn_set)
register("warnings filters", "warnings", _warnings_get, _warnings_set)
