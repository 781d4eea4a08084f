"""Edits the exporter makes to a cell's Python source, line by line, keeping the rest as written.

Statements are removed only when they have their lines to themselves, so what remains is the
user's code, comments and layout included. A cell's trailing expression stands for the
notebook's ``Out[]``: the module shows it where the cell runs, as IPython writes it.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Iterable, Sequence

from taskcell.runner.analysis import analyze_statements


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


Edit = tuple[int, int, list[str]]
"""Lines ``first`` to ``last`` (1-based) of a cell's code, and the lines that replace them."""


def apply_edits(code: str, edits: Iterable[Edit]) -> str:
    """``code`` with each edit made (edits do not overlap)."""
    lines = code.splitlines()
    for first, last, replacement in sorted(edits, key=lambda e: e[0], reverse=True):
        lines[first - 1 : last] = replacement
    return "\n".join(lines) + "\n"


def function_scope_edits(
    code: str, tree: ast.Module, star: Callable[[str], str] | None = None
) -> list[Edit]:
    """What a cell's top level means, as a module function says it:

    - each star import as ``exec("from m import *", globals())`` (``star(statement)`` where
      given), where the cell has it: it binds what ``from m import *`` binds, in the module's
      globals, at that point (Python allows no star import in a function);
    - a ``global`` statement at the top level, which does nothing in a notebook, as ``pass``
      (in a function it would mean something, or not compile).
    """
    run = star or (lambda statement: f"exec({statement!r}, globals())")
    replaced: list[tuple[ast.stmt, str]] = [(node, run(ast.unparse(node))) for node in _stars(tree)]
    replaced += [
        (node, f"pass  # {ast.unparse(node)}") for node in tree.body if isinstance(node, ast.Global)
    ]
    return _spliced(code, replaced)


def star_imports(tree: ast.Module, star: Callable[[str], str]) -> list[str]:
    """The cell's top-level statements that star-import (``from m import *``), in order, as a
    task in a process of its own replays them, each star import written as ``star`` writes it:
    a star import, or a ``try`` of imports holding one (``try: from cupy import *`` / ``except
    ImportError: from numpy import *``), whole. One under a condition or inside other code is
    not replayed: its names may not exist there."""
    replayed = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and _stars(node):
            replayed.append(star(ast.unparse(node)))
        elif _stars(node) and _imports_only(node):
            replayed.append(ast.unparse(_StarsAs(star).visit(copy.deepcopy(node))))
    return replayed


class _StarsAs(ast.NodeTransformer):
    """Each star import as the statement ``star`` writes for it."""

    def __init__(self, star: Callable[[str], str]) -> None:
        self.star = star

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.stmt:
        if not _stars(node):
            return node
        return ast.parse(self.star(ast.unparse(node))).body[0]


def _imports_only(node: ast.stmt) -> bool:
    """Whether ``node`` is a ``try`` whose every statement imports (or passes)."""
    return isinstance(node, ast.Try) and all(
        isinstance(inner, ast.Import | ast.ImportFrom | ast.Pass)
        for inner in ast.walk(node)
        if isinstance(inner, ast.stmt) and inner is not node
    )


def _stars(tree: ast.AST) -> list[ast.ImportFrom]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.module != "__future__"
        and any(alias.name == "*" for alias in node.names)
    ]


def _spliced(code: str, replaced: Sequence[tuple[ast.stmt, str]]) -> list[Edit]:
    """Edits putting each replacement text in the place of its statement, the rest of its
    lines kept (statements sharing lines make one edit)."""
    lines = code.splitlines()
    edits: list[Edit] = []
    for node, text in sorted(replaced, key=lambda r: (r[0].lineno, r[0].col_offset), reverse=True):
        first, last = node.lineno, node.end_lineno or node.lineno
        if edits and edits[-1][0] <= last:  # shares a line with the edit after it
            after_first, after_last, after = edits.pop()
            segment = lines[first - 1 : after_first - 1] + after
            last = max(last, after_last)
        else:
            segment = lines[first - 1 : last]
        rows = _chars("\n".join(segment))
        stop = sum(len(_chars(row)) + 1 for row in segment[: (node.end_lineno or first) - first])
        stop += node.end_col_offset or 0
        joined = rows[: node.col_offset].decode() + text + rows[stop:].decode()
        edits.append((first, last, joined.splitlines()))
    return edits


def last_value_edit(code: str, tree: ast.Module, silenced: bool, show: str) -> Edit | None:
    """The edit that shows a cell's trailing expression as the notebook's ``Out[]``
    (``show(...)``); None where there is nothing to show: no trailing expression on lines of
    its own, one ``;`` silenced, or a call of ``print`` or ``display``."""
    if not tree.body or not isinstance(tree.body[-1], ast.Expr) or silenced:
        return None
    last = tree.body[-1]
    if not whole_lines(tree)[-1] or _shows_nothing(last.value):
        return None
    segment = _segment(code.splitlines(), last.value)
    if isinstance(last.value, ast.Tuple) and not segment.lstrip().startswith("("):
        segment = f"({segment})"
    return last.lineno, last.end_lineno or last.lineno, f"{show}({segment})".splitlines()


def _segment(lines: list[str], node: ast.expr) -> str:
    """The source of ``node`` in the code of ``lines`` (``ast.get_source_segment``, without
    reading the whole code again)."""
    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    end = node.end_col_offset
    if first == last:
        return _chars(lines[first])[node.col_offset : end].decode()
    parts = [_chars(lines[first])[node.col_offset :].decode(), *lines[first + 1 : last]]
    parts.append(_chars(lines[last])[:end].decode())
    return "\n".join(parts)


def _chars(line: str) -> bytes:
    return line.encode()  # the parser's offsets count UTF-8 bytes


def _shows_nothing(value: ast.expr) -> bool:
    """A call of ``print`` or ``display``: its value is None, which IPython does not show."""
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id in ("print", "display")
    )


def shares_parts(code: str, tree: ast.Module, names: Iterable[str]) -> bool:
    """Whether a top-level statement binding one of ``names`` reads another (``c = b["x"]``,
    ``alias = results``): their objects may share parts, which they keep only where they
    travel in one pickle."""
    wanted = set(names)
    for statement in analyze_statements(code, tree=tree):
        bound = set(statement.outputs)
        if wanted & bound and (wanted - bound) & set(statement.inputs):
            return True
    return False
