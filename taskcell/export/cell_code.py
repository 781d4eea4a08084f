"""Edits the exporter makes to a cell's Python source, line by line, keeping the rest as written.

Statements are removed only when they have their lines to themselves, so what remains is the
user's code, comments and layout included. A cell's trailing plain value (``total``,
``df.shape``) stands for the notebook's ``Out[]``: a driver prints it (or drops it when ``;``
silenced it), a task drops it, since a task returns only the names it binds.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from taskcell.export.notebook import Cell
from taskcell.runner.analysis import analyze_cell

_PURE = (ast.Name, ast.Constant, ast.Attribute, ast.Subscript, ast.Tuple, ast.List, ast.Slice,
         ast.BinOp, ast.UnaryOp, ast.Compare, ast.expr_context, ast.operator, ast.unaryop,
         ast.cmpop)  # fmt: skip
_STRAIGHT = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Import, ast.ImportFrom,
             ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Pass, ast.Delete)  # fmt: skip


def whole_lines(tree: ast.Module) -> list[bool]:
    """For each top-level statement: does it have its lines to itself?"""
    body = tree.body
    alone = []
    for i, stmt in enumerate(body):
        before = i > 0 and (body[i - 1].end_lineno or 0) >= stmt.lineno
        after = i + 1 < len(body) and body[i + 1].lineno <= (stmt.end_lineno or stmt.lineno)
        alone.append(not (before or after))
    return alone


def remove_statements(code: str, tree: ast.Module, statements: Iterable[ast.stmt]) -> str:
    """``code`` without the given top-level statements (each on lines of its own)."""
    drop: set[int] = set()
    for stmt in statements:
        drop.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    lines = code.splitlines()
    return "\n".join(line for i, line in enumerate(lines, 1) if i not in drop) + "\n"


def _is_plain_value(node: ast.expr) -> bool:
    """An expression that only reads values (no call): showing it has no side effect."""
    return all(isinstance(n, _PURE) for n in ast.walk(node))


def _trailing_plain_value(code: str) -> tuple[ast.Module, ast.Expr] | None:
    """The cell's last statement when it is a plain value on lines of its own, with the tree."""
    tree = ast.parse(code)
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return None
    last = tree.body[-1]
    if not whole_lines(tree)[-1] or not _is_plain_value(last.value):
        return None
    return tree, last


def show_last_value(cell: Cell, code: str) -> str:
    """Print a driver cell's trailing plain value as the notebook showed it; drop it if silenced."""
    found = _trailing_plain_value(code)
    if found is None:
        return code
    _, last = found
    lines = code.splitlines()
    start, end = last.lineno, last.end_lineno or last.lineno
    if cell.analysis.last_expr_silenced:
        replacement: list[str] = []
    else:
        segment = ast.get_source_segment(code, last.value) or ast.unparse(last.value)
        if isinstance(last.value, ast.Tuple) and not segment.startswith("("):
            segment = f"({segment})"
        replacement = f"print({segment})".splitlines()
    lines[start - 1 : end] = replacement
    return "\n".join(lines) + "\n"


def drop_last_value(code: str) -> str:
    """A task body without a trailing plain value: it would only have been the cell's Out[]."""
    found = _trailing_plain_value(code)
    if found is None:
        return code
    tree, last = found
    return remove_statements(code, tree, [last])


def maybe_unbound(code: str, tree: ast.Module, outputs: tuple[str, ...]) -> set[str]:
    """Outputs that some path through the cell leaves unbound (loop targets, one branch).

    The analysis answers: a name read after the cell's end is an input of cell-plus-read when
    some path reaches that read without binding it.
    """
    if not outputs:
        return set()
    if all(isinstance(stmt, _STRAIGHT) for stmt in tree.body) and not any(
        isinstance(node, (ast.NamedExpr, ast.Delete)) for node in ast.walk(tree)
    ):
        return set()  # straight-line code binds every name it binds
    probe = analyze_cell(code + "\n(" + ", ".join(outputs) + ",)\n")
    return set(probe.inputs) & set(outputs)
