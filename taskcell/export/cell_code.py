"""Edits the exporter makes to a cell's Python source, line by line, keeping the rest as written.

Statements are removed only when they have their lines to themselves, so what remains is the
user's code, comments and layout included. A cell's trailing expression stands for the
notebook's ``Out[]``: the module shows it where the cell runs, as IPython writes it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from taskcell.runner.analysis import analyze_cell

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


def show_last_value(code: str, silenced: bool, show: str) -> str:
    """``code`` with its trailing expression shown as the notebook's ``Out[]`` (``show(...)``),
    or kept as a statement when ``;`` silenced it; unchanged when it has none on lines of its
    own."""
    tree = ast.parse(code)
    if not tree.body or not isinstance(tree.body[-1], ast.Expr) or silenced:
        return code
    last = tree.body[-1]
    if not whole_lines(tree)[-1] or _shows_nothing(last.value):
        return code
    lines = code.splitlines()
    start, end = last.lineno, last.end_lineno or last.lineno
    segment = ast.get_source_segment(code, last.value) or ast.unparse(last.value)
    if isinstance(last.value, ast.Tuple) and not segment.lstrip().startswith("("):
        segment = f"({segment})"
    lines[start - 1 : end] = f"{show}({segment})".splitlines()
    return "\n".join(lines) + "\n"


def _shows_nothing(value: ast.expr) -> bool:
    """A call of ``print`` or ``display``: its value is None, which IPython does not show."""
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id in ("print", "display")
    )


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
