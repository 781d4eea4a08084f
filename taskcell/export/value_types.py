"""The types of a notebook's values, read from its code, for the targets' typed interfaces.

Typed targets declare int, float, str, bool, lists and dicts of them, DataFrames (Flyte), and
files and directories (Latch). This module infers those types from the code alone, without
running it, and only where the code makes them certain:

- constants, f-strings, list and dict displays (dict keys must be strings, as Flyte's are);
- ``len``, ``int``, ``float``, ``str``, ``bool``, ``round(x)`` (an int), ``round(float, n)``,
  ``abs`` of a number, ``sum``/``min``/``max``/``sorted`` of a list of numbers, arithmetic and
  comparisons of known numbers and strings, string methods, ``read_text()`` of a file,
  comprehensions over a list;
- ``Path("reads.fq")`` / ``pathlib.Path(...)`` of a string: a file when the name has a suffix,
  else a directory;
- a name read after it was bound with a known type;
- a pandas ``DataFrame`` from ``pd.DataFrame(...)``, ``pd.read_csv(...)`` and its siblings, and
  from a DataFrame's methods that give one (``head``, ``dropna``, ``pivot_table``...), where the
  caller names pandas' functions in ``path_names`` (``"pd.DataFrame"``).

Anything else (a call to a notebook function or a library, a tuple, a set, ``None``, a name
bound in a loop or a branch) is :data:`ANY`, which a target carries as a pickle. A union is kept
only of distinct ints, floats and strings (``[1, 2.5]`` is ``List[Union[int, float]]``, each
item keeping its type); a bool mixed with anything else is :data:`ANY`, since ``True`` is an int.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ANY",
    "Type",
    "cell_types",
    "has_path",
    "infer",
    "is_known",
    "literal_type",
    "path_shape",
    "unite",
]

Kind = Literal[
    "int", "float", "str", "bool", "list", "dict", "union", "file", "dir", "frame", "any"
]
"""What a :class:`Type` is: a primitive, a ``list``/``dict`` of its one argument (dict keys are
strings), a ``union`` of its arguments, a ``file``/``dir`` path, a pandas ``DataFrame``
(``frame``), or ``any`` (unknown)."""


@dataclass(frozen=True)
class Type:
    """A value's type, as far as the code makes it certain."""

    kind: Kind
    args: tuple[Type, ...] = ()


ANY = Type("any")
INT, FLOAT, STR, BOOL = Type("int"), Type("float"), Type("str"), Type("bool")
FRAME = Type("frame")
#: pandas functions that make a DataFrame, and DataFrame methods that give one.
FRAME_MAKERS = frozenset(
    {
        "DataFrame",
        "read_csv",
        "read_parquet",
        "read_json",
        "read_excel",
        "read_table",
        "read_feather",
    }
)
_FRAME_METHODS = frozenset(
    {
        "copy",
        "head",
        "tail",
        "dropna",
        "fillna",
        "drop",
        "rename",
        "sort_values",
        "sort_index",
        "reset_index",
        "query",
        "assign",
        "merge",
        "join",
        "pivot_table",
        "describe",
        "astype",
        "sample",
        "drop_duplicates",
        "set_index",
        "select_dtypes",
        "round",
        "abs",
        "transpose",
    }
)
#: Types whose values nothing changes in place.
IMMUTABLE = frozenset({"int", "float", "str", "bool"})
_PRIMITIVES = {int: INT, float: FLOAT, str: STR, bool: BOOL}
_UNITABLE = frozenset({"int", "float", "str"})
_STR_METHODS = frozenset(
    {"format", "join", "upper", "lower", "strip", "lstrip", "rstrip", "replace", "title"}
)
_NUMBERS = frozenset({"int", "float"})


def unite(types: Iterable[Type]) -> Type:
    """The one type of values of any of ``types``: themselves if equal, a union, or ANY."""
    distinct: list[Type] = []
    for t in types:
        for part in t.args if t.kind == "union" else (t,):
            if part not in distinct:
                distinct.append(part)
    if len(distinct) == 1:
        return distinct[0]
    if len(distinct) > 1 and all(t.kind in _UNITABLE for t in distinct):
        order = ["int", "float", "str"]
        return Type("union", tuple(sorted(distinct, key=lambda t: order.index(t.kind))))
    return ANY


def is_known(t: Type) -> bool:
    """Whether ``t`` and everything in it is known (no ANY)."""
    return t.kind != "any" and all(is_known(a) for a in t.args)


def has_path(t: Type) -> bool:
    """Whether ``t`` holds a file or a directory."""
    return t.kind in ("file", "dir") or any(has_path(a) for a in t.args)


def _collection(kind: Kind, items: list[Type]) -> Type:
    item = unite(items) if items else ANY
    return Type(kind, (item,)) if is_known(item) else ANY


def _path(node: ast.Call, path_names: frozenset[str]) -> Type:
    """``Path("x.csv")``: a file if the last name has a suffix, else a directory."""
    func = _dotted(node.func)
    if func not in path_names or not func.endswith("Path") or len(node.args) != 1 or node.keywords:
        return ANY
    arg = node.args[0]
    if not isinstance(arg, ast.Constant) or not isinstance(arg.value, str) or not arg.value:
        return ANY
    name = arg.value.rstrip("/").rsplit("/", 1)[-1]
    return Type("file") if "." in name.strip(".") and not arg.value.endswith("/") else Type("dir")


def _dotted(node: ast.expr) -> str:
    """``pd.read_csv`` for the callee ``pd.read_csv``; empty for any other expression."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    return ".".join([node.id, *reversed(parts)])


def _method(func: ast.Attribute, receiver: Type) -> Type:
    """A method's result: ``str`` methods, ``read_text`` of a file, a DataFrame's."""
    if receiver == FRAME and func.attr in _FRAME_METHODS:
        return FRAME
    if receiver == STR and func.attr in _STR_METHODS:
        return STR
    if receiver == STR and func.attr == "split":
        return Type("list", (STR,))
    if receiver.kind == "file" and func.attr == "read_text":
        return STR
    return ANY


def _builtin(name: str, args: list[Type]) -> Type:
    """What a builtin returns for arguments of these types, where that is certain."""
    items = args[0].args[0] if len(args) == 1 and args[0].kind == "list" else None
    if name in ("len", "int") or (name == "round" and len(args) == 1):
        return INT
    if name == "round" and args[:1] == [FLOAT]:
        return FLOAT
    if name in ("float", "str", "bool", "repr"):
        return {"float": FLOAT, "bool": BOOL}.get(name, STR)
    if name == "abs" and args and args[0].kind in _NUMBERS:
        return args[0]
    if name == "sum" and items is not None and items.kind in _NUMBERS:
        return items  # sum([]) is 0, an int: an empty list has no item type, so is ANY
    if name in ("min", "max"):
        candidates = [items] if items is not None else args
        same = unite(candidates) if candidates else ANY
        return same if same.kind in ("int", "float", "str") else ANY
    if name in ("sorted", "list") and items is not None:
        return args[0]
    return ANY


def _call(node: ast.Call, env: Mapping[str, Type], path_names: frozenset[str]) -> Type:
    func = node.func
    if any(k.arg == "inplace" for k in node.keywords):
        return ANY  # None, or a copy: pandas decides
    path = _path(node, path_names)
    if path != ANY:
        return path
    callee = _dotted(func)
    if callee in path_names and callee.rpartition(".")[2] in FRAME_MAKERS:
        return FRAME
    if isinstance(func, ast.Attribute):
        return _method(func, infer(func.value, env, path_names))
    if not isinstance(func, ast.Name) or func.id in env or node.keywords:
        return ANY
    if any(isinstance(a, ast.Starred) for a in node.args):
        return ANY
    return _builtin(func.id, [infer(a, env, path_names) for a in node.args])


def _comprehension(
    node: ast.ListComp | ast.DictComp, env: Mapping[str, Type], path_names: frozenset[str]
) -> Type:
    """``[f(x) for x in xs]``: its items typed with ``x`` an item of the list ``xs``."""
    if len(node.generators) != 1:
        return ANY
    generator = node.generators[0]
    source = infer(generator.iter, env, path_names)
    if not isinstance(generator.target, ast.Name) or source.kind != "list":
        return ANY
    inner = {**env, generator.target.id: source.args[0]}
    if isinstance(node, ast.ListComp):
        return _collection("list", [infer(node.elt, inner, path_names)])
    if infer(node.key, inner, path_names) != STR:
        return ANY
    return _collection("dict", [infer(node.value, inner, path_names)])


def _binop(node: ast.BinOp, env: Mapping[str, Type], path_names: frozenset[str]) -> Type:
    left, right = infer(node.left, env, path_names), infer(node.right, env, path_names)
    kinds = {left.kind, right.kind}
    if kinds <= _NUMBERS:
        if isinstance(node.op, ast.Div) or "float" in kinds:
            return FLOAT
        if isinstance(node.op, ast.Pow) and not _natural(node.right):
            return ANY  # 2 ** -1 is a float
        return INT
    if left == STR and (right == STR or isinstance(node.op, ast.Mod)):
        return STR if isinstance(node.op, ast.Add | ast.Mod) else ANY
    if left == STR and right == INT and isinstance(node.op, ast.Mult):
        return STR
    if left.kind == "list" and left == right and isinstance(node.op, ast.Add):
        return left
    return ANY


def _natural(node: ast.expr) -> bool:
    """Whether ``node`` is a literal whole number >= 0."""
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value >= 0


def _holds_objects(node: ast.List | ast.Dict, env: Mapping[str, Type]) -> bool:
    """Whether a list or dict display holds an object a name holds (``{"x": a, "y": a}``, ``a``
    a list): a typed value is a copy of each item, where the display's items are those
    objects, shared with the name and with each other. It travels as a pickle, which keeps
    them so."""
    items = node.elts if isinstance(node, ast.List) else node.values
    return any(
        isinstance(item, ast.Name) and env.get(item.id, ANY).kind not in IMMUTABLE for item in items
    )


def infer(node: ast.expr, env: Mapping[str, Type], path_names: frozenset[str]) -> Type:
    """The type of an expression, given the types of the names it reads.

    Parameters
    ----------
    node
        The expression.
    env
        Types of the names bound before it; a name not there is :data:`ANY`.
    path_names
        How the code refers to ``pathlib.Path`` (``{"Path", "pathlib.Path"}``).
    """
    if isinstance(node, ast.Constant):
        return _PRIMITIVES.get(type(node.value), ANY)
    if isinstance(node, ast.JoinedStr):
        return STR
    if isinstance(node, ast.Name):
        return env.get(node.id, ANY)
    if isinstance(node, ast.List | ast.Dict) and _holds_objects(node, env):
        return ANY
    if isinstance(node, ast.List):
        return _collection("list", [infer(e, env, path_names) for e in node.elts])
    if isinstance(node, ast.Dict):
        keys = [infer(k, env, path_names) if k else ANY for k in node.keys]
        if any(k != STR for k in keys):
            return ANY
        return _collection("dict", [infer(v, env, path_names) for v in node.values])
    if isinstance(node, ast.UnaryOp):
        if isinstance(node.op, ast.Not):
            return BOOL if infer(node.operand, env, path_names).kind != "any" else ANY
        operand = infer(node.operand, env, path_names)
        return operand if operand.kind in _NUMBERS else ANY
    if isinstance(node, ast.BinOp):
        return _binop(node, env, path_names)
    if isinstance(node, ast.Compare):
        operands = [infer(n, env, path_names) for n in (node.left, *node.comparators)]
        return BOOL if all(t.kind in _UNITABLE for t in operands) else ANY
    if isinstance(node, ast.IfExp):
        return unite([infer(node.body, env, path_names), infer(node.orelse, env, path_names)])
    if isinstance(node, ast.Subscript):
        return _subscript(node, env, path_names)
    if isinstance(node, ast.Call):
        return _call(node, env, path_names)
    if isinstance(node, ast.ListComp | ast.DictComp):
        return _comprehension(node, env, path_names)
    return ANY


def _subscript(node: ast.Subscript, env: Mapping[str, Type], path_names: frozenset[str]) -> Type:
    container = infer(node.value, env, path_names)
    if container.kind == "dict":
        return container.args[0]
    if container.kind == "list":
        return container if isinstance(node.slice, ast.Slice) else container.args[0]
    return STR if container == STR else ANY


def literal_type(node: ast.expr, path_names: frozenset[str]) -> Type | None:
    """The type of a literal a Latch workflow can take as a parameter, else None.

    A literal is made of constants, list and dict displays, signed numbers and ``Path("...")``;
    its type must be known and free of unions, with paths at most one list or dict deep (the
    shapes a task turns back into ``pathlib.Path`` values).
    """
    allowed = (ast.Constant, ast.List, ast.Dict, ast.UnaryOp, ast.USub, ast.UAdd, ast.Load)
    for part in ast.walk(node):
        if not isinstance(part, allowed) and not _inside_path_call(part, node, path_names):
            return None
    found = infer(node, {}, path_names)
    if not is_known(found) or _has_union(found):
        return None
    if has_path(found) and path_shape(found) is None:
        return None
    return found


def path_shape(t: Type) -> Literal["one", "list", "dict"] | None:
    """How a parameter holds paths: one, a list of them, a dict of them; None otherwise."""
    if t.kind in ("file", "dir"):
        return "one"
    if t.kind in ("list", "dict") and t.args[0].kind in ("file", "dir"):
        return t.kind
    return None


def _has_union(t: Type) -> bool:
    return t.kind == "union" or any(_has_union(a) for a in t.args)


def _inside_path_call(part: ast.AST, root: ast.expr, path_names: frozenset[str]) -> bool:
    """Whether ``part`` is a ``Path("...")`` call in ``root``, or its callee."""
    return any(
        isinstance(call, ast.Call)
        and _path(call, path_names) != ANY
        and any(part is sub for sub in (call, *ast.walk(call.func)))
        for call in ast.walk(root)
    )


def cell_types(
    tree: ast.Module, env: Mapping[str, Type], path_names: frozenset[str]
) -> dict[str, Type]:
    """The types of the names a cell binds, at its end, given the types of those it reads.

    Names bound by a plain assignment at the top level take the type of their value (a tuple
    display unpacked item by item); names bound any other way (in a loop or a branch, by an
    import, a ``def``, a ``with``) are ANY.
    """
    local = dict(env)
    bound: dict[str, Type] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                for name, value in _pairs(target, stmt.value):
                    local[name] = bound[name] = (
                        ANY if value is None else infer(value, local, path_names)
                    )
        elif isinstance(stmt, ast.AugAssign | ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            name = stmt.target.id
            if isinstance(stmt, ast.AugAssign):
                value = ast.BinOp(ast.Name(name, ast.Load()), stmt.op, stmt.value)
            else:
                value = stmt.value
            local[name] = bound[name] = ANY if value is None else infer(value, local, path_names)
        else:
            for name in _stored(stmt):
                local[name] = bound[name] = ANY
    return bound


def _pairs(target: ast.expr, value: ast.expr | None) -> list[tuple[str, ast.expr | None]]:
    """Each name ``target`` binds with the expression it gets, None where that is unclear."""
    if isinstance(target, ast.Name):
        return [(target.id, value)]
    if (
        isinstance(target, ast.Tuple | ast.List)
        and isinstance(value, ast.Tuple | ast.List)
        and len(target.elts) == len(value.elts)
    ):
        return [pair for t, v in zip(target.elts, value.elts, strict=True) for pair in _pairs(t, v)]
    return [(name, None) for name in _stored(target)]


def _stored(node: ast.AST) -> list[str]:
    """Every name a statement or target binds, at any depth."""
    names = []
    for part in ast.walk(node):
        if isinstance(part, ast.Name) and isinstance(part.ctx, ast.Store):
            names.append(part.id)
        elif isinstance(part, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(part.name)
        elif isinstance(part, ast.alias):
            names.append((part.asname or part.name).partition(".")[0])
    return names
