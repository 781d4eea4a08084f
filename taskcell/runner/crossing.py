"""How a value crosses between the notebook and a cell's process, both ways.

Going out, the kernel pickles a cell's inputs itself (:func:`seal`) into a :class:`Sealed`
value: its pickle and its large buffers out of band. Dask carries it as one opaque object, so
a dict is never read as ``{key: data}`` nor a list as one future per element, and its size is
what it costs to send. One pickler (:class:`CellPickler`) pickles all of a cell's small inputs,
so objects they share stay shared, and a numpy view stays a view of its base where the base
travels too. A function the notebook defined travels without the notebook's globals and reads
the cell's namespace there (:func:`receiving`), as it read the notebook's at home, wherever it
is reached from: a name, a closure, a decorator's wrapper, a class's methods.

Coming back, the cell's process pickles its result once (:class:`Returned`); its worker and
Dask carry it unopened and the kernel opens it. What the cell received and left as it was goes
back as a reference to the notebook's own object, wherever the result holds it, and a numpy
view of an array it received as a view of the notebook's array (:func:`references`): both sides
note which object each memo index of the inputs' pickle stands for (:data:`NOTE_LIMIT`), and
the kernel keeps its side while the cell runs (:func:`expect`). A class the notebook defined is
the notebook's own object: cloudpickle finds it by the tracker id it sent it with, so its
instances come back as instances of it. cloudpickle
also sets the class's attributes from the copy that came back (with functions that do not read
the notebook's globals), so the kernel keeps every class it sent as it was while it reads a
result (:func:`guard_classes`). What a cell changed in the state of those classes and functions
(class attributes, a function's mutable defaults, its attributes, its closure) is found by
:class:`DefinitionsSnapshot` and applied to the notebook's own objects by
:func:`apply_definitions`.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import inspect
import io
import pickle
import sys
import threading
import types
import uuid
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
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
#: Pickles (in band) up to this size note which object each memo index stands for, on both
#: sides, so that what a cell received and left as it was comes back as the notebook's own
#: object; beyond it, noting would cost more than sending the value.
NOTE_LIMIT = 1 << 20

_local = threading.local()
_MISSING = object()


class Sealed:
    """Values pickled by taskcell: one pickle per name, by one pickler, and their out-of-band
    buffers. Dask moves it as it is; only :meth:`open` in the cell's process makes the values
    again."""

    __slots__ = ("buffers", "kinds", "names", "objects", "payload", "plain")

    def __init__(
        self,
        names: tuple[str, ...],
        kinds: tuple[str, ...],
        payload: bytes,
        buffers: list[Any],
        objects: dict[int, Any] | None = None,
        plain: bool = False,
    ) -> None:
        self.names = names
        self.kinds = kinds  #: the type name of each value, for an error that names it
        self.payload = payload
        self.buffers = buffers
        #: Nothing in it went by the pickler's own reductions: no function or class by value,
        #: no array as a view of another input. Opened again in the cell's process, it makes
        #: none of the cell's definitions again (:class:`taskcell.runner.changes.InputSnapshot`).
        self.plain = plain
        #: In the kernel only (it never travels): the object each memo index of the pickle
        #: stands for, where the pickle is small enough to note them (:data:`NOTE_LIMIT`).
        self.objects = objects or {}

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
        buffers = [bytearray(b) for b in self.buffers]
        return Sealed(self.names, self.kinds, self.payload, buffers, plain=self.plain)

    def open(self, noted: dict[str, dict[int, Any]] | None = None) -> dict[str, Any]:
        """The values by name, rebuilt in order (in the cell's process, inside
        :func:`receiving`); InputError names one that cannot be. ``noted`` takes, by name, the
        objects first made for that value, by memo index (where :data:`NOTE_LIMIT` allows)."""
        unpickler = pickle.Unpickler(io.BytesIO(self.payload), buffers=self.buffers)
        note = noted is not None and len(self.payload) <= NOTE_LIMIT
        values, made = {}, 0
        for name, kind in zip(self.names, self.kinds, strict=True):
            try:
                values[name] = unpickler.load()
            except Exception as e:
                raise InputError(
                    f"input {name!r} ({kind}) cannot be sent to a worker: it pickles in the "
                    f"notebook but does not load there ({type(e).__name__}: {e}). Create it "
                    f"inside the %%task cell instead."
                ) from None
            if note:
                memo = unpickler.memo.copy()
                noted[name] = {i: obj for i, obj in memo.items() if i >= made}  # type: ignore[index]
                made = len(memo)
        return values

    def __reduce_ex__(self, protocol: Any) -> tuple:
        buffers = _out_of_band(self.buffers, protocol)
        return (Sealed, (self.names, self.kinds, self.payload, buffers, None, self.plain))


def size_of(value: Any) -> int:
    """What ``value`` holds in bytes: Dask's estimate, or, for a value Dask's recursion cannot
    size (one that holds itself), its pickle with large buffers counted, never copied."""
    from dask.sizeof import sizeof

    with contextlib.suppress(Exception):
        return int(sizeof(value))
    buffers: list[pickle.PickleBuffer] = []
    try:
        data = cloudpickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    except Exception:  # it cannot travel either: the cell names it
        return sys.getsizeof(value)
    return len(data) + sum(b.raw().nbytes for b in buffers)


def _out_of_band(buffers: list[Any], protocol: int) -> list[Any]:
    """``buffers`` to pickle out of band where the protocol can (5; Dask's scheduler relays
    with 4), else copied in band."""
    if protocol >= 5:
        return [pickle.PickleBuffer(b) for b in buffers]
    return [bytearray(b) for b in buffers]


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


class ValuePickler(Pickler):
    """cloudpickle's pickler, a class pickled by value made with its ``__slots__``: cloudpickle
    sets them after making the class, which makes no slots, so its instances would come back
    with a ``__dict__`` that the notebook's class lacks (and fail to load there)."""

    def reducer_override(self, obj: Any) -> Any:
        if _is_singledispatch(obj):  # its cache holds weak references
            return (_singledispatch, (obj.__wrapped__, dict(obj.registry)))
        if type(obj) is functools.cached_property:  # Python 3.11's holds a lock
            return (_cached_property, (obj.func, obj.attrname))
        reduced = super().reducer_override(obj)
        if (
            isinstance(obj, type)
            and "__slots__" in vars(obj)
            and isinstance(reduced, tuple)
            and reduced[0] is _cp._make_skeleton_class
        ):
            reduced = (_slotted_class, (vars(obj)["__slots__"], *reduced[1]), *reduced[2:])
        return reduced


def _slotted_class(
    slots: Any, kind: type, name: str, bases: tuple, kwargs: dict, *more: Any
) -> type:
    """cloudpickle's skeleton of a class, made with its ``__slots__`` where its bases let a
    class body name them (``typing.NamedTuple``'s make their own, and refuse the name)."""
    try:
        return _cp._make_skeleton_class(kind, name, bases, {**kwargs, "__slots__": slots}, *more)
    except (AttributeError, TypeError):
        return _cp._make_skeleton_class(kind, name, bases, kwargs, *more)


def _cached_property(func: Any, name: str | None) -> functools.cached_property:
    made = functools.cached_property(func)
    made.attrname = name
    return made


#: The code of every ``functools.singledispatch`` wrapper.
_SINGLEDISPATCH = getattr(functools.singledispatch(repr), "__code__", None)


def _is_singledispatch(obj: Any) -> bool:
    """Whether ``obj`` is a ``functools.singledispatch`` wrapper (asked of what it is, never
    by ``getattr``: a notebook class's ``__getattr__`` may answer anything)."""
    return isinstance(obj, types.FunctionType) and obj.__code__ is _SINGLEDISPATCH


def _singledispatch(func: Any, registry: dict[type, Any]) -> Any:
    dispatcher = functools.singledispatch(func)
    for cls, implementation in registry.items():
        if cls is not object:
            dispatcher.register(cls, implementation)
    return dispatcher


def dumps(value: Any, buffer_callback: Callable[[pickle.PickleBuffer], Any]) -> bytes:
    """``value`` pickled by :class:`ValuePickler` (protocol 5, buffers to ``buffer_callback``)."""
    stream = io.BytesIO()
    ValuePickler(stream, protocol=5, buffer_callback=buffer_callback).dump(value)
    return stream.getvalue()


class CellPickler(ValuePickler):
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
        #: Nothing pickled so far went by this pickler's own reductions (:attr:`Sealed.plain`).
        self.plain = True

    def _buffer(self, buffer: pickle.PickleBuffer) -> None:
        self.buffers.append(buffer)

    def reducer_override(self, obj: Any) -> Any:
        reduced = self._reduce(obj)
        if reduced is not NotImplemented:
            self.plain = False
        return reduced

    def _reduce(self, obj: Any) -> Any:
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
        return _namespace_function(self, func, _notebook_function, _token(func), False)


def _namespace_function(
    pickler: Any, func: types.FunctionType, make: Callable, key: str, globals_read: bool
) -> tuple:
    """The reduction of a function that reads a namespace as its globals, made on arrival by
    ``make(key, ...)`` reading the namespace there. ``globals_read``: the values of the globals
    it reads travel too, for a namespace that may lack them yet (:func:`_namespace_setstate`);
    else they are values of the namespace there already, or travel as such."""
    _, args, (state, slots), *_ = pickler._dynamic_function_reduce(func)
    code, _globals, name, defaults, closure = args
    if not globals_read:
        slots = {**slots, "__globals__": {}}
    return (
        make,
        (key, code, name, defaults, closure),
        (state, slots),
        None,
        None,
        _namespace_setstate,
    )


def _namespace_setstate(func: types.FunctionType, state: tuple) -> None:
    """cloudpickle's state of a function, set where it reads a namespace not its own: of the
    globals it read, only those the namespace lacks yet are added (a module the cell
    imported, read while the cell's result loads); the namespace's own bindings stay,
    ``__builtins__`` included."""
    attributes, slots = state
    func.__dict__.update(attributes)
    for name, value in slots.pop("__globals__").items():
        func.__globals__.setdefault(name, value)
    closure = slots.pop("__closure__")
    slots.pop("_cloudpickle_submodules")
    for cell, sent in zip(func.__closure__ or (), closure or (), strict=True):
        with contextlib.suppress(ValueError):  # an empty cell: a name not bound yet
            cell.cell_contents = sent.cell_contents
    for name, value in slots.items():
        setattr(func, name, value)


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


def _view_of(ref: tuple, dtype: Any, shape: tuple, strides: tuple, offset: int) -> Any:
    return _view(_received(*ref), dtype, shape, strides, offset)


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
    payload = stream.getvalue()
    objects = {}
    if len(payload) <= NOTE_LIMIT:
        objects = {index: obj for index, obj in pickler.memo.copy().values()}
    buffers = [b.raw() for b in pickler.buffers]
    return Sealed(tuple(values), kinds, payload, buffers, objects, pickler.plain)


@contextlib.contextmanager
def guard_classes(classes: Iterable[type] | None = None) -> Iterator[None]:
    """Keep ``classes`` (by default the notebook classes sent to cells) as they are while a
    result is read: cloudpickle sets a class's attributes on the class it finds for a tracked
    one. What the cell changed comes apart (:func:`apply_definitions`)."""
    before = {cls: dict(vars(cls)) for cls in list(_classes if classes is None else classes)}
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


# --- coming back: what the cell received and left as it was -------------------------------


@dataclass(frozen=True)
class Home:
    """Where a cell ran: its key, and (in its process, for a result the kernel opens) its
    namespace, whose functions come back reading the notebook's namespace, as functions the
    cell defined there would. A result opened on its worker keeps cloudpickle's way: its
    functions share one namespace of their own."""

    cell: str
    namespace: dict[str, Any] | None = None


@dataclass(frozen=True)
class References:
    """What a cell's result sends as references to the notebook's objects (in the cell's
    process): ``objects``, by id, the reference to each object the cell received and left as
    it was, with the object (kept alive while its id stands for it); ``arrays``, the numpy
    arrays it received, changed or not, with their references, by the id of the array that
    owns their memory (numpy's ``base`` of a view skips an array that does not own its memory,
    as one that arrived does not)."""

    objects: dict[int, tuple[tuple, Any]] = field(default_factory=dict)
    arrays: dict[int, list[tuple[tuple, Any]]] = field(default_factory=dict)


class _ViewPickler(ValuePickler):
    """A cell's result where no object is sent by reference: a numpy view of an array the
    cell received goes as a view of the notebook's array (:class:`References`), and a
    function reading the cell's namespace, wherever the result holds it, comes to read the
    notebook's (:func:`_home_function`)."""

    def __init__(self, file: Any, refs: References, home: Home, **kwargs: Any) -> None:
        super().__init__(file, protocol=5, **kwargs)
        self.refs = refs
        self.home = home

    def reducer_override(self, obj: Any) -> Any:
        if self.home.namespace is not None and _is_notebook_function(obj, self.home.namespace):
            return _namespace_function(self, obj, _home_function, self.home.cell, True)
        if self.refs.arrays and _is_ndarray(obj) and obj.base is not None:
            for ref, received in self.refs.arrays.get(id(_root(obj)), ()):
                if received is not obj and _within(obj, received):
                    return (_view_of, (ref, *_view_reduce(obj, received)[1][1:]))
        return super().reducer_override(obj)


class _ReturningPickler(_ViewPickler):
    """A cell's result: what the cell received and left as it was goes as a reference to the
    notebook's object (the pickler asks of every object, ints and strings too: only a result
    that has such references pays for it)."""

    def persistent_id(self, obj: Any) -> tuple | None:
        ref = self.refs.objects.get(id(obj))
        return ref[0] if ref is not None else None


def _within(view: Any, array: Any) -> bool:
    """Whether all of ``view``'s memory lies in ``array``'s."""
    low, high = _bounds(view)
    start, end = _bounds(array)
    return start <= low and high <= end


def _bounds(array: Any) -> tuple[int, int]:
    """The first and past-the-last byte addresses ``array`` reads, whatever its strides."""
    low = high = array.__array_interface__["data"][0]
    if array.size == 0:
        return low, low
    for n, stride in zip(array.shape, array.strides, strict=True):
        if stride < 0:
            low += (n - 1) * stride
        else:
            high += (n - 1) * stride
    return low, high + array.itemsize


class Returned:
    """A cell's result as it crosses back: pickled in the cell's process, carried by the worker
    and Dask as it is, opened where it is read. In the kernel, references to what the cell
    received and left as it was open as the notebook's own objects (:func:`expect`); a result
    opened on the worker (a value that stays there) holds none (:func:`references`)."""

    __slots__ = ("_opened", "buffers", "payload", "worker")

    def __init__(self, payload: bytes, buffers: list[Any], worker: str = "") -> None:
        self.payload = payload
        self.buffers = buffers
        self.worker = worker  #: the address of the worker it ran on
        self._opened: Any = _MISSING

    @classmethod
    def of(cls, value: Any, refs: References, home: Home) -> Returned:
        """``value`` pickled, with ``refs`` as references (:func:`references`), its functions
        of ``home``'s namespace made to read the notebook's."""
        stream = io.BytesIO()
        buffers: list[pickle.PickleBuffer] = []
        kind = _ReturningPickler if refs.objects else _ViewPickler
        kind(stream, refs, home, buffer_callback=buffers.append).dump(value)
        return cls(stream.getvalue(), [b.raw() for b in buffers])

    def open(self) -> Any:
        """The value (made once)."""
        if self._opened is _MISSING:
            unpickler = pickle.Unpickler(io.BytesIO(self.payload), buffers=self.buffers)
            unpickler.persistent_load = lambda ref: _received(*ref)  # type: ignore[method-assign]
            self._opened = unpickler.load()
        return self._opened

    def __reduce_ex__(self, protocol: Any) -> tuple:
        return (Returned, (self.payload, _out_of_band(self.buffers, protocol), self.worker))


class Expected:
    """In the kernel, the objects a cell was sent, by part and memo index: while its
    submission holds this, references the cell sends back load as the notebook's own objects
    (elsewhere they cannot open)."""

    __slots__ = ("__weakref__", "functions", "namespace", "objects")

    def __init__(
        self,
        objects: dict[tuple[str, int], Any],
        functions: dict[str, Any],
        namespace: Mapping[str, Any],
    ) -> None:
        self.objects = objects
        #: The notebook functions sent to cells, by token: one redefined meanwhile still is.
        self.functions = functions
        #: The notebook's namespace: the globals of the functions the cell made.
        self.namespace = namespace


_expected: weakref.WeakValueDictionary[str, Expected] = weakref.WeakValueDictionary()


def expect(cell: str, parts: Mapping[str, Sealed], namespace: Mapping[str, Any]) -> Expected:
    """What the cell ``cell`` was sent from ``namespace`` as ``parts`` (part name -> sealed),
    known until the returned object is let go."""
    objects = {(p, i): obj for p, sealed in parts.items() for i, obj in sealed.objects.items()}
    expected = _expected[cell] = Expected(objects, dict(_functions.items()), namespace)
    return expected


def _home_function(
    cell: str, code: types.CodeType, name: str, defaults: Any, closure: Any
) -> types.FunctionType:
    """A function the cell made, reading the notebook's namespace (the kernel opens it)."""
    sent = _expected.get(cell)
    if sent is None:
        raise pickle.UnpicklingError(f"the result of {cell} holds functions for the kernel")
    return types.FunctionType(code, sent.namespace, name, defaults, closure)  # type: ignore[arg-type]


def _received(cell: str, part: str | None, index: Any) -> Any:
    sent = _expected.get(cell)
    if sent is None:
        raise pickle.UnpicklingError(f"the result of {cell} refers to objects the kernel sent")
    return sent.functions[index] if part is None else sent.objects[(part, index)]


def references(
    cell: str,
    noted: Mapping[str, tuple[str, dict[int, Any]]],
    inputs: Mapping[str, Any],
    unchanged: Iterable[str],
    changed: Iterable[str],
) -> References:
    """In the cell's process: the references its result sends (:class:`References`) to the
    notebook functions it received (what a call changes of them comes apart:
    :class:`DefinitionsSnapshot`), to the objects of the ``inputs`` named ``unchanged`` (all
    they hold), and to the arrays of those and of ``changed`` (whose new values the
    notebook's arrays take in place), from ``noted`` (name -> its part and its objects by
    memo index, as :meth:`Sealed.open` noted them)."""
    refs = References({id(f): ((cell, None, token), f) for f, token in _cell_functions.values()})
    for name in unchanged:
        refs.objects.update(
            (id(obj), ((cell, *place), obj))
            for place, obj in _held(inputs[name], noted[name], noted)
            # Code is found by name (a reduction calls it) or by its token. A string has no
            # identity worth keeping, and a reference is made of strings: one noted (the
            # part's name "", say) would stand for itself without end.
            if not (_is_code(obj) or isinstance(obj, (str, bytes)))
        )
    for name in [*unchanged, *changed]:
        part, objects = noted[name]
        for index, obj in objects.items():
            if _is_ndarray(obj) and _arrived_out_of_band(obj):
                refs.arrays.setdefault(id(_root(obj)), []).append(((cell, part, index), obj))
    return refs


def _held(
    value: Any, own: tuple[str, dict[int, Any]], noted: Mapping[str, tuple[str, dict[int, Any]]]
) -> list[tuple[tuple[str, int], Any]]:
    """The noted objects ``value`` holds, itself included, by part and memo index: those first
    made for it, or, where an input that came before it holds it (``lst = [fs]`` and ``fs``),
    those its pickle meets."""
    part, objects = own
    if any(obj is value for obj in objects.values()):
        return [((part, index), obj) for index, obj in objects.items()]
    pickler = ValuePickler(io.BytesIO(), protocol=5, buffer_callback=lambda _: False)
    with contextlib.suppress(Exception):  # what it met before failing is still held
        pickler.dump(value)
    met = pickler.memo.copy()
    return [
        ((part, index), obj)
        for part, objects in noted.values()
        for index, obj in objects.items()
        if id(obj) in met
    ]


def _arrived_out_of_band(array: Any) -> bool:
    """Whether ``array`` arrived as a view of its pickle's buffer: the notebook's array is then
    C-contiguous too, a buffer a view can be made of (one pickled in band, not contiguous
    there, arrives as a contiguous copy)."""
    return _root(array).base is not None and array.flags.c_contiguous


def _is_code(obj: Any) -> bool:
    return isinstance(obj, (type, types.ModuleType)) or inspect.isroutine(obj)


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
    """What a cell may change of a class: not its code, nor Python's names (``__x__``), nor an
    enum's own (``_x_``: its members' caches, which a composite flag grows)."""
    reserved = "_" if isinstance(cls, enum.EnumMeta) else "__"
    return {
        k: v
        for k, v in vars(cls).items()
        if not (k.startswith(reserved) and k.endswith(reserved))
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
