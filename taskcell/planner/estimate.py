"""A cell's memory from what it reads and what its code does with it, before it ever ran.

The cell's input is what it reads (:func:`cell_input`): the notebook values it uses, by their
size in memory, and the files it opens by a path it names (``open``, ``pd.read_*``,
``np.load``, ...), compressed ones by their size decompressed. Its memory
(:func:`estimate_memory`) is

    floor + libraries + what it holds of each input + copies its operations make

- the floor is an interpreter running taskcell's cell loop; libraries are those the cell
  imports, or that its values, readers and pickles need (:data:`LIBRARIES`);
- what it holds of a file depends on how it reads it (:mod:`.recognize`): a DataFrame parsed
  from csv, Python objects from JSON or text, an array, or a stream that holds one piece at a
  time. The bytes in memory per byte of file come from parsing a sample of it
  (:mod:`.expansion`); the copies a reader makes while it parses (:data:`HOLDINGS`) and those
  operations make (:data:`~taskcell.planner.recognize.EXTRA_COPIES`) were read off the
  workload corpus in ``benchmarks/planner_corpus.py``.
"""

from __future__ import annotations

import ast
import glob
import io
import math
import os
import pickletools
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from taskcell.planner.compressed import compression
from taskcell.planner.expansion import SAMPLE, expansion, file_format, text_op_bytes
from taskcell.planner.recognize import CellWork, Holding, Read, TextOp, read_call, recognize
from taskcell.planner.shapes import Arr
from taskcell.planner.sizing import file_size
from taskcell.runner import crossing
from taskcell.runner.analysis import FileRead, analyze_cell
from taskcell.runner.changes import is_data
from taskcell.runner.remote_value import RemoteValue
from taskcell.spec.amounts import show_bytes

MiB = 1 << 20

#: An interpreter running taskcell's cell loop, before the cell imports anything.
FLOOR = 24 * MiB
#: A bare interpreter (``python -c pass``): the least of a recorded peak that no input grows.
BARE = 8 * MiB
#: What importing a package adds to an interpreter, and the packages it imports itself
#: (measured on Linux with CPython 3.11, pandas 3.1 with pyarrow, numpy 2.4). A package not
#: listed and not in the standard library counts :data:`OTHER_LIBRARY`.
LIBRARIES: dict[str, tuple[int, frozenset[str]]] = {
    "pandas": (113 * MiB, frozenset({"numpy", "pyarrow"})),
    "pyarrow": (62 * MiB, frozenset({"numpy"})),
    "numpy": (17 * MiB, frozenset()),
    "scipy": (20 * MiB, frozenset({"numpy"})),
    "sklearn": (190 * MiB, frozenset({"numpy", "scipy", "pandas"})),
    "matplotlib": (38 * MiB, frozenset({"numpy"})),
    "dask": (21 * MiB, frozenset()),
    "distributed": (51 * MiB, frozenset({"dask"})),
    "polars": (60 * MiB, frozenset()),
    "torch": (300 * MiB, frozenset({"numpy"})),
}
OTHER_LIBRARY = 8 * MiB
#: What a streamed file holds at a time: a chunk, a line, a block and the reader's buffers.
STREAM = 32 * MiB


@dataclass(frozen=True, kw_only=True)
class Model:
    """How a holding turns a file into memory: ``text`` copies of the file's (decompressed)
    bytes while it is read, ``parsed`` copies of the sampled result (a DataFrame, Python
    objects), ``expansion`` bytes of result per file byte where no sample tells, and the
    ``library`` its reader needs."""

    text: float
    parsed: float
    expansion: float
    library: str | None = None


#: Each holding's model (see :data:`taskcell.planner.recognize.Holding`). A compressed file is
#: decompressed piece by piece, so it costs no ``text`` copies.
HOLDINGS: dict[Holding, Model] = {
    "csv": Model(text=1.0, parsed=2.0, expansion=1.7, library="pandas"),
    "json-lines-frame": Model(text=0.0, parsed=1.75, expansion=9.7, library="pandas"),
    "json-frame": Model(text=1.0, parsed=1.75, expansion=9.7, library="pandas"),
    "columnar": Model(text=0.0, parsed=2.5, expansion=6.0, library="pandas"),
    "frame": Model(text=0.0, parsed=1.0, expansion=4.0, library="pandas"),
    "pickle": Model(text=0.0, parsed=1.0, expansion=1.0),
    "xml": Model(text=0.0, parsed=1.0, expansion=12.0),
    "json": Model(text=1.0, parsed=1.0, expansion=6.5),
    "json-lines": Model(text=0.0, parsed=1.15, expansion=9.7),
    "words": Model(text=2.7, parsed=1.0, expansion=10.5),
    "lines": Model(text=0.0, parsed=1.0, expansion=2.5),
    "csv-rows": Model(text=0.0, parsed=1.1, expansion=8.0),
    "csv-dicts": Model(text=0.0, parsed=1.1, expansion=12.0),
    "text": Model(text=2.0, parsed=0.0, expansion=1.0),
    "bytes": Model(text=1.0, parsed=0.0, expansion=1.0),
    "array": Model(text=1.0, parsed=0.0, expansion=1.0, library="numpy"),
    "text-array": Model(text=1.0, parsed=2.0, expansion=1.0, library="numpy"),
    "stream": Model(text=0.0, parsed=0.0, expansion=0.0),
    "unknown": Model(text=0.0, parsed=1.0, expansion=4.0),
}


@dataclass(frozen=True, kw_only=True)
class Input:
    """One thing a cell reads: a notebook value or a file, its size and how the cell holds it.

    ``size`` is the value's bytes in memory or the file's decompressed size; ``loaded`` what
    the cell holds of it once read (the DataFrame, the objects, the array), which operations
    copy; ``memory`` the most reading it holds at once; ``widen`` how much larger a copy is
    (an array of small integers becomes float64 in arithmetic, a complex128 spectrum).
    """

    what: str
    holding: Holding | None
    size: int
    loaded: int
    memory: int
    widen: float = 1.0


@dataclass(frozen=True)
class CellInput:
    """What a cell reads (:func:`cell_input`): its inputs, and what its code does with them."""

    inputs: tuple[Input, ...]
    work: CellWork
    libraries: frozenset[str]

    @property
    def size(self) -> int:
        """The bytes it reads: values in memory plus files decompressed."""
        return sum(i.size for i in self.inputs)

    @property
    def unmodelled(self) -> tuple[str, ...]:
        """The files whose holding the code gives no basis for (read by an unknown call)."""
        return tuple(i.what for i in self.inputs if i.holding == "unknown")


@dataclass(frozen=True)
class Estimate:
    """A cell's memory before it runs (:func:`estimate_memory`): ``memory`` at its peak, of which
    ``base`` does not grow with its input (floor, libraries, streams)."""

    memory: int
    base: int
    read: CellInput

    @property
    def size(self) -> int:
        return self.read.size

    @property
    def least_base(self) -> int:
        """The least of ``base`` a recorded peak holds: a bare interpreter and the libraries
        (a cell process's floor and what it measures of them may count less)."""
        return self.base - FLOOR + BARE

    def in_proportion(self, size: int) -> int:
        """The input whose memory over the base, grown in proportion, is what this estimate
        expects at ``size`` bytes: ``size`` itself, unless arrays sized by their shapes grow
        otherwise (a pairwise product of a quarter of the rows is a sixteenth), so that a past
        run's peak scales as the cell's operations grow, not as its input."""
        shaped = self.read.work.shaped
        over = self.memory - self.base
        if size <= 0 or self.size <= 0 or not shaped.memory or over <= 0:
            return size
        share = size / self.size
        then = (over - shaped.memory) * share + shaped.at(share)
        grown = round(self.size * then / over)
        # From a larger past run, never less than in proportion: the shape model grows every
        # array with the rows, a fixed one too (cdist(X, C)), and would shrink the need.
        return min(grown, size) if size > self.size else grown

    def describe(self) -> str:
        """One sentence: what it reads and what that comes to."""
        parts = [
            f"{i.what} ({show_bytes(i.size)}{', ' + _HOW[i.holding] if i.holding else ''})"
            for i in self.read.inputs
        ]
        reads = "; ".join(parts) if parts else "no input"
        ops = self.read.work.operations
        then = f", then {', '.join(ops)}" if ops else ""
        shaped = self.read.work.shaped.memory
        sized = f", {show_bytes(shaped)} of arrays sized by their shapes" if shaped else ""
        unknown = self.read.unmodelled
        values = [i.what for i in self.read.inputs if i.holding is None]
        measure = (
            f"%%task auto --probe measures the cell on samples of {', '.join(values)}"
            if values
            else "a probe samples notebook values, not files: run it once on a smaller file "
            "and auto scales from that run"
        )
        guess = (
            f"; the code gives no basis for how it holds {', '.join(unknown)} (a guess of "
            f"{HOLDINGS['unknown'].expansion:g}x its size; {measure})"
            if unknown
            else ""
        )
        return (
            f"reads {reads}{then}: about {show_bytes(self.memory)} at its peak "
            f"({show_bytes(self.base)} of it interpreter and libraries{sized}){guess}"
        )


_HOW: dict[str, str] = {
    "csv": "parsed into a DataFrame",
    "json-lines-frame": "parsed into a DataFrame",
    "json-frame": "parsed into a DataFrame",
    "columnar": "read into a DataFrame",
    "frame": "read into a DataFrame",
    "pickle": "unpickled",
    "xml": "parsed into an XML tree",
    "json": "parsed into Python objects",
    "json-lines": "parsed into Python objects",
    "words": "split into words",
    "lines": "kept as lines",
    "csv-rows": "kept as rows",
    "csv-dicts": "kept as rows",
    "text": "read whole",
    "bytes": "read whole",
    "array": "loaded as an array",
    "text-array": "parsed into an array",
    "stream": "streamed",
    "unknown": "read",
    "value": "in memory",
}


def cell_input(
    source: str,
    namespace: Mapping[str, Any],
    transform: Callable[[str], str] | None = None,
    *,
    sample: bool = True,
) -> CellInput:
    """What a cell reads: the notebook values it uses and the files it opens by path.

    ``source`` is the cell as it runs (IPython's transforms applied); ``transform`` transforms
    the bodies of cell magics inside it, as for :func:`~taskcell.runner.analysis.analyze_cell`.
    A notebook name that holds the path of a file the cell opens counts as that file; a file
    that does not exist (yet) counts nothing. With ``sample=False`` no file is parsed: sizes
    are exact, what the cell holds of each file is the profile's guess (for a cell's size
    alone, :func:`~taskcell.planner.auto.note_input`).
    """
    analysis = analyze_cell(source, transform)
    path_names = {r.name for r in analysis.files if r.name}
    used = {n: namespace[n] for n in analysis.inputs if n in namespace and n not in path_names}
    values = {n: v for n, v in used.items() if is_data(v)}  # not code, nor a Dask graph
    # A value kept on a worker is sized by what it says, never touched: that would fetch it.
    here = {n: v for n, v in values.items() if not isinstance(v, RemoteValue)}
    arrays = [n for n, v in here.items() if _declares(v, "nbytes") or _declares(v, "dtypes")]
    shapes = {n: shape for n, v in here.items() if (shape := _value_shape(v)) is not None}
    work = recognize(source, arrays, _file_shapes(namespace), shapes)
    libraries = {m for m in analysis.imports if _third_party(m)}
    libraries |= {_package(v) for v in used.values() if _is_code(v)}
    inputs = []
    for name, value in values.items():
        nbytes = _value_size(value)
        libraries.add(type(value).__module__.partition(".")[0])
        widen = _widening(_declared(value, "dtype")) if name in here else 1.0
        inputs.append(
            Input(
                what=name,
                holding=None,
                size=nbytes,
                loaded=nbytes,
                memory=nbytes,
                widen=widen,
            )
        )
    for file in _file_reads(analysis.files, work):
        for path in _paths(file, namespace):
            read = work.read(file.function, file.path, file.name)
            found = _file_input(path, read, sample, work.text_ops)
            inputs.append(found[0])
            libraries |= found[1]
    return CellInput(tuple(inputs), work, frozenset(m for m in libraries if _third_party(m)))


def _file_reads(files: tuple[FileRead, ...], work: CellWork) -> list[FileRead]:
    """The files the analysis lists, and those only the planner reads as files (XML parsers)."""
    listed = list(files)
    for r in work.reads:
        if r.holding == "xml" and not any(f.function == r.function for f in listed):
            listed.append(FileRead(r.function, path=r.path, name=r.name))
    return listed


def estimate_memory(read: CellInput) -> Estimate:
    """The memory a cell needs at its peak, from what it reads (see the module docstring)."""
    base = FLOOR + library_memory(read.libraries)
    held = sum(i.memory for i in read.inputs if i.holding != "stream")
    streams = STREAM if any(i.holding == "stream" for i in read.inputs) else 0
    copies = math.ceil(read.work.extra * sum(i.loaded * i.widen for i in read.inputs))
    shaped = read.work.shaped.memory
    return Estimate(base + streams + held + copies + shaped, base + streams, read)


def _declares(value: Any, name: str) -> bool:
    """Whether ``value``'s class defines the attribute ``name`` (an array's ``nbytes``): asked
    of the class, as a notebook class's ``__getattr__`` may answer anything, or raise."""
    return hasattr(type(value), name)


def _declared(value: Any, name: str) -> Any:
    """``value.name`` where its class defines it (as numpy and pandas do), else None."""
    try:
        return getattr(value, name) if _declares(value, name) else None
    except Exception:
        return None


def _value_shape(value: Any) -> Arr | None:
    """A notebook array's shape and element size, for the shape model."""
    shape, dtype = _declared(value, "shape"), _declared(value, "dtype")
    itemsize = getattr(dtype, "itemsize", None)
    if isinstance(shape, tuple) and all(isinstance(d, int) for d in shape) and itemsize:
        return Arr(shape, int(itemsize))
    return None


def _file_shapes(namespace: Mapping[str, Any]) -> Callable[[Read, ast.Call], Arr | None]:
    """The array a reader call returns, from its file: a ``.npy`` header (not one mapped
    with ``mmap_mode``), or a raw file's size over ``dtype=``'s element size."""

    def shape(read: Read, call: ast.Call) -> Arr | None:
        name = read.function.rpartition(".")[2]
        if name not in ("load", "fromfile") or read_call(call) is None:
            return None
        paths = _paths(FileRead(read.function, read.path, read.name), namespace)
        if len(paths) != 1 or any(k.arg == "mmap_mode" for k in call.keywords):
            return None
        header = _npy_header(paths[0])
        if header is not None:
            return Arr(tuple(header[0]), int(header[1].itemsize))
        if name == "fromfile":
            dtype = next((k.value for k in call.keywords if k.arg == "dtype"), None)
            itemsize = _dtype_itemsize(dtype)
            return Arr((os.path.getsize(paths[0]) // itemsize,), itemsize)
        return None

    return shape


def _dtype_itemsize(node: ast.expr | None) -> int:
    """The element size ``dtype=`` names (``np.float32``, ``"int8"``); float64's by default."""
    if node is None:
        return 8
    text = node.value if isinstance(node, ast.Constant) else ast.unparse(node).rpartition(".")[2]
    try:
        import numpy as np

        return int(np.dtype(str(text)).itemsize)
    except Exception:  # not a dtype numpy knows: float64's
        return 8


def library_memory(libraries: frozenset[str] | set[str]) -> int:
    """What importing ``libraries`` adds to an interpreter, each package counted once."""
    covered: set[str] = set()
    for name in libraries:
        covered |= LIBRARIES.get(name, (0, frozenset()))[1]
    return sum(
        LIBRARIES[name][0] if name in LIBRARIES else OTHER_LIBRARY
        for name in libraries
        if name not in covered
    )


def _third_party(module: str) -> bool:
    return bool(module) and module not in sys.stdlib_module_names and module != "builtins"


def _is_code(value: Any) -> bool:
    return isinstance(
        value,
        types.ModuleType | types.FunctionType | types.BuiltinFunctionType | type | types.MethodType,
    )


def _package(code: Any) -> str:
    """The top-level package a module, class or function comes from."""
    name = code.__name__ if isinstance(code, types.ModuleType) else code.__module__ or ""
    return str(name).partition(".")[0]


def _value_size(value: Any) -> int:
    if isinstance(value, RemoteValue):  # what it says: asking it more would fetch it
        return value.nbytes
    # Dask's estimate (object columns by a sample, as for its own tasks), run before each
    # cell: pandas' deep memory_usage reads every string. A number is a value here, not bytes.
    return crossing.size_of(value)


def _paths(read: FileRead, namespace: Mapping[str, Any]) -> list[str]:
    """The existing files ``read`` names: its literal path, or the path a notebook name holds."""
    target = read.path if read.path is not None else namespace.get(read.name or "")
    if isinstance(target, os.PathLike):
        target = os.fspath(target)
    if not isinstance(target, str) or not target:
        return []
    try:
        pattern = os.path.expanduser(target)
        found = glob.glob(pattern) if set("*?[") & set(pattern) else [pattern]
        return [p for p in found if os.path.isfile(p)]
    except (OSError, ValueError):
        return []


def _holding(read: Read, path: str) -> Holding:
    """How the cell holds the file: as its code reads it, except that a table reader given a
    Parquet or Arrow file reads it as the columnar file it is, whatever its name says."""
    frame_like = ("csv", "frame", "columnar", "unknown")
    if read.holding in frame_like and file_format(path) in ("parquet", "arrow"):
        return "columnar"
    return read.holding


def _file_input(
    path: str, read: Read, sample: bool, text_ops: tuple[TextOp, ...] = ()
) -> tuple[Input, set[str]]:
    """What the cell holds of one file, and the libraries reading it needs."""
    function = read.function
    holding = _holding(read, path)
    model = HOLDINGS[holding]
    libraries = {model.library} if model.library else set()
    try:
        size = file_size(path)
        on_disk = os.path.getsize(path)
    except OSError:
        return Input(what=path, holding=holding, size=0, loaded=0, memory=0), libraries
    sampled = expansion(path, holding, function, read.columns) if model.parsed and sample else None
    per_byte = sampled if sampled is not None else model.expansion
    if holding == "columnar":  # sampled per byte on disk: the file is compressed in columns
        loaded = math.ceil(per_byte * on_disk)
    elif holding in ("array", "bytes", "text"):
        loaded = size
    else:
        loaded = math.ceil(per_byte * size)
    if holding == "pickle":
        libraries |= _pickled_libraries(path)
    text = 0.0 if compression(path) else model.text
    memory = 0 if holding == "stream" else math.ceil(text * size + model.parsed * loaded)
    memory = max(memory, loaded)
    if holding == "csv" and sample:
        memory += _text_ops(path, function, size, text_ops)
    widen = _widening(_npy_dtype(path)) if holding == "array" else 1.0
    held = 0 if holding == "stream" else loaded
    return Input(
        what=path, holding=holding, size=size, loaded=held, memory=memory, widen=widen
    ), libraries


def _text_ops(path: str, function: str, size: int, ops: tuple[TextOp, ...]) -> int:
    """What the ``.str`` methods the cell runs on a text table's columns make (lists of
    words, frames of pieces): each measured on a parsed sample, scaled to the file."""
    found = [text_op_bytes(path, function, op) for op in ops]
    return math.ceil(max((f for f in found if f is not None), default=0.0) * size)


def _npy_header(path: str) -> tuple[tuple[int, ...], Any] | None:
    """The shape and dtype a ``.npy`` file's header records; None for any other file."""
    try:
        import numpy as np

        fmt = np.lib.format
        with open(path, "rb") as f:
            major, _ = fmt.read_magic(f)
            read = fmt.read_array_header_1_0 if major == 1 else fmt.read_array_header_2_0
            shape, _, dtype = read(f)
            return tuple(shape), dtype
    except Exception:  # not a .npy file (np.fromfile's raw bytes), or no numpy here
        return None


def _npy_dtype(path: str) -> Any:
    """The dtype a ``.npy`` file's header records; None for any other file."""
    header = _npy_header(path)
    return header[1] if header is not None else None


def _widening(dtype: Any) -> float:
    """How much larger than an element of ``dtype`` its copies in arithmetic are: numpy
    computes integers, booleans and half floats in 8 bytes; float32, float64 and complex stay."""
    kind, itemsize = getattr(dtype, "kind", None), getattr(dtype, "itemsize", 0)
    if kind is None or not itemsize or (kind in "fc" and itemsize >= 4):
        return 1.0
    return 8 / itemsize


def _pickled_libraries(path: str) -> set[str]:
    """The known packages a pickle's first objects come from (unpickling imports them)."""
    found: set[str] = set()
    try:
        with open(path, "rb") as f:
            sample = f.read(SAMPLE)
        for op, arg, _ in pickletools.genops(io.BytesIO(sample)):
            if isinstance(arg, str):
                top = arg.partition(" ")[0].partition(".")[0]
                if top in LIBRARIES:
                    found.add(top)
            if op.name == "STOP":
                break
    except Exception:  # a sample cut mid-pickle ends here; what it named so far stands
        pass
    return found
