"""Memory that is not a copy of a cell's input: arrays sized by their own shape.

Pairwise distances, outer products, decompositions, covariance matrices and broadcasts that
grow (``X[:, None, :] - Y[None, :, :]``) make arrays whose size follows from their operands'
shapes, not from a factor of the input: ``cdist(X, X[:1500])`` on 400,000 rows is a 400,000 by
1,500 matrix whatever ``X`` takes. :func:`shaped_memory` follows a cell's statements in order,
knowing the shapes of the arrays it reads (a ``.npy`` header, a notebook array), and sizes
each array these operations make, the ones derived from them (``d ** 2``, ``d.min(axis=1)``)
and the temporaries the peak statement holds at once. Operations it cannot size (a shape
computed at run time) are left to the copy factors of :mod:`.recognize`.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from taskcell.runner.analysis import dotted

#: Bytes of each array element where a dtype is named.
_ITEMSIZE = {
    "float64": 8, "float32": 4, "float16": 2, "int64": 8, "int32": 4, "int16": 2, "int8": 1,
    "uint8": 1, "bool": 1, "complex128": 16, "complex64": 8, "float": 8, "int": 8,
}  # fmt: skip
#: Pairwise distance and kernel matrices: rows of the first operand by rows of the second.
_PAIRWISE = frozenset(
    {
        "cdist", "pairwise_distances", "euclidean_distances", "manhattan_distances",
        "cosine_distances", "cosine_similarity", "distance_matrix", "rbf_kernel",
        "linear_kernel", "polynomial_kernel", "pairwise_kernels", "haversine_distances",
    }
)  # fmt: skip
_CREATE = frozenset(
    {"zeros", "ones", "empty", "full", "rand", "randn", "random", "random_sample",
     "standard_normal", "normal", "uniform", "integers"}
)  # fmt: skip
_ELEMENTWISE = frozenset(
    {"sqrt", "exp", "log", "log1p", "abs", "absolute", "square", "sin", "cos", "tanh", "clip",
     "negative", "exp2", "log2", "log10", "power", "maximum", "minimum", "where", "round"}
)  # fmt: skip
_REDUCE = frozenset(
    {"sum", "mean", "std", "var", "min", "max", "argmin", "argmax", "any", "all", "prod",
     "median", "nansum", "nanmean", "amin", "amax", "ptp"}
)  # fmt: skip
_VIEWS = frozenset({"reshape", "ravel", "transpose", "squeeze", "view"})
_SORTS = frozenset({"sort", "argsort"})


@dataclass(frozen=True)
class Arr:
    """An array's shape and the bytes of one element; ``grown``: made by an operation sized
    by its shape (or derived from one), so its bytes are not already a copy of the input."""

    shape: tuple[int, ...]
    itemsize: int = 8
    grown: bool = False

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.itemsize


def _none(share: float) -> int:
    """No sized arrays at any share of the input."""
    return 0


@dataclass(frozen=True)
class Shaped:
    """What :func:`shaped_memory` found: the most bytes of sized arrays held at once, the
    operations it sized, the ids of the AST nodes it sized (which copy factors skip), and
    ``at``: that peak where every input array has ``share`` of its rows (a pairwise product
    of a quarter of the rows is a sixteenth; one against a fixed slice, a quarter)."""

    memory: int = 0
    operations: tuple[str, ...] = ()
    nodes: frozenset[int] = frozenset()
    at: Callable[[float], int] = field(default=_none, compare=False, repr=False)


#: A value the model follows: one array, several (``u, s, vt = svd(m)``), or unknown.
Value = Arr | tuple[Arr, ...] | None
#: The shape of what a reader call returns, where the file says (a ``.npy`` header).
ReadShape = Callable[[ast.Call], Arr | None]


def shaped_memory(
    tree: ast.Module, read_shape: ReadShape, values: Mapping[str, Arr] | None = None
) -> Shaped:
    """The peak bytes of the arrays a cell makes whose size is set by their shape."""
    given = dict(values or {})
    model = _Model(read_shape, given)
    model.run(tree.body)

    def at(share: float) -> int:
        def read(call: ast.Call) -> Arr | None:
            found = read_shape(call)
            return None if found is None else _rows(found, share)

        scaled = _Model(read, {n: _rows(a, share) for n, a in given.items()})
        scaled.run(tree.body)
        return scaled.peak

    found = tuple(dict.fromkeys(model.operations))
    return Shaped(model.peak, found, frozenset(model.nodes), at if model.peak else _none)


def _rows(array: Arr, share: float) -> Arr:
    """``array`` with ``share`` of its rows (one at least): an input at another size."""
    if not array.shape:
        return array
    rows = max(1, round(array.shape[0] * share))
    return Arr((rows, *array.shape[1:]), array.itemsize, array.grown)


def _bytes(value: Value) -> int:
    """The bytes of ``value`` that count here: grown arrays only."""
    if value is None:
        return 0
    parts = value if isinstance(value, tuple) else (value,)
    return sum(a.nbytes for a in parts if a.grown)


def _const_int(node: ast.expr | None) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _const_int(node.operand)
        return -inner if inner is not None else None
    return None


def _const_shape(node: ast.expr) -> tuple[int, ...] | None:
    """``(3, 4)`` for the literal ``(3, 4)`` or ``[3, 4]``; ``(5,)`` for ``5``."""
    if isinstance(node, ast.Tuple | ast.List):
        dims = [_const_int(e) for e in node.elts]
        return None if any(d is None for d in dims) else tuple(d for d in dims if d is not None)
    single = _const_int(node)
    return (single,) if single is not None else None


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _flag(call: ast.Call, name: str, default: bool) -> bool:
    node = _keyword(call, name)
    return bool(node.value) if isinstance(node, ast.Constant) else default


def _dtype_size(node: ast.expr | None, default: int) -> int:
    if node is None:
        return default
    name = node.value if isinstance(node, ast.Constant) else dotted(node).rpartition(".")[2]
    return _ITEMSIZE.get(str(name), default)


def broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """numpy's broadcast of two shapes; None where they do not broadcast."""
    out = []
    for x, y in zip(
        reversed((1,) * (len(b) - len(a)) + a), reversed((1,) * (len(a) - len(b)) + b), strict=True
    ):
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(reversed(out))


def _matmul(a: Arr, b: Arr) -> Arr | None:
    if len(a.shape) == 2 and len(b.shape) == 2 and a.shape[1] == b.shape[0]:
        return Arr((a.shape[0], b.shape[1]), max(a.itemsize, b.itemsize, 8), True)
    if len(a.shape) == 2 and len(b.shape) == 1:
        return Arr((a.shape[0],), 8, True)
    return None


def _linalg(name: str, a: Arr, call: ast.Call) -> tuple[tuple[Arr, ...], int] | None:
    """A decomposition's results, and the workspace it holds beside them (a copy of its
    input, which LAPACK overwrites, and the routines' own buffers)."""
    if len(a.shape) != 2:
        return None
    m, n = a.shape
    k = min(m, n)
    copy = m * n * 8
    if name == "svd":
        if not _flag(call, "compute_uv", True):
            return (Arr((k,), 8, True),), copy
        full = _flag(call, "full_matrices", True)
        u, vt = ((m, m), (n, n)) if full else ((m, k), (k, n))
        return (Arr(u, 8, True), Arr((k,), 8, True), Arr(vt, 8, True)), copy + k * k * 8
    if name == "qr":
        complete = isinstance(_keyword(call, "mode"), ast.Constant) and getattr(
            _keyword(call, "mode"), "value", None
        ) in ("complete", "full")
        q = (m, m) if complete else (m, k)
        return (Arr(q, 8, True), Arr((q[1], n), 8, True)), copy
    if name in ("eig", "eigvals"):
        vectors = (Arr((n, n), 16, True),) if name == "eig" else ()
        return (Arr((n,), 16, True), *vectors), copy + n * n * 8
    if name in ("eigh", "eigvalsh"):
        vectors = (Arr((n, n), 8, True),) if name == "eigh" else ()
        return (Arr((n,), 8, True), *vectors), copy + n * n * 8
    if name in ("inv", "pinv", "cholesky", "expm", "sqrtm"):
        return (Arr((n, m) if name == "pinv" else (m, n), 8, True),), copy + (
            (m * k + k * n) * 8 if name == "pinv" else 0
        )
    if name in ("det", "slogdet", "matrix_rank", "norm", "cond"):
        return (), copy
    return None


_LINALG = frozenset(
    {"svd", "qr", "eig", "eigvals", "eigh", "eigvalsh", "inv", "pinv", "cholesky", "expm",
     "sqrtm", "det", "slogdet", "matrix_rank", "cond"}
)  # fmt: skip


class _Model:
    """Follows a cell's statements: which names hold which arrays, and the peak."""

    def __init__(self, read_shape: ReadShape, values: dict[str, Arr]) -> None:
        self.read_shape = read_shape
        self.names: dict[str, Value] = dict(values)
        self.kept: dict[str, int] = {}
        self.peak = 0
        self.operations: list[str] = []
        self.nodes: set[int] = set()

    def run(self, body: Sequence[ast.stmt]) -> None:
        for stmt in body:
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.Expr):
            if stmt.value is None:
                return
            value, during = self.expr(stmt.value)
            self.peak = max(self.peak, sum(self.kept.values()) + during)
            for target in _targets(stmt):
                self.bind(target, value)
        elif isinstance(stmt, ast.With | ast.For | ast.If | ast.While | ast.Try):
            self.run(stmt.body)

    def bind(self, target: ast.expr, value: Value) -> None:
        if isinstance(target, ast.Name):
            self.names[target.id] = value
            self.kept[target.id] = _bytes(value)
        elif isinstance(target, ast.Tuple | ast.List):
            parts = value if isinstance(value, tuple) else (None,) * len(target.elts)
            for element, part in zip(target.elts, parts, strict=False):
                self.bind(element, part)

    def expr(self, node: ast.expr) -> tuple[Value, int]:
        """What ``node`` evaluates to, and the most grown bytes held while it does."""
        children: list[ast.expr] = []
        if isinstance(node, ast.Call):
            children = [*node.args, *(k.value for k in node.keywords)]
            if isinstance(node.func, ast.Attribute):
                children.insert(0, node.func.value)
        elif isinstance(node, ast.BinOp):
            children = [node.left, node.right]
        elif isinstance(node, ast.Compare):
            children = [node.left, *node.comparators]
        elif isinstance(node, ast.UnaryOp):
            children = [node.operand]
        elif isinstance(node, ast.Subscript | ast.Attribute):
            children = [node.value]
        held = peak = 0
        results: list[Value] = []
        for child in children:
            value, during = self.expr(child)
            peak = max(peak, held + during)
            held += _bytes(value) if child is not node and not isinstance(child, ast.Name) else 0
            results.append(value)
        value = self.evaluate(node, results)
        return value, max(peak, held + _bytes(value))

    def evaluate(self, node: ast.expr, args: list[Value]) -> Value:
        arrays = [a if isinstance(a, Arr) else None for a in args]
        if isinstance(node, ast.Name):
            return self.names.get(node.id)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return Arr((), 8)
        if isinstance(node, ast.Subscript):
            return _subscript(arrays[0], node.slice)
        if isinstance(node, ast.Attribute):
            base = arrays[0]
            return (
                Arr(base.shape[::-1], base.itemsize, base.grown)
                if base and node.attr == "T"
                else None
            )
        if isinstance(node, ast.BinOp | ast.Compare):
            return self.elementwise(node, arrays, 1 if isinstance(node, ast.Compare) else 0)
        if isinstance(node, ast.UnaryOp):
            return arrays[0]
        if isinstance(node, ast.Call):
            return self.call(node, arrays)
        return None

    def elementwise(self, node: ast.expr, arrays: list[Arr | None], itemsize: int) -> Value:
        if any(a is None for a in arrays) or not arrays:
            return None
        known = [a for a in arrays if a is not None]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            found = _matmul(known[0], known[1])
            return self.sized(node, "matmul", found)
        shape: tuple[int, ...] | None = known[0].shape
        for a in known[1:]:
            shape = broadcast(shape, a.shape) if shape is not None else None
        if shape is None:
            return None
        size = itemsize or max(
            max(a.itemsize for a in known),
            8 if isinstance(getattr(node, "op", None), ast.Div) else 1,
        )
        result = Arr(shape, size, any(a.grown for a in known))
        if not result.grown and result.nbytes > 2 * max(a.nbytes for a in known):
            return self.sized(node, "broadcast", Arr(shape, size, True))
        return result

    def sized(self, node: ast.expr, name: str, value: Value) -> Value:
        if value is not None:
            self.operations.append(name)
            self.nodes.add(id(node))
        return value

    def call(self, call: ast.Call, arrays: list[Arr | None]) -> Value:
        name = dotted(call.func).rpartition(".")[2]
        attribute = isinstance(call.func, ast.Attribute)
        receiver = arrays[0] if attribute else None
        method = receiver is not None
        operands = arrays[1:] if attribute else arrays
        known = self.read_shape(call)
        if known is not None:
            return known
        if (
            name in _PAIRWISE
            and operands
            and operands[0] is not None
            and len(operands[0].shape) == 2
        ):
            a = operands[0]
            b = operands[1] if len(operands) > 1 and operands[1] is not None else a
            return self.sized(call, name, Arr((a.shape[0], b.shape[0]), 8, True))
        if name == "pdist" and operands and operands[0] is not None:
            n = operands[0].shape[0]
            return self.sized(call, name, Arr((n * (n - 1) // 2,), 8, True))
        if name == "outer" and len(operands) >= 2 and None not in operands[:2]:
            x, y = operands[0], operands[1]
            assert x is not None and y is not None
            ufunc = isinstance(call.func, ast.Attribute) and isinstance(
                call.func.value, ast.Attribute
            )
            outer = (*x.shape, *y.shape) if ufunc else (math.prod(x.shape), math.prod(y.shape))
            return self.sized(call, name, Arr(outer, max(x.itemsize, y.itemsize, 8), True))
        if name == "kron" and len(operands) >= 2 and None not in operands[:2]:
            x, y = operands[0], operands[1]
            assert x is not None and y is not None
            width = max(len(x.shape), len(y.shape))
            pa, pb = (
                (1,) * (width - len(x.shape)) + x.shape,
                (1,) * (width - len(y.shape)) + y.shape,
            )
            return self.sized(
                call, name, Arr(tuple(x * y for x, y in zip(pa, pb, strict=True)), 8, True)
            )
        if name in ("dot", "matmul") and len(operands) >= 1:
            pair = (receiver, operands[0]) if receiver else tuple(operands[:2])
            if len(pair) == 2 and None not in pair:
                return self.sized(call, name, _matmul(pair[0], pair[1]))  # type: ignore[arg-type]
            return None
        if name in ("cov", "corrcoef") and operands and operands[0] is not None:
            a = operands[0]
            if len(a.shape) != 2:
                return Arr((), 8)
            side = a.shape[0] if _flag(call, "rowvar", True) else a.shape[1]
            self.peak = max(self.peak, sum(self.kept.values()) + a.nbytes)  # the centred copy
            return self.sized(call, name, Arr((side, side), 8, True))
        if name in _LINALG and operands and operands[0] is not None:
            found = _linalg(name, operands[0], call)
            if found is None:
                return None
            parts, workspace = found
            self.peak = max(self.peak, sum(self.kept.values()) + workspace + _bytes(parts))
            self.sized(call, name, parts)
            return parts if len(parts) != 1 else parts[0]
        if name in _CREATE and not method:  # np.zeros, rng.random
            made = (
                _const_shape(call.args[0])
                if call.args
                else _const_shape(_keyword(call, "size") or ast.Constant(None))
            )
            if made is None and name in ("rand", "randn") and call.args:
                dims = [_const_int(a) for a in call.args]
                made = tuple(d for d in dims if d is not None) if None not in dims else None
            return (
                self.sized(call, name, Arr(made, _dtype_size(_keyword(call, "dtype"), 8), True))
                if made
                else None
            )
        base = receiver if method else (operands[0] if operands else None)
        if base is None:
            return None
        if name in _VIEWS:
            return base if name != "reshape" else None
        if name in _ELEMENTWISE or name in _SORTS or name == "copy":
            return Arr(base.shape, 8 if name == "argsort" else base.itemsize, base.grown)
        if name == "astype":
            dtype = call.args[0] if call.args else _keyword(call, "dtype")
            return Arr(base.shape, _dtype_size(dtype, 8), base.grown)
        if name in _REDUCE:
            return _reduced(
                base,
                _const_int(
                    _keyword(call, "axis")
                    or (call.args[0] if method and call.args else None)
                    or ast.Constant(None)
                ),
            )
        return None


def _targets(stmt: ast.Assign | ast.AnnAssign | ast.AugAssign | ast.Expr) -> list[ast.expr]:
    """What a statement binds; a bare expression's value is kept as the cell's ``Out``."""
    if isinstance(stmt, ast.Assign):
        return list(stmt.targets)
    return [ast.Name("_")] if isinstance(stmt, ast.Expr) else [stmt.target]


def _reduced(base: Arr, axis: int | None) -> Arr:
    if axis is None or not base.shape:
        return Arr((), 8, base.grown)
    axis %= len(base.shape)
    return Arr(base.shape[:axis] + base.shape[axis + 1 :], 8, base.grown)


def _subscript(base: Arr | None, index: ast.expr) -> Arr | None:
    """The view a basic index takes of ``base`` (slices, integers, ``None``, ``...``); None
    for fancy indexing, whose size the code does not say."""
    if base is None:
        return None
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    dims = list(base.shape)
    shape: list[int] = []
    at = 0
    for i, part in enumerate(parts):
        if isinstance(part, ast.Constant) and part.value is None:
            shape.append(1)
        elif isinstance(part, ast.Constant) and part.value is Ellipsis:
            rest = sum(
                1 for p in parts[i + 1 :] if not (isinstance(p, ast.Constant) and p.value is None)
            )
            keep = len(dims) - at - rest
            shape += dims[at : at + keep]
            at += keep
        elif isinstance(part, ast.Slice):
            if at >= len(dims):
                return None
            bounds = [
                _const_int(b) if b is not None else None
                for b in (part.lower, part.upper, part.step)
            ]
            if any(
                b is None and e is not None
                for b, e in zip(bounds, (part.lower, part.upper, part.step), strict=True)
            ):
                return None
            shape.append(len(range(*slice(*bounds).indices(dims[at]))))
            at += 1
        elif _const_int(part) is not None:
            at += 1
        else:
            return None
    return Arr((*shape, *dims[at:]), base.itemsize, base.grown)
