"""TypeScript declarations of what the server sends the lab extension, generated from Python.

``labextension/src/generated.ts`` is this module's output and is never edited by hand: the
snapshot schema (:mod:`taskcell.planner.schema`, with the pool records it re-exports from
:mod:`taskcell.cluster.pool_records`), its view as the server computes it for the
sidebar to draw (:mod:`taskcell.planner.view`), the REST payloads
(:mod:`taskcell.extension.payloads`, the export targets of :mod:`taskcell.export`), and the
constants the sidebar shares with them, are the one definition. Every ``TypedDict`` becomes an
``interface I<Name>`` (a ``NotRequired`` field an optional one), every ``Literal`` alias a
union of strings, every documented upper-case constant an ``export const`` (a tuple in its
order, a set sorted); docstrings and ``#:`` comments become JSDoc.

``make generate`` (``python -m taskcell.planner.typescript``) rewrites the file; with
``--check`` it only says whether the file is current (``tests/planner/test_typescript.py`` runs
that, so drift fails the suite).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import re
import sys
from collections.abc import Sequence
from pathlib import Path

#: The modules whose records and documented constants the sidebar uses, in output order.
SOURCES = (
    "taskcell.errors",
    "taskcell.export",
    "taskcell.cluster.pool_records",
    "taskcell.cluster.waits",
    "taskcell.planner.schema",
    "taskcell.spec.amounts",
    "taskcell.planner.view",
    "taskcell.extension.payloads",
)
#: Where the output goes in a source checkout.
TARGET = Path(__file__).resolve().parents[2] / "labextension" / "src" / "generated.ts"

_PRIMITIVES = {"str": "string", "int": "number", "float": "number", "bool": "boolean"}
_ROLE = re.compile(r":[a-z]+:`(~?)([\w.()]+)`")


def _role(match: re.Match) -> str:
    short, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _doc(text: str, indent: str = "") -> list[str]:
    """A docstring or comment as JSDoc lines: reST roles and double backticks become `code`,
    Python's None TypeScript's null."""
    text = _ROLE.sub(_role, inspect.cleandoc(text)).replace("``", "`")
    text = re.sub(r"\bNone\b", "null", text)
    lines = text.splitlines()
    if len(lines) == 1:
        return [f"{indent}/** {lines[0]} */"]
    body = [f"{indent} *{' ' + line if line else ''}" for line in lines]
    return [f"{indent}/**", *body, f"{indent} */"]


def _comment(source: list[str], node: ast.stmt) -> str | None:
    """The ``#:`` lines right above a statement, or None."""
    lines: list[str] = []
    i = node.lineno - 2
    while i >= 0 and source[i].strip().startswith("#:"):
        lines.insert(0, source[i].strip()[2:].strip())
        i -= 1
    return "\n".join(lines) or None


class _Types:
    """Python annotations (as written) to TypeScript, knowing the records defined so far."""

    def __init__(self) -> None:
        self.known: dict[str, str] = {}

    def __call__(self, node: ast.expr) -> str:
        if isinstance(node, ast.Constant) and node.value is None:
            return "null"
        if isinstance(node, ast.Name):
            if node.id in _PRIMITIVES:
                return _PRIMITIVES[node.id]
            if node.id == "dict":
                return "Record<string, unknown>"
            if node.id in self.known:
                return self.known[node.id]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return f"{self(node.left)} | {self(node.right)}"
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if node.value.id == "Literal":
                return " | ".join(f"'{a.value!s}'" for a in args if isinstance(a, ast.Constant))
            if node.value.id == "list":
                item = self(args[0])
                return f"({item})[]" if "|" in item else f"{item}[]"
            if node.value.id == "dict" and len(args) == 2 and self(args[0]) == "string":
                return f"Record<string, {self(args[1])}>"
        raise TypeError(f"taskcell: no TypeScript for the annotation {ast.unparse(node)!r}")


def _constant(name: str, value: object, item: str = "string") -> str:
    """``name = value`` in TypeScript; a collection's items of type ``item``."""
    if isinstance(value, (frozenset, set, tuple, list)):
        ordered = sorted(value) if isinstance(value, (frozenset, set)) else value
        items = ", ".join(_quote(v) for v in ordered)
        return f"export const {name}: readonly {item}[] = [{items}];"
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise TypeError(f"taskcell: no TypeScript for the constant {name} = {value!r}")
    literal = _quote(value) if isinstance(value, str) else repr(value)
    return f"export const {name} = {literal};"


def _item(annotation: ast.expr, types: _Types) -> str | None:
    """The item type of a ``tuple[X, ...]`` annotation whose ``X`` is a known alias."""
    if isinstance(annotation, ast.Subscript) and getattr(annotation.value, "id", "") == "tuple":
        first = annotation.slice.elts[0] if isinstance(annotation.slice, ast.Tuple) else None
        if isinstance(first, ast.Name) and first.id in types.known:
            return types.known[first.id]
    return None


def _docstring(node: ast.stmt | None) -> str | None:
    """The string right after an assignment (its docstring, as Sphinx reads it), or None."""
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return node.value.value if isinstance(node.value.value, str) else None
    return None


def _module(name: str, types: _Types) -> list[str]:
    """The declarations of one module, in its source order."""
    module = importlib.import_module(name)
    text = inspect.getsource(module)
    source = text.splitlines()
    out: list[str] = []
    body = ast.parse(text).body
    for node, after in zip(body, [*body[1:], None], strict=True):
        if isinstance(node, ast.ClassDef) and any(
            isinstance(b, ast.Name) and b.id == "TypedDict" for b in node.bases
        ):
            types.known[node.name] = f"I{node.name}"
            out += ["", *_doc(ast.get_docstring(node) or node.name)]
            out.append(f"export interface I{node.name} {{")
            for field in node.body:
                if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name):
                    comment = _comment(source, field)
                    out += _doc(comment, "  ") if comment else []
                    annotation, optional = field.annotation, ""
                    if isinstance(annotation, ast.Subscript) and (
                        getattr(annotation.value, "id", "") == "NotRequired"
                    ):
                        annotation, optional = annotation.slice, "?"
                    out.append(f"  {field.target.id}{optional}: {types(annotation)};")
            out.append("}")
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            target = getattr(
                node.targets[0] if isinstance(node, ast.Assign) else node.target, "id", ""
            )
            comment = _comment(source, node)
            value = node.value
            if isinstance(value, ast.Subscript) and getattr(value.value, "id", "") == "Literal":
                types.known[target] = target
                doc = comment or _docstring(after) or target
                out += ["", *_doc(doc), f"export type {target} = {types(value)};"]
            elif target.isupper() and comment:
                item = _item(node.annotation, types) if isinstance(node, ast.AnnAssign) else None
                constant = _constant(target, getattr(module, target), item or "string")
                out += ["", *_doc(comment), constant]
    return out


def _path(module: str) -> str:
    """Where ``module`` is written, from the repository's root."""
    package = hasattr(importlib.import_module(module), "__path__")
    return module.replace(".", "/") + ("/__init__.py" if package else ".py")


def typescript(sources: Sequence[str] = SOURCES) -> str:
    """The text of ``generated.ts``."""
    lines = [
        "// Generated by `python -m taskcell.planner.typescript`; do not edit. The definition is",
        *(f"// - {_path(s)}" for s in sources),
        "// Change it there and run that again.",
    ]
    types = _Types()
    for name in sources:
        lines += _module(name, types)
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write ``generated.ts`` (or, with ``--check``, exit 1 when it is not current)."""
    parser = argparse.ArgumentParser(prog="python -m taskcell.planner.typescript")
    parser.add_argument("path", nargs="?", type=Path, default=TARGET, help="default: %(default)s")
    parser.add_argument("--check", action="store_true", help="only check the file is current")
    args = parser.parse_args(argv)
    text = typescript()
    current = args.path.read_text() if args.path.exists() else None
    if args.check:
        if current != text:
            print(f"{args.path} is stale: run make generate ({parser.prog})", file=sys.stderr)
            return 1
        return 0
    if current != text:
        args.path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
