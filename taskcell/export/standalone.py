"""Functions an exported module carries, so that it means what the notebook meant.

Each function is self-contained (its imports inside it, no module globals), so the ``flyte`` and
``latch`` targets copy it into the module with :func:`source` and the module needs no taskcell;
the ``dask`` target imports them from here. What they stand for in a notebook:

- :func:`show`: a cell's ``Out[]``, written as IPython writes its text (``None`` shows nothing).
- :func:`shell`, :func:`script`, :func:`write_file`, :func:`time_it`: ``!cmd`` and
  ``x = !cmd``, ``%%bash``, ``%%writefile``, ``%timeit``, with IPython's expansion of
  ``{expression}`` and ``$name`` from the caller's names.
- :func:`star_import`: a star import, where its cell ran it, and again at the start of each
  later ``flyte`` or ``latch`` task that runs in a process of its own.
- :func:`capture`: ``%%capture``, its result a value that travels between tasks.
- :func:`ipython`: an IPython shell for the process, so ``display()`` and ``%%capture`` behave
  as in a kernel (a display prints its text).
- :func:`rebound`: a notebook function Latch carries between tasks as a value, reading the
  notebook's names as they are when it is called.
- the process-wide state a notebook's cells share is carried as ``%%task`` carries it, by
  :mod:`taskcell.runner.process_state` itself (``dask``) or by its carriers shipped as source
  (``flyte``, ``latch``: :mod:`taskcell.export.carriers`).
- :func:`close_figures`: figures closed after a cell, as the inline backend does.
- :func:`caches_by_value`: a cached function of the notebook carried as ``%%task`` carries it.
- :func:`portable`: a value Flyte and Latch carry as a pickle even where they refuse the value
  itself; its Dask Futures as they ended, where the module makes the notebook's client
  (:func:`taskcell.export.carriers.local_dask`, which stands for ``Client()`` in a task).
- :func:`cores`, :func:`gib`, :func:`on_this_machine`: Latch's units and local files.

Tests check each against taskcell's own parsers and records.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

__all__ = [
    "caches_by_value",
    "capture",
    "close_figures",
    "cores",
    "gib",
    "ipython",
    "on_this_machine",
    "portable",
    "rebound",
    "script",
    "shell",
    "show",
    "source",
    "star_import",
    "time_it",
    "write_file",
]


def show(value: object) -> None:
    """Print a cell's ``Out[]`` value as IPython writes it (its ``text/plain``); nothing for
    ``None``."""
    if value is None:
        return
    try:
        from IPython.core.formatters import PlainTextFormatter
    except ImportError:
        print(repr(value))
    else:
        print(PlainTextFormatter()(value))


def shell(command: str, lines: bool = False) -> Any:
    """``!command`` (or, with ``lines``, ``x = !command``): run it in the shell, its output
    printed (or returned as a list of lines, IPython's ``SList`` where IPython is installed).

    ``{expression}`` and ``$name`` are expanded from the caller's names as IPython expands
    them: all or, where one fails, none.
    """
    import contextlib
    import subprocess
    import sys

    caller = sys._getframe(1)
    kind: Any = list  # of the lines: IPython's SList where IPython is installed
    try:
        from IPython.utils.text import DollarFormatter, SList
    except ImportError:
        pass
    else:
        kind = SList
        names = {**caller.f_globals, **caller.f_locals}
        # IPython runs the command as typed when a name is missing.
        with contextlib.suppress(Exception):
            command = DollarFormatter().vformat(command, args=[], kwargs=names)
    done = subprocess.run(command, shell=True, capture_output=True, text=True, check=False)
    sys.stderr.write(done.stderr)
    if lines:
        return kind(done.stdout.splitlines())
    sys.stdout.write(done.stdout)
    return None


def script(program: str, text: str) -> None:
    """``%%bash`` (``%%sh``, ``%%script PROGRAM``): ``text`` run by ``program``, its output
    printed."""
    import subprocess
    import sys

    done = subprocess.run(program, shell=True, input=text, capture_output=True, text=True)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)


def write_file(path: str, text: str, append: bool = False) -> None:
    """``%%writefile [-a] PATH``: write (or append) the cell's text, saying so as IPython does."""
    import os

    if append:
        print(f"Appending to {path}")
    else:
        print(f"Overwriting {path}" if os.path.exists(path) else f"Writing {path}")
    with open(path, "a" if append else "w", encoding="utf-8") as f:
        f.write(text)


def star_import(names: dict, cell: int, statement: str, again: bool = True) -> None:
    """``statement``, a ``from m import *`` of the notebook's cell numbered ``cell``, run in
    the module's globals ``names``, as the notebook ran it there, and recorded.

    With ``again=False`` it runs only where this process has not run it: a task that runs in a
    process of its own (a Flyte or Latch pod) starts from the names the star imports before its
    cell bound, as its cell did; where the cells before it ran in this process (a local run),
    they ran it already, and what they bound since stands.
    """
    ran = names.setdefault("__taskcell_star_imports__", set())
    if again or (cell, statement) not in ran:
        exec(statement, names)
        ran.add((cell, statement))


def time_it(statement: str, setup: str = "pass", number: int = 0, repeat: int = 7) -> None:
    """``%timeit [-n N] [-r R] STATEMENT``: run it as IPython does, with the caller's names;
    the timing itself is not printed."""
    import sys
    import timeit

    caller = sys._getframe(1)
    timer = timeit.Timer(statement, setup, globals={**caller.f_globals, **caller.f_locals})
    if not number:
        number = timer.autorange()[0]
    timer.repeat(repeat, number)


def capture(stdout: bool = True, stderr: bool = True, display: bool = True) -> Any:
    """``%%capture [NAME]``: IPython's capture of what the block prints and displays. What it
    captured stays readable (``NAME.stdout``, ``NAME.show()``) and travels between tasks."""
    import contextlib

    from IPython.utils.capture import capture_output

    class Text(str):
        """Captured text, as the ``StringIO`` it replaces is read (which no pickle carries)."""

        def getvalue(self) -> str:
            return str(self)

    @contextlib.contextmanager
    def captured() -> Any:
        with capture_output(stdout, stderr, display) as io:
            yield io
        for stream in ("_stdout", "_stderr"):
            if getattr(io, stream, None) is not None:
                setattr(io, stream, Text(getattr(io, stream).getvalue()))

    return captured()


def ipython() -> Any:
    """The process's IPython shell, made on first use (without history), so that
    ``display()`` prints a value's text and ``%%capture`` captures displays, as in a kernel.
    None where IPython is not installed."""
    import sys

    try:
        from IPython.core.interactiveshell import InteractiveShell
        from traitlets.config import Config
    except ImportError:
        return None
    if InteractiveShell.initialized():
        return InteractiveShell.instance()
    config = Config()
    config.HistoryManager.enabled = False
    # The module's own __main__ stays in sys.modules: pickles that name it must still work.
    return InteractiveShell.instance(config=config, user_module=sys.modules["__main__"])


def rebound(function: Any, **names: Any) -> Any:
    """A notebook function carried from the task that defined it, reading ``names`` as they are
    now: the notebook looks its names up when the function runs, a closure keeps what they
    were. Anything else than a function is returned as it is."""
    import types

    if not isinstance(function, types.FunctionType) or not function.__closure__:
        return function
    free = function.__code__.co_freevars
    cells = tuple(
        types.CellType(names[name]) if name in names else cell
        for name, cell in zip(free, function.__closure__, strict=True)
    )
    made = types.FunctionType(
        function.__code__, function.__globals__, function.__name__, function.__defaults__, cells
    )
    made.__kwdefaults__ = function.__kwdefaults__
    made.__dict__.update(function.__dict__)
    return made


def close_figures() -> None:
    """Close every matplotlib figure, as the notebook's inline backend does after each cell."""
    import sys

    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


def caches_by_value() -> None:
    """Pickle (for this process) a ``functools.lru_cache`` of a function no module names by
    value: its function, cached again where it arrives, as ``%%task`` carries it. Python pickles
    such a cache by its name alone, which only the process that made it can look up: a cached
    function of the notebook (in ``__main__``, or made in a task's function)."""
    import copyreg
    import functools
    import sys

    def reduced(cache: Any) -> Any:
        found: Any = sys.modules.get(cache.__module__)
        for part in cache.__qualname__.split("."):
            found = getattr(found, part, None)
        if found is cache and cache.__module__ != "__main__":
            return cache.__reduce__()
        parameters = cache.cache_parameters()
        made = (cache.__wrapped__, parameters["maxsize"], parameters["typed"])
        return functools._lru_cache_wrapper, (*made, functools._CacheInfo), dict(vars(cache))

    copyreg.pickle(functools._lru_cache_wrapper, reduced)


def portable(value: object) -> object:
    """A value as Flyte and Latch carry an untyped one, untouched: an object that unpickles as
    the value itself. Flyte refuses ``None``, takes a tuple for several outputs, and reads
    attributes of what a task returns (which a Dask collection answers with new tasks).

    Where the module makes the notebook's Dask client, the value leaves its task as
    :func:`taskcell.export.carriers.local_dask` hands it over: its Futures as they ended, a
    collection holding Futures with their data (the task's cluster closes when it returns).
    A module that makes values portable calls :func:`caches_by_value` as it is imported, so a
    cached function of the notebook among them travels by value."""
    import operator
    import sys

    dask = sys.modules.get("_taskcell_local_dask")  # made by the module's local_dask
    if dask is not None:
        value = dask.helper("leaving", value)

    class Carried:
        def __reduce__(self) -> tuple:
            return operator.itemgetter(0), ((value,),)

    return Carried()


def cores(value: object) -> int:
    """Whole cores, rounded up, from a cpu request: ``2``, ``0.5``, ``"1.5"``, ``"500m"``."""
    import fractions
    import math

    text = str(value).strip()
    milli = text.endswith("m")
    try:
        amount = fractions.Fraction(text[:-1] if milli else text)
    except ValueError:
        raise ValueError(
            f"cpu must be cores such as 2, 0.5, '1.5' or '500m', got {value!r}"
        ) from None
    return math.ceil(amount / 1000 if milli else amount)


def gib(value: object) -> int:
    """Whole GiB, rounded up, from a size: bytes (``8e9``), ``"8Gi"``, ``"500M"``, ``"64 GiB"``."""
    import fractions
    import math
    import re

    found = re.fullmatch(r"\s*([0-9.]+(?:[eE][+-]?[0-9]+)?)\s*([kKMGTPE]?)(i?)B?\s*", str(value))
    if found is None or (found.group(3) and not found.group(2)):
        raise ValueError(
            f"a size must be bytes or a quantity such as '8Gi', '500M' or '64 GiB', got {value!r}"
        )
    number, prefix, binary = found.groups()
    power = "kMGTPE".index(prefix.replace("K", "k")) + 1 if prefix else 0
    unit = (1024 if binary or prefix == "K" else 1000) ** power
    return math.ceil(fractions.Fraction(number) * unit / 2**30)


def on_this_machine(path: str, kind: type) -> object:
    """A ``LatchFile`` or ``LatchDir`` for a path on this machine, to run the workflow here."""
    import pathlib

    full = str(pathlib.Path(path).resolve())
    return kind(full, full)


def source(function: Callable[..., Any], name: str) -> str:
    """The source of one of these functions, defined under ``name``, its annotations of
    ``typing`` names written as ``object`` (the module need not import them)."""
    text = inspect.getsource(function)
    text = re.sub(r"\b(Any|Callable)\b", "object", text)
    return text.replace(f"def {function.__name__}(", f"def {name}(", 1)
