"""What a cell does with what it reads, from its code: the planner's view of its memory.

:func:`recognize` walks a cell (after IPython's transforms) and says, for each reader it calls
with a path (the calls :func:`taskcell.runner.analysis.analyze_cell` lists in ``files``), how
the cell holds what it reads (a :data:`Holding`), and which operations it runs on the data that
make copies of it (``sort_values``, ``merge``, ``np.fft.fft``, array arithmetic, ...).

A file read whole holds it all at once: a DataFrame, Python objects, text, an array. A file the
cell goes through piece by piece (``for line in f``, ``f.read(1 << 20)`` in a loop, ``chunksize=``
or ``iterator=True``, ``np.memmap``) holds one piece at a time: it is *streamed*, and its size
does not set the cell's memory. The rules are by name, as the cell writes them: a reader or an
operation the planner does not know is ``"unknown"`` and sized by the default profile.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

from taskcell.planner.shapes import Arr, ReadShape, Shaped, shaped_memory
from taskcell.runner.analysis import dotted, file_read

#: How a cell holds a file it reads:
#: ``csv``: a DataFrame parsed from text (``pd.read_csv``, ``read_table``, ``read_fwf``);
#: ``json-frame`` / ``json-lines-frame``: a DataFrame from JSON (``pd.read_json``, with
#: ``lines=True``); ``columnar``: a DataFrame from Parquet, Feather or ORC; ``frame``: a
#: DataFrame from another pandas reader (Excel, HDF, ...); ``pickle``: unpickled objects;
#: ``json``: Python objects of a whole JSON document; ``json-lines``: a list of objects, one per
#: line; ``words``: the text and a list of its words (``.split()``, ``re.findall``); ``lines``:
#: a list of its lines; ``csv-rows``: a list of rows (``list(csv.reader(f))``); ``csv-dicts``:
#: a list of dicts (``list(csv.DictReader(f))``); ``text`` /
#: ``bytes``: the whole file as one string or bytes object; ``array``: a numpy array
#: (``np.load``, ``np.fromfile``); ``text-array``: an array parsed from text (``np.loadtxt``);
#: ``xml``: an XML document's tree (``ElementTree.parse``, ``minidom.parse``);
#: ``stream``: piece by piece; ``unknown``: none of these.
Holding = Literal[
    "xml",
    "csv",
    "json-frame",
    "json-lines-frame",
    "columnar",
    "frame",
    "pickle",
    "json",
    "json-lines",
    "words",
    "lines",
    "csv-rows",
    "csv-dicts",
    "text",
    "bytes",
    "array",
    "text-array",
    "stream",
    "unknown",
]

#: Operations that hold copies of the data beside it: name -> extra copies at the peak. Read
#: off the workload corpus (``benchmarks/planner_corpus.py``) where it has them.
EXTRA_COPIES: dict[str, float] = {
    **dict.fromkeys(("fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "fftn", "ifftn"), 8.0),
    **dict.fromkeys(("pivot", "pivot_table", "unstack", "stack", "melt", "explode"), 2.0),
    **dict.fromkeys(("crosstab", "get_dummies", "outer", "kron"), 2.0),
    **dict.fromkeys(("svd", "qr", "eig", "eigh", "inv", "pinv", "cov", "corrcoef"), 2.0),
    **dict.fromkeys(("sort_values", "sort_index", "sort", "argsort", "sorted", "nlargest"), 1.0),
    **dict.fromkeys(("merge", "join", "concat", "concatenate", "hstack", "vstack"), 1.0),
    **dict.fromkeys(("copy", "astype", "to_numpy", "to_records", "to_dict", "tolist"), 1.0),
    **dict.fromkeys(("dropna", "fillna", "drop_duplicates", "reset_index", "query"), 1.0),
    **dict.fromkeys(("apply", "transform", "rank", "diff", "cumsum", "shift", "where"), 1.0),
    **dict.fromkeys(("dot", "matmul", "einsum", "unique", "value_counts"), 1.0),
    **dict.fromkeys(("json_normalize", "DataFrame", "from_records", "from_dict"), 1.0),
    **dict.fromkeys(("groupby", "Counter", "resample", "rolling"), 0.25),
}
#: Arithmetic on a whole array or frame (``(a - a.mean()) / a.std()``) holds temporaries.
ARITHMETIC_COPIES = 2.0

_PANDAS_STREAM_KEYWORDS = ("chunksize", "iterator")
_OPENERS = ("open",)
_JSON_MODULES = ("json", "ujson", "orjson", "simplejson", "yaml")
_PICKLE_MODULES = ("pickle", "joblib", "torch", "dill", "cloudpickle")
_NUMPY = ("np", "numpy")
#: Modules whose ``parse``/``iterparse`` read an XML file by its path.
_XML_MODULES = ("ET", "ElementTree", "etree", "cElementTree", "minidom", "pulldom", "lxml", "xml")
#: ``.str`` methods whose result is Python objects per row (lists, frames of pieces).
TEXT_OPS = ("split", "rsplit", "findall", "extractall", "partition", "rpartition", "get_dummies")
_MATERIALIZE = ("list", "tuple", "sorted", "set")
_ACCUMULATE = ("append", "extend", "insert")
# How much each holding holds, for choosing one when a file is read several ways.
_RANK = {h: i for i, h in enumerate(("stream", "unknown", "bytes", "text", "array", "pickle"))}


@dataclass(frozen=True)
class Read:
    """One reader the cell calls with a path: its name as the cell writes it (as
    :class:`~taskcell.runner.analysis.FileRead` has it), how the cell holds the file, the
    path (a literal, or one a name in the cell is bound to) or else the notebook name holding
    it, and the ``columns=`` it asks for (None: all)."""

    function: str
    holding: Holding
    path: str | None = None
    name: str | None = None
    columns: tuple[str, ...] | None = None


@dataclass(frozen=True)
class TextOp:
    """A ``.str`` method the cell calls on a column (``df['text'].str.split()``): the column
    (None where the code does not name one), the method and its literal arguments."""

    column: str | None
    method: str
    args: tuple = ()
    kwargs: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True)
class CellWork:
    """What :func:`recognize` found in a cell.

    Attributes
    ----------
    reads
        Each reader called with a path, in order of first call.
    extra
        Copies of the data the heaviest operation holds beside it (0 for none).
    operations
        The operations that make copies, by name, as the cell calls them.
    """

    reads: tuple[Read, ...] = ()
    extra: float = 0.0
    operations: tuple[str, ...] = field(default=())
    shaped: Shaped = field(default_factory=Shaped)
    text_ops: tuple[TextOp, ...] = ()

    def read(self, function: str, path: str | None = None, name: str | None = None) -> Read:
        """The call of ``function`` on that path (or notebook name): each call is its own
        read; where none matches, the calls of ``function`` together (the largest holding)."""
        same = [r for r in self.reads if r.function == function]
        exact = [r for r in same if (r.path, r.name) == (path, name)]
        if exact:
            return exact[0]
        if not same:
            return Read(function, "unknown", path, name)
        largest = max((r.holding for r in same), key=lambda h: _RANK.get(h, len(_RANK)))
        return Read(function, largest, path, name)

    def holding(self, function: str, path: str | None = None, name: str | None = None) -> Holding:
        """How the cell holds what that call reads; ``unknown`` for another function."""
        return self.read(function, path, name).holding


def recognize(
    source: str,
    values: Iterable[str] = (),
    file_shape: FileShape | None = None,
    shapes: Mapping[str, Arr] | None = None,
) -> CellWork:
    """How a cell (IPython's transforms applied) holds the files it reads, and what it runs.

    ``values`` names the notebook's arrays and frames the cell reads: arithmetic on them
    holds temporaries too. ``file_shape`` gives the shape of an array a reader call returns
    (a ``.npy`` header) and ``shapes`` those of the notebook's arrays: operations sized by
    their shapes (:mod:`.shapes`) are counted by their results, not by copy factors.

    Examples
    --------
    >>> work = recognize("import pandas as pd\\ndf = pd.read_csv('a.csv').sort_values('x')")
    >>> work.reads, work.extra, work.operations
    ((Read(function='pd.read_csv', holding='csv'),), 1.0, ('sort_values',))
    >>> recognize("with open('a.txt') as f:\\n    n = sum(1 for line in f)").reads
    (Read(function='open', holding='stream'),)
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return CellWork()
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    walker = _Walker(tree, parents)
    walker.loaded.update(values)
    literals = _literal_names(tree)
    reads: dict[tuple[str, str | None, str | None], Read] = {}
    for node in ast.walk(tree):
        found = read_call(node) if isinstance(node, ast.Call) else None
        if found is None or not isinstance(node, ast.Call) or walker.is_handle(node):
            continue
        function, (path, name) = found[0], _path_key(found[1], literals)
        holding = walker.holding(node)
        known = reads.get((function, path, name))
        if known is not None:
            holding = _larger(known.holding, holding)
        reads[(function, path, name)] = Read(function, holding, path, name, _columns(node))
    shaped = shaped_memory(tree, _shape_reader(file_shape, literals), shapes)
    operations: dict[str, None] = dict.fromkeys(shaped.operations)
    extra = 0.0
    for node in ast.walk(tree):
        if id(node) in shaped.nodes:
            continue
        if isinstance(node, ast.Call):
            name = _last(node.func)
            if name in EXTRA_COPIES:
                operations.setdefault(name)
                extra = max(extra, EXTRA_COPIES[name])
        elif isinstance(node, ast.BinOp) and walker.is_loaded(node):
            operations.setdefault("arithmetic")
            extra = max(extra, ARITHMETIC_COPIES)
    text = tuple(_text_ops(tree))
    operations.update(dict.fromkeys(f"str.{op.method}" for op in text))
    return CellWork(tuple(reads.values()), extra, tuple(operations), shaped, text)


#: The array a read returns, where its file says (a ``.npy`` header): the read, and its call.
FileShape = Callable[["Read", ast.Call], "Arr | None"]


def _shape_reader(file_shape: FileShape | None, literals: Mapping[str, str]) -> ReadShape:
    """The shape model's view of reader calls: the array each returns, by the file it names."""

    def read_shape(call: ast.Call) -> Arr | None:
        found = read_call(call)
        if found is None or file_shape is None:
            return None
        path, name = _path_key(found[1], literals)
        return file_shape(Read(found[0], "array", path, name), call)

    return read_shape


def read_call(node: ast.Call) -> tuple[str, ast.expr] | None:
    """``(function, path expression)`` for a call that reads a file by a path it names: the
    readers the cell analysis lists, and XML parsers (``ET.parse(path)``)."""
    found = file_read(node)
    if found is not None:
        return found
    func = node.func
    if (
        isinstance(func, ast.Attribute)
        and func.attr in ("parse", "iterparse")
        and _module(func) in _XML_MODULES
        and node.args
    ):
        return dotted(func), node.args[0]
    return None


def _literal_names(tree: ast.Module) -> dict[str, str]:
    """Names the cell binds once to a string literal (``path = 'a.csv'``)."""
    bound: dict[str, list[object]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    value = node.value.value if isinstance(node.value, ast.Constant) else None
                    bound.setdefault(target.id, []).append(value)
    return {n: v[0] for n, v in bound.items() if len(v) == 1 and isinstance(v[0], str)}


def _path_key(path: ast.expr, literals: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The path a reader's argument names, as the cell analysis has it: a literal (or
    ``Path(literal)``, or a name bound to one), else the notebook name that holds it."""
    if isinstance(path, ast.Constant) and isinstance(path.value, str):
        return path.value, None
    if isinstance(path, ast.Call) and _last(path.func) in ("Path", "PurePath") and path.args:
        return _path_key(path.args[0], literals)
    if isinstance(path, ast.Name):
        return (literals[path.id], None) if path.id in literals else (None, path.id)
    return None, None


def _columns(call: ast.Call) -> tuple[str, ...] | None:
    """The literal ``columns=`` a reader is given (``read_parquet(p, columns=['a', 'b'])``)."""
    node = _keyword(call, "columns")
    if not isinstance(node, ast.List | ast.Tuple):
        return None
    names = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return tuple(names) if len(names) == len(node.elts) else None


def _text_ops(tree: ast.Module) -> Iterator[TextOp]:
    """Each ``<column>.str.<method>(...)`` call with literal arguments."""
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in TEXT_OPS
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == "str"
        ):
            continue
        owner = node.func.value.value
        column = None
        if isinstance(owner, ast.Subscript) and isinstance(owner.slice, ast.Constant):
            column = str(owner.slice.value)
        elif isinstance(owner, ast.Attribute):
            column = owner.attr
        try:
            args = tuple(ast.literal_eval(a) for a in node.args)
            kwargs = tuple((k.arg or "", ast.literal_eval(k.value)) for k in node.keywords)
        except ValueError:
            continue
        yield TextOp(column, node.func.attr, args, kwargs)


def _last(node: ast.expr) -> str:
    return dotted(node).rpartition(".")[2]


def _module(node: ast.expr) -> str:
    return dotted(node).partition(".")[0]


def _larger(a: Holding, b: Holding) -> Holding:
    """The holding that holds more, for a file read in two ways."""
    return max(a, b, key=lambda h: _RANK.get(h, len(_RANK)))


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_true(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


class _Walker:
    """Follows what a cell does with the value of a reader's call."""

    def __init__(self, tree: ast.Module, parents: dict[ast.AST, ast.AST]) -> None:
        self.tree = tree
        self.parents = parents
        #: Names bound to what an array or frame reader returned (for arithmetic).
        self.loaded: set[str] = set()
        #: Names bound to a file object (``with open(p) as f``).
        self.handles = {
            name
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and _last(node.func) in _OPENERS
            for name in self._bound_names(node)
        }

    def is_loaded(self, node: ast.expr) -> bool:
        """Whether ``node`` is arithmetic on a whole loaded array or frame (``a - a.mean()``),
        not on something computed from it (``len(a) + 1``)."""
        if isinstance(node, ast.Name):
            return node.id in self.loaded
        if isinstance(node, ast.UnaryOp):
            return self.is_loaded(node.operand)
        if isinstance(node, ast.BinOp) and isinstance(
            node.op, ast.Add | ast.Sub | ast.Mult | ast.Div | ast.Pow | ast.MatMult
        ):
            return self.is_loaded(node.left) or self.is_loaded(node.right)
        return False

    def is_handle(self, node: ast.Call) -> bool:
        """Whether a reader is given a file object (``json.load(f)``, ``json.load(open(p))``):
        the ``open`` is the read, and this call what the cell does with it."""
        found = read_call(node)
        path = found[1] if found else None
        if isinstance(path, ast.Call):
            return _last(path.func) in _OPENERS
        return isinstance(path, ast.Name) and path.id in self.handles

    def holding(self, call: ast.Call) -> Holding:
        name, module = _last(call.func), _module(call.func)
        if name == "read_bytes":
            return "bytes"
        if name == "read_text":
            return self._text(call, binary=False)
        if name in _OPENERS:
            return self._handle(call)
        if any(_keyword(call, k) is not None for k in _PANDAS_STREAM_KEYWORDS):
            return "stream"
        holding = self._reader(call, name, module)
        if holding in ("array", "csv", "frame", "columnar", "json-frame", "json-lines-frame"):
            self.loaded |= set(self._bound_names(call))
        return holding

    def _reader(self, call: ast.Call, name: str, module: str) -> Holding:
        if name in ("read_csv", "read_table", "read_fwf"):
            return "csv"
        if name == "read_json":
            return "json-lines-frame" if _is_true(_keyword(call, "lines")) else "json-frame"
        if name in ("read_parquet", "read_feather", "read_orc"):
            return "columnar"
        if name == "read_pickle":
            return "pickle"
        if name in ("parse", "iterparse") and module in _XML_MODULES:
            return "xml"
        if name.startswith("read_"):
            return "frame"
        if name == "memmap":
            return "stream"  # pages are read as the cell touches them
        if name in ("loadtxt", "genfromtxt"):
            return "text-array"
        if name in ("load", "fromfile", "load_npz", "imread", "loadmat"):
            if module in _NUMPY or name != "load":
                return "array"
            return (
                "pickle"
                if module in _PICKLE_MODULES
                else "json"
                if module in _JSON_MODULES
                else "unknown"
            )
        return "unknown"

    # -- file objects ---------------------------------------------------------------------

    def _handle(self, call: ast.Call) -> Holding:
        """How the cell uses the file object ``open(...)`` gives: each use, the largest."""
        mode = call.args[1] if len(call.args) > 1 else _keyword(call, "mode")
        binary = isinstance(mode, ast.Constant) and "b" in str(mode.value)
        uses = [self._use(u, binary) for u in self._uses(call)]
        known = [u for u in uses if u != "unknown"]
        if not known:
            return "unknown"
        return max(known, key=lambda h: _RANK.get(h, len(_RANK)))

    def _uses(self, call: ast.Call) -> Iterator[ast.expr]:
        """The expressions that stand for the file object: the call itself, or the name it is
        bound to (``with open(p) as f``, ``f = open(p)``) wherever the cell reads it."""
        names = self._bound_names(call)
        if not names:
            yield call
            return
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and node.id in names and isinstance(node.ctx, ast.Load):
                yield node

    def _bound_names(self, call: ast.Call) -> list[str]:
        parent = self.parents.get(call)
        if isinstance(parent, ast.withitem) and isinstance(parent.optional_vars, ast.Name):
            return [parent.optional_vars.id]
        if isinstance(parent, ast.Assign | ast.AnnAssign | ast.NamedExpr):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            return [t.id for t in targets if isinstance(t, ast.Name)]
        return []

    def _use(self, node: ast.expr, binary: bool) -> Holding:
        parent = self.parents.get(node)
        if isinstance(parent, ast.Attribute) and isinstance(self.parents.get(parent), ast.Call):
            call = self.parents[parent]
            assert isinstance(call, ast.Call)
            if parent.attr == "read":
                return "stream" if call.args else self._text(call, binary)
            if parent.attr == "readlines":
                return "lines"
            return "stream" if parent.attr == "readline" else "unknown"
        if isinstance(parent, ast.Call) and node in parent.args:
            return self._argument(parent, binary)
        if isinstance(parent, ast.comprehension) and parent.iter is node:
            return self._iterated(parent)
        if isinstance(parent, ast.For) and parent.iter is node:
            return self._loop(parent, "lines")
        return "unknown"

    def _argument(self, call: ast.Call, binary: bool) -> Holding:
        """The file object passed to ``call``: ``json.load(f)``, ``csv.reader(f)``, ..."""
        name, module = _last(call.func), _module(call.func)
        if name in ("reader", "DictReader"):
            return self._rows(call, "csv-dicts" if name == "DictReader" else "csv-rows")
        if name in _MATERIALIZE:
            return "lines"
        if name.startswith("read_") or name in ("load", "loadtxt", "genfromtxt", "fromfile"):
            return self.holding(call)
        if name in ("safe_load", "full_load") and module in _JSON_MODULES:
            return "json"
        if name in ("parse", "iterparse") and module in _XML_MODULES:
            return "xml"
        return "unknown"

    def _rows(self, reader: ast.Call, kept: Holding) -> Holding:
        parent = self.parents.get(reader)
        if isinstance(parent, ast.comprehension) and parent.iter is reader:
            return "stream" if isinstance(self.parents.get(parent), ast.GeneratorExp) else kept
        if isinstance(parent, ast.For) and parent.iter is reader:
            return self._loop(parent, kept)
        return kept

    def _iterated(self, comprehension: ast.comprehension) -> Holding:
        """``[... for line in f]`` keeps every element; ``sum(... for line in f)`` one."""
        owner = self.parents.get(comprehension)
        if isinstance(owner, ast.GeneratorExp):
            outer = self.parents.get(owner)
            if not (isinstance(outer, ast.Call) and _last(outer.func) in _MATERIALIZE):
                return "stream"
        element = getattr(owner, "elt", None) or getattr(owner, "value", None)
        return self._element(element)

    def _element(self, element: ast.AST | None) -> Holding:
        calls = (
            {_last(n.func) for n in ast.walk(element) if isinstance(n, ast.Call)}
            if element
            else set()
        )
        if "loads" in calls:
            return "json-lines"
        if calls & {"split", "findall"}:
            return "words"
        return "lines"

    def _loop(self, loop: ast.For, kept: Holding) -> Holding:
        """A loop over the file keeps what its body adds to a collection, else one piece."""
        for node in ast.walk(loop):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _ACCUMULATE
                and node.args
            ):
                found = self._element(node.args[0])
                return found if kept == "lines" else kept
        return "stream"

    # -- whole text -----------------------------------------------------------------------

    def _text(self, call: ast.Call, binary: bool) -> Holding:
        """What the cell does with a whole file's text (``f.read()``, ``Path.read_text()``)."""
        for node in self._consumers(call):
            parent = self.parents.get(node)
            if isinstance(parent, ast.Attribute) and parent.attr in ("split", "splitlines"):
                return "words" if parent.attr == "split" else "lines"
            if isinstance(parent, ast.Call) and node in parent.args:
                name = _last(parent.func)
                if name == "loads":
                    return "json"
                if name in ("findall", "split", "finditer"):
                    return "words"
        return "bytes" if binary else "text"

    def _consumers(self, call: ast.Call) -> Iterable[ast.expr]:
        """``call`` and each later read of a name bound to its value."""
        yield call
        names = self._bound_names(call)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and node.id in names and isinstance(node.ctx, ast.Load):
                yield node
