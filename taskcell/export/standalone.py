"""Functions an exported module carries, so that it means what the notebook meant.

Each function is self-contained (its imports inside it, no module globals), so the ``flyte`` and
``latch`` targets copy it into the module with :func:`source` and the module needs no taskcell;
the ``dask`` target imports them from here. What they stand for in a notebook:

- :func:`show`: a cell's ``Out[]``, written as IPython writes its text (``None`` shows nothing).
- :func:`shell`, :func:`script`, :func:`write_file`, :func:`time_it`: ``!cmd`` and
  ``x = !cmd``, ``%%bash``, ``%%writefile``, ``%timeit``, with IPython's expansion of
  ``{expression}`` and ``$name`` from the caller's names.
- :func:`capture`: ``%%capture``, its result a value that travels between tasks.
- :func:`ipython`: an IPython shell for the process, so ``display()`` and ``%%capture`` behave
  as in a kernel (a display prints its text).
- :func:`update`: the notebook's object takes the state a task gave a copy of it, keeping its
  identity, as ``%%task`` does (:mod:`taskcell.runner.inplace`).
- :func:`rebound`: a notebook function Latch carries between tasks as a value, reading the
  notebook's names as they are when it is called.
- the process-wide state a notebook's cells share is carried as ``%%task`` carries it, by
  :mod:`taskcell.runner.process_state` itself (``dask``) or by its carriers shipped as source
  (``flyte``, ``latch``: :mod:`taskcell.export.carriers`).
- :func:`close_figures`: figures closed after a cell, as the inline backend does.
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
    "time_it",
    "update",
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


def update(old: Any, new: Any) -> Any:
    """The object a name should hold after a task changed a copy of ``old`` into ``new``:
    ``old`` itself, changed in place to match (so every other name for it sees the change), or
    ``new`` where ``old`` cannot take its state (another type, an array of another shape).

    Containers, arrays and the notebook's own objects inside it are changed in place too;
    a library's internals are replaced whole.
    """
    import collections
    import copyreg

    immutable = (type(None), bool, int, float, complex, str, bytes, range, frozenset, type)
    memo: dict[int, Any] = {}

    def is_array(value: Any) -> bool:
        return type(value).__module__ == "numpy" and type(value).__name__ == "ndarray"

    def kept(value: Any) -> bool:
        containers = (list, dict, set, tuple, bytearray, collections.deque)
        return (
            isinstance(value, containers) or is_array(value) or type(value).__module__ == "__main__"
        )

    def merge(old: Any, new: Any, depth: int) -> Any:
        if old is new or type(old) is not type(new) or isinstance(old, immutable):
            return new
        if id(new) in memo:
            return memo[id(new)]
        if depth > 32 or (depth and not kept(old)):
            return new
        memo[id(new)] = old
        try:
            done = into(old, new, depth + 1)
        except Exception:  # an object that refuses its new state: replaced
            done = False
        if not done:
            memo[id(new)] = new
            return new
        return old

    def into(old: Any, new: Any, depth: int) -> bool:
        if isinstance(old, tuple):
            parts = [merge(o, n, depth) for o, n in zip(old, new, strict=False)]
            return len(old) == len(new) and all(p is o for p, o in zip(parts, old, strict=False))
        if isinstance(old, (list, collections.deque)):
            parts = [merge(old[i], v, depth) if i < len(old) else v for i, v in enumerate(new)]
            old.clear()
            old.extend(parts)
            return True
        if isinstance(old, dict):
            items = {k: merge(old[k], v, depth) if k in old else v for k, v in new.items()}
            old.clear()
            old.update(items)
            attributes(old, new, depth)
            return True
        if isinstance(old, (set, bytearray)):
            if isinstance(old, set):
                old.clear()
                old.update(new)
            else:
                old[:] = new
            return True
        if is_array(old):
            if old.shape != new.shape or old.dtype != new.dtype or not old.flags.writeable:
                return False
            old[...] = new
            return True
        return attributes(old, new, depth) or reduced(old, new)

    def attributes(old: Any, new: Any, depth: int) -> bool:
        has_dict = hasattr(old, "__dict__") and hasattr(new, "__dict__")
        slots = copyreg._slotnames(type(old))  # type: ignore[attr-defined]
        if not has_dict and not slots:
            return False
        if has_dict:
            mine = vars(old)
            items = {k: merge(mine[k], v, depth) if k in mine else v for k, v in vars(new).items()}
            mine.clear()
            mine.update(items)
        for slot in slots:
            if hasattr(new, slot):
                object.__setattr__(
                    old, slot, merge(getattr(old, slot, None), getattr(new, slot), depth)
                )
            elif hasattr(old, slot):
                object.__delattr__(old, slot)
        return True

    def reduced(old: Any, new: Any) -> bool:
        """An object kept in C (a numpy ``Generator``): the state its pickle carries."""
        mine, theirs = old.__reduce_ex__(2), new.__reduce_ex__(2)
        if not (isinstance(mine, tuple) and isinstance(theirs, tuple)) or mine[0] != theirs[0]:
            return False
        if len(mine[1]) != len(theirs[1]):
            return False
        for part, other in zip(mine[1], theirs[1], strict=True):
            if merge(part, other, 0) is not part:
                try:
                    if not bool(part == other):
                        return False
                except Exception:
                    return False
        state = theirs[2] if len(theirs) > 2 else None
        if state is not None:
            old.__setstate__(state)
        return True

    return merge(old, new, 0)


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


def portable(value: object) -> object:
    """A value as Flyte and Latch carry an untyped one, untouched: an object that unpickles as
    the value itself. Flyte refuses ``None``, takes a tuple for several outputs, and reads
    attributes of what a task returns (which a Dask collection answers with new tasks).

    Where the module makes the notebook's Dask client, the value leaves its task as
    :func:`taskcell.export.carriers.local_dask` hands it over: its Futures as they ended, a
    collection holding Futures with their data (the task's cluster closes when it returns)."""
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
