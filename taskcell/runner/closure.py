"""The globals a notebook-defined function needs, read from its byte code at run time, and
where it finds them once it has travelled.

The static cell analysis (:mod:`taskcell.runner.analysis`) says which names a cell reads; a
function the cell calls may read more notebook globals, and those must travel with it. Pickled
by value, a notebook function arrives with a private copy of its globals (or none):
:func:`adopt` makes it read a namespace's instead, as it read the notebook's at home.
"""

from __future__ import annotations

import dis
import types
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

_GLOBAL_READS = frozenset(
    {"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS", "DELETE_GLOBAL", "DELETE_NAME"}
)


def _global_reads(code: types.CodeType) -> set[str]:
    names: set[str] = set()
    stack = [code]
    while stack:
        current = stack.pop()
        for instruction in dis.get_instructions(current):
            if instruction.opname in _GLOBAL_READS:
                names.add(instruction.argval)
        stack.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    return names


def is_notebook_defined(obj: object, namespace: Mapping[str, Any]) -> bool:
    """A function or class the notebook defined (also behind ``__wrapped__``)."""
    wrapped = _wrapped(obj)
    obj = obj if wrapped is None else wrapped
    if isinstance(obj, types.FunctionType):
        return obj.__module__ == "__main__" or obj.__globals__ is namespace
    if isinstance(obj, type):
        return obj.__module__ == "__main__" or any(
            isinstance(f, types.FunctionType) and f.__globals__ is namespace
            for f in _class_functions(obj)
        )
    return False


def _wrapped(obj: object) -> Any:
    """What ``obj`` wraps (``functools.wraps`` keeps it in the wrapper's ``__dict__``), or
    None: never asked by ``getattr``, which a notebook class's ``__getattr__`` may answer."""
    try:
        return vars(obj).get("__wrapped__")
    except Exception:  # no __dict__
        return None


def _class_functions(cls: type) -> Iterable[object]:
    for value in vars(cls).values():
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property):
            yield from (f for f in (value.fget, value.fset, value.fdel) if f is not None)
        else:
            yield value


def _referents(obj: object) -> tuple[list[types.CodeType], list[object]]:
    """The code objects of a function or class, and the objects to look through next."""
    codes: list[types.CodeType] = []
    more: list[object] = []
    wrapped = _wrapped(obj)
    if wrapped is not None:
        more.append(wrapped)
    if isinstance(obj, types.FunctionType):
        codes.append(obj.__code__)
        for cell in obj.__closure__ or ():
            try:
                more.append(cell.cell_contents)
            except ValueError:  # an empty cell
                continue
    elif isinstance(obj, type):
        for value in _class_functions(obj):
            if isinstance(value, (types.FunctionType, type)):
                more.append(value)
        more.extend(obj.__mro__[1:-1])
    return codes, more


def function_globals(func: types.FunctionType, namespace: Mapping[str, Any]) -> frozenset[str]:
    """The names in ``namespace`` that a notebook-defined function needs to run.

    The function's byte code (nested functions, lambdas, comprehensions and classes included)
    gives the globals it reads; every one of those that is itself a notebook-defined function
    or class (its ``__module__`` is ``"__main__"`` or its globals are ``namespace``) is followed
    in turn, as are ``__wrapped__`` targets, closure contents, methods and notebook base classes.
    Each object is visited once, so recursion ends.

    Only real global reads count (``LOAD_GLOBAL`` and kin), not every name in ``co_names``:
    ``df.shape`` does not ship a global called ``shape``. Names reached through ``globals()``,
    ``eval`` or ``exec`` are not seen.

    Parameters
    ----------
    func
        The function the cell calls (a class or decorated function works too).
    namespace
        The notebook's global namespace.

    Returns
    -------
    frozenset[str]
        Keys of ``namespace`` read by ``func`` or by the notebook code it reaches.

    Examples
    --------
    >>> ns = {}
    >>> exec("scale = 2\\ndef double(x):\\n    return x * scale", ns)
    >>> sorted(function_globals(ns["double"], ns))
    ['scale']
    """
    found: set[str] = set()
    seen: set[int] = set()
    stack: list[object] = [func]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        codes, more = _referents(obj)
        stack.extend(o for o in more if is_notebook_defined(o, namespace))
        for code in codes:
            for name in _global_reads(code):
                if name not in namespace:
                    continue
                found.add(name)
                value = namespace[name]
                if is_notebook_defined(value, namespace):
                    stack.append(value)
    return frozenset(found)


def adopt(namespace: MutableMapping[str, Any], values: Mapping[str, Any]) -> None:
    """Bind ``values`` in ``namespace``, each notebook function (and each method of a notebook
    class) reading ``namespace`` as its globals where it is a dict, as Python needs."""

    def rebound(f: Any) -> Any:
        # A notebook function pickled by value reads a copy of the notebook's globals; a
        # decorator's wrapper (its ``__module__`` copied from what it wraps) reads its own.
        if not isinstance(f, types.FunctionType) or f.__globals__ is namespace:
            return f
        if f.__globals__.get("__name__") != "__main__" or not isinstance(namespace, dict):
            return f
        clone = types.FunctionType(f.__code__, namespace, f.__name__, f.__defaults__, f.__closure__)
        clone.__kwdefaults__, clone.__qualname__ = f.__kwdefaults__, f.__qualname__
        clone.__doc__, clone.__dict__ = f.__doc__, f.__dict__
        return clone

    for name, value in values.items():
        if isinstance(value, type) and value.__module__ == "__main__":
            for attr, member in list(vars(value).items()):
                wrapped = isinstance(member, (staticmethod, classmethod))
                func = member.__func__ if wrapped else member
                clone = rebound(func)
                if clone is not func:
                    setattr(value, attr, type(member)(clone) if wrapped else clone)
        namespace[name] = rebound(value)
