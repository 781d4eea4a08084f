"""The process-wide state ``%%task`` carries, as source a standalone module carries.

A ``flyte`` or ``latch`` module runs without taskcell, yet must carry what a ``%%task`` cell
carries: every carrier of :mod:`taskcell.runner.process_state`, those a user registered
included. Each carrier's functions are shipped as source with what they name (the functions,
classes, constants and modules of their own module), or, where a function is importable from
a library (``torch.random.get_rng_state``), as a reference imported when it is called. The
shipped code runs in a namespace of its own, so the notebook's names (the module's globals)
never rebind it.

A carrier that cannot be shipped (it calls taskcell, or names an object that has no source) is
left out where the notebook never imports its module, and refused by name where it does.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import types
from collections.abc import Callable, Iterable
from typing import Any

from taskcell.errors import ExportError
from taskcell.runner import process_state

__all__ = ["Unshippable", "carriers_source"]


class Unshippable(ValueError):
    """A carrier's function names something a module without taskcell cannot have."""


def carriers_source(capture: str, apply: str, modules: Iterable[str], target: str) -> str:
    """Source defining ``capture()`` (the state, by carrier name) and ``apply(state)``, for
    every registered carrier that can be shipped.

    Raises
    ------
    ExportError
        For a carrier that cannot be shipped whose module the notebook imports (``modules``:
        top-level names), naming it.
    """
    imported = {m.partition(".")[0] for m in modules}
    shipped = _Shipped()
    rows = []
    for carrier in process_state.registered():
        try:
            rows.append(
                f"({carrier.name!r}, {carrier.module!r}, {shipped.function(carrier.get)}, "
                f"{shipped.function(carrier.set)}, {carrier.returns!r})"
            )
        except Unshippable as e:
            if carrier.module.partition(".")[0] in imported:
                raise ExportError(
                    f"the process-wide state {carrier.name!r} (a carrier of "
                    f"taskcell.runner.process_state) cannot travel in a {target} module: {e}"
                ) from None
    listed = "".join(f"    {row},\n" for row in rows)
    code = "\n\n\n".join(["from __future__ import annotations", *shipped.parts])
    code += f"\n\n\nCARRIERS = [\n{listed}]"
    return _RUNTIME.format(
        capture=capture, apply=apply, code=code.replace("\\", "\\\\").replace('"""', '\\"""')
    )


_RUNTIME = '''\
_CARRIER_CODE = """
{code}
"""


def _carriers():
    """taskcell's carriers of process-wide state, in a namespace of their own."""
    namespace = {{"__name__": "taskcell_carriers"}}
    exec(_CARRIER_CODE, namespace)
    return namespace["CARRIERS"]


_CARRIERS = _carriers()


def {capture}():
    """The process-wide state a notebook's cells share and a task starts from, as %%task
    carries it (each piece only where its module is imported)."""
    import sys

    return {{name: get() for name, module, get, _, _ in _CARRIERS if module in sys.modules}}


def {apply}(state, returned=False):
    """Take the state {capture}() captured (only what comes back from a cell, if returned)."""
    for name, _, _, set_state, returns in _CARRIERS:
        if name in state and (returns or not returned):
            set_state(state[name])
'''


class _Shipped:
    """The source shipped so far, and the names it defines."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.names: dict[int, str] = {}  # id of a shipped object -> its name in the namespace

    def function(self, fn: Callable[..., Any]) -> str:
        """The name of ``fn`` in the shipped namespace, shipping it first."""
        if id(fn) in self.names:
            return self.names[id(fn)]
        module = getattr(fn, "__module__", None) or ""
        qualname = getattr(fn, "__qualname__", "")
        if _importable(module, qualname):
            name = f"_ref_{len(self.names)}"
            path = qualname.split(".")
            self.parts.append(
                f"def {name}(*args):\n    import importlib\n\n"
                f"    found = importlib.import_module({module!r})\n"
                f"    for part in {path!r}:\n        found = getattr(found, part)\n"
                f"    return found(*args)"
            )
            self.names[id(fn)] = name
            return name
        return self._source(fn)

    def _source(self, obj: Any) -> str:
        """Ship a function or class by its source, with the globals it names."""
        name = getattr(obj, "__name__", "")
        if "<" in getattr(obj, "__qualname__", "<") or not isinstance(
            obj, type | types.FunctionType
        ):
            raise Unshippable(f"{obj!r} has no source a module can carry")
        try:
            text = textwrap.dedent(inspect.getsource(obj))
        except (OSError, TypeError):
            raise Unshippable(f"{name} has no source a module can carry") from None
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                found = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                found.append(getattr(node, "module", None) or "")
                if any(m.partition(".")[0] == "taskcell" for m in found):
                    raise Unshippable(f"{name} calls taskcell, which the module does not have")
        self.names[id(obj)] = name
        namespace = getattr(obj, "__globals__", None) or vars(inspect.getmodule(obj))
        for used in sorted(_names(tree) - {name}):
            if used in namespace:
                self._global(used, namespace[used])
        self.parts.append(text.rstrip())
        return name

    def _global(self, name: str, value: Any) -> None:
        """Ship one global a shipped function names: a module, function, class or constant."""
        if id(value) in self.names:
            return
        module = getattr(value, "__module__", None) or ""
        qualname = getattr(value, "__qualname__", "")
        if isinstance(value, types.ModuleType):
            self.names[id(value)] = name
            self.parts.insert(0, f"import {value.__name__} as {name}")
        elif callable(value) and _importable(module, qualname) and "." not in qualname:
            self.names[id(value)] = name
            self.parts.insert(0, f"from {module} import {qualname} as {name}")
        elif callable(value):
            self._source(getattr(value, "__wrapped__", value))
        elif _literal(value):
            self.names[id(value)] = name
            self.parts.append(f"{name} = {value!r}")
        else:
            raise Unshippable(f"it names {name}, a {type(value).__name__}")


def _importable(module: str, qualname: str) -> bool:
    """Whether a function can be imported where the module runs: a library's, by its name."""
    return (
        bool(module)
        and module.partition(".")[0] not in ("taskcell", "__main__", "builtins")
        and "<" not in qualname
    )


def _names(tree: ast.AST) -> set[str]:
    """The names a piece of source reads or declares global."""
    found = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found.update(node.names)
    return found


def _literal(value: Any) -> bool:
    """Whether ``repr(value)`` is Python that makes it again."""
    try:
        return bool(ast.literal_eval(repr(value)) == value) or value is None
    except (ValueError, SyntaxError):
        return isinstance(value, frozenset) and all(_literal(v) for v in value)
