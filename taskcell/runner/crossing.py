"""How a value crosses between the notebook and a cell's process, both ways.

Going out, the kernel pickles a cell's inputs itself (:func:`seal`) into a :class:`Sealed`
value: its pickle and its large buffers out of band. Dask carries it as one opaque object, so
a dict is never read as ``{key: data}`` nor a list as one future per element, and its size is
what it costs to send. One pickler (:class:`CellPickler`) pickles all of a cell's small inputs,
so objects they share stay shared, and a numpy view stays a view of its base where the base
travels too. A function the notebook defined travels without the notebook's globals and reads
the cell's namespace there (:func:`receiving`), as it read the notebook's at home, wherever it
is reached from: a name, a closure, a decorator's wrapper, a class's methods.

Coming back, a class the notebook defined is the notebook's own object: cloudpickle finds it
by the tracker id it sent it with, so its instances come back as instances of it. cloudpickle
also sets the class's attributes from the copy that came back (with functions that do not read
the notebook's globals), so the kernel keeps every class it sent as it was while it reads a
result (:func:`guard_classes`). What a cell changed in the state of those classes and functions
(class attributes, a function's mutable defaults, its attributes, its closure) is found by
:class:`DefinitionsSnapshot` and applied to the notebook's own objects by
:func:`apply_definitions`.
"""

from __future__ import annotations

import contextlib
import functools
import io
import pickle
import threading
import types
import uuid
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import cloudpickle
import cloudpickle.cloudpickle as _cp
import xxhash

from taskcell.errors import InputError
from taskcell.runner.descriptors import Pickler

#: Inputs pickled larger than this are sent ahead of the cell (scattered) and kept there.
SEAL_THRESHOLD = 1 << 20
#: The name a cell's inputs sealed together travel under, when they are sent ahead too.
BUNDLE = ""

_local = threading.local()
_MISSING = object()


class Sealed:
    """Values pickled by taskcell: one pickle per name, by one pickler, and their out-of-band
    buffers. Dask moves it as it is; only :meth:`open` in the cell's process makes the values
    again."""

    __slots__ = ("buffers", "kinds", "names", "payload")

    def __init__(
        self, names: tuple[str, ...], kinds: tuple[str, ...], payload: bytes, buffers: list[Any]
    ) -> None:
        self.names = names
        self.kinds = kinds  #: the type name of each value, for an error that names it
        self.payload = payload
        self.buffers = buffers

    @property
    def nbytes(self) -> int:
        """What it costs to send: the pickle and its buffers."""
        return len(self.payload) + sum(memoryview(b).nbytes for b in self.buffers)

    def __sizeof__(self) -> int:  # what Dask's sizeof reads: its cost, not its few slots
        return self.nbytes

    def fingerprint(self) -> bytes:
        """A hash of the pickle and every buffer: equal exactly when the values pickle the same."""
        h = xxhash.xxh3_128(self.payload)
        for buffer in self.buffers:
            h.update(memoryview(buffer).cast("B"))
        return h.digest()

    def copied(self) -> Sealed:
        """This, its buffers copied: Dask may send a task's arguments after ``submit`` returns,
        and the notebook may change its arrays by then (a background cell)."""
        # bytearray, not bytes: a buffer pickled read-only is rebuilt read-only in the cell
        return Sealed(self.names, self.kinds, self.payload, [bytearray(b) for b in self.buffers])

    def open(self) -> dict[str, Any]:
        """The values by name, rebuilt in order (in the cell's process, inside
        :func:`receiving`); InputError names one that cannot be."""
        unpickler = pickle.Unpickler(io.BytesIO(self.payload), buffers=self.buffers)
        values = {}
        for name, kind in zip(self.names, self.kinds, strict=True):
            try:
                values[name] = unpickler.load()
            except Exception as e:
                raise InputError(
                    f"input {name!r} ({kind}) cannot be sent to a worker: it pickles in the "
                    f"notebook but does not load there ({type(e).__name__}: {e}). Create it "
                    f"inside the %%task cell instead."
                ) from None
        return values

    def __reduce_ex__(self, protocol: Any) -> tuple:
        buffers = [pickle.PickleBuffer(b) for b in self.buffers]
        return (Sealed, (self.names, self.kinds, self.payload, buffers))


# --- going out: the kernel ------------------------------------------------------------------

#: The notebook's functions sent to cells, by token, and their tokens: a cell's changes to a
#: function's defaults come back to the notebook's own function.
_functions: weakref.WeakValueDictionary[str, types.FunctionType] = weakref.WeakValueDictionary()
_tokens: weakref.WeakKeyDictionary[types.FunctionType, str] = weakref.WeakKeyDictionary()
#: The notebook's classes sent to cells, kept as they are while a result is read.
_classes: weakref.WeakSet[type] = weakref.WeakSet()


def _token(func: types.FunctionType) -> str:
    token = _tokens.get(func)
    if token is None:
        token = _tokens[func] = uuid.uuid4().hex
        _functions[token] = func
    return token


class CellPickler(Pickler):
    """Pickles the notebook's values for a cell.

    A function whose globals are the notebook's (``namespace``) travels without them and reads
    the cell's namespace on arrival, however it is reached; a cached function travels as its
    function, cached again there; a numpy array whose base another input shares travels as a
    view of that base (``roots``: ids of the bases to keep).
    """

    def __init__(
        self, file: Any, namespace: Mapping[str, Any], roots: frozenset[int] = frozenset()
    ) -> None:
        super().__init__(file, protocol=5, buffer_callback=self._buffer)
        self.namespace = namespace
        self.roots = roots
        self.buffers: list[pickle.PickleBuffer] = []

    def _buffer(self, buffer: pickle.PickleBuffer) -> None:
        self.buffers.append(buffer)

    def reducer_override(self, obj: Any) -> Any:
        if _is_notebook_function(obj, self.namespace):
            return self._notebook_function(obj)
        if isinstance(obj, functools._lru_cache_wrapper) and _is_notebook_function(
            obj.__wrapped__, self.namespace
        ):
            params = obj.cache_parameters()
            return (_cached, (obj.__wrapped__, params["maxsize"], params["typed"]))
        if isinstance(obj, type) and obj.__module__ == "__main__":
            return self._notebook_class(obj)
        if self.roots and _is_ndarray(obj):
            root = _root(obj)
            if root is not obj and id(root) in self.roots:
                return _view_reduce(obj, root)
        return super().reducer_override(obj)

    def _notebook_class(self, cls: type) -> Any:
        """cloudpickle's reduction of ``cls``, by value, marked on arrival as the notebook's."""
        _classes.add(cls)
        reduced = super().reducer_override(cls)
        if not isinstance(reduced, tuple) or len(reduced) != 6:
            return reduced
        return (*reduced[:5], _notebook_class_setstate)

    def _notebook_function(self, func: types.FunctionType) -> tuple:
        _, args, (state, slots), *_ = self._dynamic_function_reduce(func)
        code, _globals, name, defaults, closure = args
        # The globals it reads travel as the cell's inputs and are found in its namespace.
        slots = {**slots, "__globals__": {}}
        return (
            _notebook_function,
            (_token(func), code, name, defaults, closure),
            (state, slots),
            None,
            None,
            _cp._function_setstate,
        )


def _is_notebook_function(obj: Any, namespace: Mapping[str, Any]) -> bool:
    return isinstance(obj, types.FunctionType) and obj.__globals__ is namespace


def _is_ndarray(value: Any) -> bool:
    return type(value).__module__ == "numpy" and type(value).__name__ == "ndarray"


def _root(array: Any) -> Any:
    """The array that owns ``array``'s memory (``array`` itself if it owns it)."""
    while _is_ndarray(array.base):
        array = array.base
    return array


def _view_reduce(view: Any, root: Any) -> tuple:
    offset = view.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return (_view, (root, view.dtype, view.shape, view.strides, offset))


def _view(root: Any, dtype: Any, shape: tuple, strides: tuple, offset: int) -> Any:
    import numpy as np

    return np.ndarray(shape, dtype, buffer=root, offset=offset, strides=strides)


def shared_roots(values: Mapping[str, Any]) -> frozenset[int]:
    """Ids of the numpy arrays whose memory two of ``values`` (or their direct parts) see, or
    one of them is: pickled once, the others as views of them."""
    views: dict[int, int] = {}
    present: set[int] = set()
    for value in values.values():
        parts = [value]
        if isinstance(value, dict):
            parts += list(value.values())
        elif isinstance(value, (list, tuple)) and len(value) < 1000:
            parts += list(value)
        for part in parts:
            if _is_ndarray(part):
                root = _root(part)
                if root is part:
                    present.add(id(root))
                else:
                    views[id(root)] = views.get(id(root), 0) + 1
    return frozenset(r for r, n in views.items() if n > 1 or r in present)


def sees(value: Any, roots: frozenset[int]) -> bool:
    """Whether ``value`` is an array whose memory is one of ``roots`` (:func:`shared_roots`)."""
    return _is_ndarray(value) and id(_root(value)) in roots


def seal(values: Mapping[str, Any], namespace: Mapping[str, Any]) -> Sealed:
    """``values`` (name -> value) pickled one after another by one :class:`CellPickler`, so
    objects they share stay shared. Raises the pickler's error, with the failing name as
    ``error.input_name``."""
    stream = io.BytesIO()
    pickler = CellPickler(stream, namespace, shared_roots(values))
    for name, value in values.items():
        try:
            pickler.dump(value)
        except Exception as e:
            e.input_name = name  # type: ignore[attr-defined]
            raise
    kinds = tuple(type(v).__name__ for v in values.values())
    return Sealed(tuple(values), kinds, stream.getvalue(), [b.raw() for b in pickler.buffers])


@contextlib.contextmanager
def guard_classes() -> Iterator[None]:
    """Keep the notebook classes sent to cells as they are while a result is read: cloudpickle
    sets a class's attributes on the class it finds for a tracked one. What the cell changed
    comes apart (:func:`apply_definitions`)."""
    before = {cls: dict(vars(cls)) for cls in list(_classes)}
    try:
        yield
    finally:
        for cls, attributes in before.items():
            for name in set(vars(cls)) - set(attributes):
                with contextlib.suppress(AttributeError, TypeError):
                    delattr(cls, name)
            for name, value in attributes.items():
                if vars(cls).get(name, _MISSING) is not value:
                    with contextlib.suppress(AttributeError, TypeError):
                        setattr(cls, name, value)


# --- arriving: the cell's process ---------------------------------------------------------


@contextlib.contextmanager
def receiving(namespace: dict[str, Any]) -> Iterator[None]:
    """Values opened inside read ``namespace`` as their notebook functions' globals."""
    _local.namespace = namespace
    try:
        yield
    finally:
        del _local.namespace


#: The notebook's functions (with their tokens) and classes the current cell received.
_cell_functions: dict[int, tuple[types.FunctionType, str]] = {}
_cell_classes: dict[int, type] = {}


def begin_cell() -> None:
    """Forget what the last cell received: the next receives its own."""
    _cell_functions.clear()
    _cell_classes.clear()


def _notebook_function(
    token: str, code: types.CodeType, name: str, defaults: Any, closure: Any
) -> types.FunctionType:
    namespace = getattr(_local, "namespace", None)
    if namespace is None:
        namespace = {"__name__": "__main__"}
    func = types.FunctionType(code, namespace, name, defaults, closure)
    _cell_functions[id(func)] = (func, token)
    return func


def _notebook_class_setstate(cls: type, state: Any) -> type:
    _cp._class_setstate(cls, state)
    _cell_classes[id(cls)] = cls
    return cls


def _cached(func: Any, maxsize: int | None, typed: bool) -> Any:
    return functools.lru_cache(maxsize=maxsize, typed=typed)(func)


# --- what a cell changed in the notebook's definitions ------------------------------------


@dataclass(frozen=True)
class FunctionState:
    """What a call can change of a function: its defaults, its attributes, and what its
    closure's cells hold (``(True, value)``, or ``(False, None)`` for an empty cell)."""

    defaults: tuple | None
    kwdefaults: dict[str, Any] | None
    attributes: dict[str, Any]
    closure: tuple[tuple[bool, Any], ...]


@dataclass(frozen=True)
class Definitions:
    """Changes a cell made to the notebook's classes and functions: class attributes by class,
    and function states by function token."""

    classes: dict[type, dict[str, Any]]
    functions: dict[str, FunctionState]

    def __bool__(self) -> bool:
        return bool(self.classes or self.functions)


def _class_data(cls: type) -> dict[str, Any]:
    return {
        k: v
        for k, v in vars(cls).items()
        if not (k.startswith("__") and k.endswith("__"))
        and not isinstance(v, (types.FunctionType, staticmethod, classmethod, property))
        and not callable(v)
    }


def _function_data(func: types.FunctionType) -> FunctionState:
    return FunctionState(
        func.__defaults__,
        func.__kwdefaults__,
        dict(func.__dict__),
        tuple(_cell_contents(cell) for cell in func.__closure__ or ()),
    )


def _cell_contents(cell: types.CellType) -> tuple[bool, Any]:
    try:
        return True, cell.cell_contents
    except ValueError:  # an empty cell: a name the enclosing function has not bound yet
        return False, None


def _digest(value: Any) -> bytes | None:
    try:
        h = xxhash.xxh3_128()
        buffers: list[pickle.PickleBuffer] = []
        h.update(cloudpickle.dumps(value, protocol=5, buffer_callback=buffers.append))
        for b in buffers:
            h.update(b.raw())
        return h.digest()
    except Exception:
        return None


class DefinitionsSnapshot:
    """The state of the notebook classes and functions a cell received, before it runs."""

    def __init__(self) -> None:
        self._classes = {cls: _digest(_class_data(cls)) for cls in _cell_classes.values()}
        self._functions = {
            token: (func, _digest(_function_data(func))) for func, token in _cell_functions.values()
        }

    def changed(self) -> Definitions:
        """What the cell changed of them."""
        classes = {
            cls: _class_data(cls)
            for cls, before in self._classes.items()
            if _digest(_class_data(cls)) != before
        }
        functions = {
            token: _function_data(func)
            for token, (func, before) in self._functions.items()
            if _digest(_function_data(func)) != before
        }
        return Definitions(classes, functions)


def apply_definitions(definitions: Definitions | None, update: Callable[[Any, Any], bool]) -> None:
    """In the notebook: give its own classes and functions the state the cell left them in,
    parts changed in place by ``update`` where they can be (the list a class attribute holds
    stays that list)."""
    if not definitions:
        return
    for cls, attributes in definitions.classes.items():
        _apply(cls, attributes, update)
    for token, state in definitions.functions.items():
        func = _functions.get(token)
        if func is None:
            continue
        if func.__defaults__ is None or not update(func.__defaults__, state.defaults):
            func.__defaults__ = state.defaults
        if func.__kwdefaults__ is None or not update(func.__kwdefaults__, state.kwdefaults):
            func.__kwdefaults__ = state.kwdefaults
        _apply(func, state.attributes, update)
        for cell, (full, new) in zip(func.__closure__ or (), state.closure, strict=False):
            old = _cell_contents(cell)
            if full and not (old[0] and update(old[1], new)):
                cell.cell_contents = new


def _apply(target: Any, attributes: dict[str, Any], update: Any) -> None:
    for name, new in attributes.items():
        old = vars(target).get(name, _MISSING)
        if old is _MISSING or not update(old, new):
            setattr(target, name, new)
