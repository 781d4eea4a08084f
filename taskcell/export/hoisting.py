"""Which of a notebook's imports move to the top of the exported module, as a person writes them.

Imports at the top of the notebook (before any other code, each name always bound by the same
import) move to the top of the module; ``from __future__`` imports always do, since Python allows
them nowhere else. A later import stays where it is, and so does a star import, wherever it is:
what it binds depends on when it runs (:func:`~taskcell.export.cell_code.function_scope_edits`).
Only whole-line, top-level import statements count; what they bind follows the one cell analysis
(:func:`taskcell.runner.analysis.analyze_cell`).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from taskcell.export.cell_code import remove_statements, whole_lines
from taskcell.export.notebook import Cell
from taskcell.runner.analysis import analyze_cell


@dataclass
class CellImports:
    """The whole-line, top-level import statements of one cell."""

    statements: list[ast.Import | ast.ImportFrom] = field(default_factory=list)
    #: name -> the single-alias import text that binds it (its last binding in the cell)
    names: dict[str, str] = field(default_factory=dict)
    #: names the cell binds only through those imports
    only: set[str] = field(default_factory=set)


def alias_text(stmt: ast.Import | ast.ImportFrom, alias: ast.alias) -> tuple[str, str]:
    """The name one alias of an import binds, and the import of that alias alone."""
    if isinstance(stmt, ast.Import):
        text = f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
    else:
        module = "." * stmt.level + (stmt.module or "")
        text = f"from {module} import {alias.name}"
        text += f" as {alias.asname}" if alias.asname else ""
    return _bound(text), text


@functools.lru_cache(maxsize=4096)
def _bound(import_text: str) -> str:
    """The name a one-alias import binds, by the analysis's rules (``import a.b`` binds ``a``)."""
    (name,) = analyze_cell(import_text).outputs
    return name


def cell_imports(cell: Cell, tree: ast.Module) -> CellImports:
    """The imports of a cell that may move: absolute, not starred, on lines of their own."""
    found = CellImports()
    for stmt, alone in zip(tree.body, whole_lines(tree), strict=True):
        if not alone or not isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(stmt, ast.ImportFrom) and (stmt.module == "__future__" or stmt.level):
            continue
        if any(alias.name == "*" for alias in stmt.names):
            continue
        found.statements.append(stmt)
        for alias in stmt.names:
            name, text = alias_text(stmt, alias)
            found.names[name] = text
    if found.statements:
        rest = remove_statements(cell.code, tree, found.statements)
        others = set(analyze_cell(rest).outputs)
        found.only = {name for name in found.names if name not in others}
    return found


def future_imports(tree: ast.Module) -> list[ast.stmt]:
    """``from __future__`` imports: Python allows them only at a module's top."""
    return [
        stmt
        for stmt in tree.body
        if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"
    ]


def statement_hoisted(stmt: ast.stmt, hoisted: set[str]) -> bool:
    """Whether every name an import statement binds moves to the module's top."""
    assert isinstance(stmt, (ast.Import, ast.ImportFrom))
    return all(alias_text(stmt, alias)[0] in hoisted for alias in stmt.names)


def _has_code(code: str) -> bool:
    return any(line.strip() and not line.lstrip().startswith("#") for line in code.splitlines())


class Hoisting:
    """Decides, cell by cell in notebook order, which imports move to the module's top; each
    cell's tree is needed only while :meth:`add` reads it."""

    def __init__(self) -> None:
        self.open = True  # still in the notebook's import prologue
        self.prologue: set[int] = set()  # ids of the import statements in it
        self.texts: dict[str, set[str | None]] = {}  # name -> the imports that bind it
        self.deleted: set[str] = set()
        self.first_in_prologue: dict[str, bool] = {}
        self.cells: list[tuple[Cell, CellImports, list[str]]] = []

    def add(self, cell: Cell, parse: Callable[[str], ast.Module]) -> CellImports:
        """Read one code cell (parsed with ``parse`` only where it imports); its movable
        imports."""
        if "import" in cell.code:
            tree = parse(cell.code)
            found = cell_imports(cell, tree)
            statements = tree.body
            special = [
                ast.get_source_segment(cell.code, stmt) or ast.unparse(stmt)
                for stmt in future_imports(tree)
            ]
        else:  # nothing to move: read without parsing
            found, special = CellImports(), []
            statements = [ast.Pass()] if _has_code(cell.code) else []
        if cell.task is not None:
            self.open = False
        else:
            for stmt in statements:
                if self.open and stmt in found.statements:
                    self.prologue.add(id(stmt))
                elif not isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    self.open = False
        for name in cell.analysis.outputs:
            text = found.names.get(name) if name in found.only else None
            self.texts.setdefault(name, set()).add(text)
            if name not in self.first_in_prologue and not found.statements:
                self.first_in_prologue[name] = False
            elif name not in self.first_in_prologue:
                stmt_ids = {
                    id(s)
                    for s in found.statements
                    if any(alias_text(s, a)[0] == name for a in s.names)
                }
                self.first_in_prologue[name] = bool(stmt_ids) and stmt_ids <= self.prologue
        self.deleted.update(cell.analysis.deleted)
        self.cells.append((cell, found, special))
        return found

    def finish(self) -> tuple[set[str], list[str]]:
        """The names whose imports move to the module's top, and those import statements."""
        hoisted = {
            name
            for name, seen in self.texts.items()
            if len(seen) == 1
            and None not in seen
            and name not in self.deleted
            and self.first_in_prologue.get(name, False)
        }
        # A statement moves only if every name it binds does; drop names tied to one that stays.
        changed = True
        while changed:
            changed = False
            for _, found, _ in self.cells:
                for stmt in found.statements:
                    aliases = [alias_text(stmt, a)[0] for a in stmt.names]
                    if any(a in hoisted for a in aliases) and not all(
                        a in hoisted for a in aliases
                    ):
                        hoisted.difference_update(aliases)
                        changed = True
        return hoisted, self._statements(hoisted)

    def _statements(self, hoisted: set[str]) -> list[str]:
        """The import statements for the module's top, ``__future__`` first, in notebook order."""
        statements: dict[str, None] = {}
        for cell, found, special in self.cells:
            statements.update(dict.fromkeys(special))
            for stmt in found.statements:
                if (
                    cell.task is None
                    and id(stmt) in self.prologue
                    and statement_hoisted(stmt, hoisted)
                ):
                    text = ast.get_source_segment(cell.code, stmt) or ast.unparse(stmt)
                    statements.setdefault(text)
        future = [s for s in statements if s.startswith("from __future__")]
        return future + [s for s in statements if s not in future]
