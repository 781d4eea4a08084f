"""A saved notebook read as the exporter needs it: each cell's kind, Python code and analysis.

A code cell is one of three things:

- a ``%%task`` cell: its line parsed with the magic's own grammar
  (:func:`~taskcell.runner.task_line.parse_task_line`), its body kept as Python;
- a ``%%time`` or ``%%capture`` cell: its body kept, the magic line dropped with a warning;
- any other cell (``%%bash``, ``%%writefile``, ...) with a cell magic: kept whole as comments,
  with a warning;
- a plain code cell: Python run by the driver.

IPython syntax inside a cell is read with IPython's own transformer, then:
``%load_ext taskcell``, ``%task_cluster``, ``%tasks`` (the notebook's plumbing) are dropped;
``%task_env NAME ...`` defines an environment; ``%time STATEMENT`` keeps the statement; every
other magic, shell escape (``!ls``, ``files = !ls``) or help request (``obj?``) is kept as a
comment with a warning naming the cell. Nothing is dropped or changed silently.

Cells are numbered from 1 in notebook order, markdown cells included, as a reader counts them.
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from taskcell.errors import ExportError, SpecError
from taskcell.runner.analysis import CellAnalysis, analyze_cell
from taskcell.runner.task_line import TaskLine, build_request, parse_task_line
from taskcell.spec import Environment, Resources

__all__ = [
    "Cell",
    "CellKind",
    "EnvironmentDef",
    "ExportError",
    "ExportWarning",
    "Notebook",
    "read_notebook",
]

CellKind = Literal["task", "code", "markdown"]
"""What a cell becomes.

- ``"task"``: a ``%%task`` cell, exported as a task function.
- ``"code"``: any other code cell, run by the driver (possibly only comments after export).
- ``"markdown"``: text; the first one becomes the module's docstring, the others comments.
"""

#: Line magics that only set up the notebook: dropped without a word.
PLUMBING = frozenset({"load_ext", "reload_ext", "task_cluster", "tasks"})
#: Cell magics whose body runs in the notebook's namespace as plain Python.
TRANSPARENT_CELL_MAGICS = frozenset({"time", "capture"})


class ExportWarning(UserWarning):
    """Part of a cell could not be carried into the module and was kept as a comment."""


@dataclass(frozen=True)
class EnvironmentDef:
    """A ``%task_env NAME OPTIONS`` line: a named request later ``%%task --env NAME`` cells use."""

    name: str
    resources: Resources
    cell: int


@dataclass(frozen=True)
class Cell:
    """One notebook cell as the exporter sees it.

    Attributes
    ----------
    number
        Position in the notebook, from 1, markdown cells included.
    kind
        See :data:`CellKind`.
    source
        The cell as saved.
    code
        Python to emit: IPython syntax replaced (see the module docstring); for a task cell, the
        body without the ``%%task`` line. Empty for markdown.
    analysis
        :func:`~taskcell.runner.analysis.analyze_cell` of ``code``.
    task
        The parsed ``%%task`` line of a task cell.
    environments
        The ``%task_env`` lines of the cell, in order.
    notes
        What could not be carried as is, one sentence each; warned about when exporting.
    """

    number: int
    kind: CellKind
    source: str
    code: str = ""
    analysis: CellAnalysis = field(default_factory=CellAnalysis)
    task: TaskLine | None = None
    environments: tuple[EnvironmentDef, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """``cell 4 (%%task --gpu A100:2)``: how messages name the cell."""
        first = next((line.strip() for line in self.source.splitlines() if line.strip()), "")
        if len(first) > 60:
            first = first[:57] + "..."
        return f"cell {self.number} ({first})" if first else f"cell {self.number}"

    def tree(self) -> ast.Module:
        """The AST of :attr:`code` (parsed again on each call; it is cheap and never stale)."""
        return ast.parse(self.code)


@dataclass(frozen=True)
class Notebook:
    """A notebook's cells and the environments its ``%task_env`` lines define, in order."""

    cells: tuple[Cell, ...]
    path: str | None = None

    @property
    def environments(self) -> dict[str, EnvironmentDef]:
        """The last definition of each environment (a redefinition replaces the earlier one)."""
        return {env.name: env for cell in self.cells for env in cell.environments}


def read_notebook(
    notebook: str | os.PathLike[str] | Mapping[str, Any],
    presets: Mapping[str, Resources],
) -> Notebook:
    """Read a notebook file, or a notebook already loaded as JSON (an ``nbformat`` node works).

    Parameters
    ----------
    notebook
        A path to an ``.ipynb`` file, or its parsed JSON.
    presets
        The presets ``%%task`` lines may name (``taskcell.config.presets()``).

    Returns
    -------
    Notebook

    Raises
    ------
    ExportError
        For a file that is not notebook JSON, a cell that is not valid Python (IPython syntax
        aside), or a bad ``%%task`` / ``%task_env`` line; the message names the cell.
    """
    path = None
    if isinstance(notebook, Mapping):
        data = notebook
    else:
        path = os.fspath(notebook)
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, UnicodeDecodeError) as e:
            raise ExportError(f"cannot read the notebook {path}: {e}") from None
        except json.JSONDecodeError as e:
            raise ExportError(
                f"{path} is not a notebook: not valid JSON ({e.msg} at line {e.lineno})"
            ) from None
    raw_cells = data.get("cells") if isinstance(data, Mapping) else None
    if not isinstance(raw_cells, Sequence) or isinstance(raw_cells, str):
        where = path or "the notebook"
        raise ExportError(f"{where} is not a notebook: it has no list of 'cells'")
    environments: dict[str, Environment] = {}
    cells = []
    for number, raw in enumerate(raw_cells, 1):
        cell = _read_cell(number, raw, presets, environments)
        for env in cell.environments:
            environments[env.name] = Environment(env.name, env.resources)
        cells.append(cell)
    return Notebook(tuple(cells), path)


def _source(number: int, raw: object) -> tuple[str, str]:
    if not isinstance(raw, Mapping):
        raise ExportError(f"cell {number} is not a notebook cell: {raw!r:.60}")
    kind = raw.get("cell_type")
    source = raw.get("source", "")
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        source = "".join(source)
    if not isinstance(source, str):
        raise ExportError(f"cell {number}: its 'source' must be text, got {source!r:.60}")
    if kind not in ("code", "markdown", "raw"):
        raise ExportError(f"cell {number}: unknown cell_type {kind!r} (code, markdown or raw)")
    return kind, source


def _read_cell(
    number: int,
    raw: object,
    presets: Mapping[str, Resources],
    environments: Mapping[str, Environment],
) -> Cell:
    kind, source = _source(number, raw)
    if kind != "code":
        # Raw cells are not run by the kernel; they are kept as text like markdown.
        return Cell(number, "markdown", source)
    lines = source.splitlines()
    while lines and not lines[0].strip():
        lines.pop(0)
    label = Cell(number, "code", source).label
    if lines and lines[0].startswith("%%"):
        magic, _, line = lines[0][2:].partition(" ")
        body = "\n".join(lines[1:]) + "\n"
        if magic == "task":
            try:
                task = parse_task_line(line)
            except SpecError as e:
                raise ExportError(f"{label}: {e}") from e
            code, envs, notes = _python(body, label, presets, environments, number)
            if envs:
                raise ExportError(f"{label}: %task_env belongs in a cell of its own, not in %%task")
            return Cell(number, "task", source, code, _analyze(code, label), task, (), notes)
        if magic in TRANSPARENT_CELL_MAGICS:
            code, envs, notes = _python(body, label, presets, environments, number)
            note = f"{label}: %%{magic} dropped; its body is kept"
            return Cell(
                number, "code", source, code, _analyze(code, label), None, envs, (note, *notes)
            )
        commented = "\n".join(f"# {text}".rstrip() for text in lines) + "\n"
        note = f"{label}: %%{magic} cells cannot run outside IPython; kept as a comment"
        return Cell(number, "code", source, commented, CellAnalysis(), notes=(note,))
    code, envs, notes = _python(source, label, presets, environments, number)
    return Cell(number, "code", source, code, _analyze(code, label), None, envs, notes)


def _analyze(code: str, label: str) -> CellAnalysis:
    try:
        return analyze_cell(code)
    except SyntaxError as e:  # pragma: no cover - _python parsed it already
        raise ExportError(f"{label}: {e.msg} (line {e.lineno})") from None


# -- IPython syntax -----------------------------------------------------------------------------

_IPYTHON_CALLS = frozenset({"run_line_magic", "run_cell_magic", "system", "getoutput"})


def _ipython_call(node: ast.AST) -> tuple[str, list[str]] | None:
    """``get_ipython().run_line_magic('time', 'x = 1')`` -> ``("run_line_magic", [...])``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    owner = node.func.value
    if not (
        isinstance(owner, ast.Call)
        and isinstance(owner.func, ast.Name)
        and owner.func.id == "get_ipython"
        and node.func.attr in _IPYTHON_CALLS
    ):
        return None
    args = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return node.func.attr, args


def _uses_get_ipython(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "get_ipython"
        for n in ast.walk(node)
    )


def _as_typed(call: str, args: list[str]) -> str:
    """The IPython text a transformed call stands for: ``%time x = 1``, ``!ls``."""
    if call == "run_line_magic" and args:
        return f"%{args[0]} {args[1] if len(args) > 1 else ''}".rstrip()
    if call in ("system", "getoutput") and args:
        return f"!{args[0]}"
    return "%%" + (args[0] if args else "")


def _transform(source: str, label: str) -> tuple[str, ast.Module]:
    """The cell as the kernel runs it: plain Python stays as is, IPython syntax is transformed."""
    try:
        return source, ast.parse(source)
    except SyntaxError:
        pass
    except ValueError as e:  # null bytes
        raise ExportError(f"{label}: {e}") from None
    from IPython.core.inputtransformer2 import TransformerManager

    code = TransformerManager().transform_cell(source)
    try:
        return code, ast.parse(code)
    except SyntaxError as e:
        line = (e.text or "").strip()
        raise ExportError(f"{label}: invalid syntax at line {e.lineno}: {line!r}") from None


@dataclass
class _Edit:
    start: int  # first line, 1-based
    end: int  # last line
    text: str  # replacement lines (may be empty)


def _python(
    source: str,
    label: str,
    presets: Mapping[str, Resources],
    environments: Mapping[str, Environment],
    number: int,
) -> tuple[str, tuple[EnvironmentDef, ...], tuple[str, ...]]:
    """The cell's Python, its ``%task_env`` definitions, and notes on what was not carried."""
    code, tree = _transform(source, label)
    edits: list[_Edit] = []
    envs: list[EnvironmentDef] = []
    notes: list[str] = []
    known = dict(environments)

    def visit(body: list[ast.stmt], top: bool) -> None:
        for stmt in body:
            value = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign)) else None
            call = _ipython_call(value) if value is not None else None
            if call is None:
                if _uses_get_ipython(stmt) and not _nested_bodies(stmt):
                    _comment(stmt, ast.get_source_segment(code, stmt) or "get_ipython()", top)
                    notes.append(
                        f"{label}: get_ipython() has no shell outside IPython; "
                        f"line {stmt.lineno} kept as a comment"
                    )
                for child in _nested_bodies(stmt):
                    visit(child, False)
                continue
            kind, args = call
            typed = _as_typed(kind, args)
            if isinstance(stmt, ast.Assign):
                targets = " = ".join(ast.unparse(t) for t in stmt.targets)
                typed = f"{targets} = {typed}"
            name = args[0] if args else ""
            if kind == "run_line_magic" and name in PLUMBING and isinstance(stmt, ast.Expr):
                _comment(stmt, None, top)
            elif kind == "run_line_magic" and name == "task_env" and isinstance(stmt, ast.Expr):
                env = _environment(args[1] if len(args) > 1 else "", label, presets, known, number)
                if env is not None:
                    envs.append(env)
                    known[env.name] = Environment(env.name, env.resources)
                _comment(stmt, None, top)
            elif kind == "run_line_magic" and name == "time" and isinstance(stmt, ast.Expr):
                statement = args[1] if len(args) > 1 else "pass"
                edits.append(
                    _Edit(stmt.lineno, stmt.end_lineno or stmt.lineno, _indent(stmt) + statement)
                )
                notes.append(f"{label}: %time dropped; its statement is kept")
            else:
                _comment(stmt, typed, top)
                what = "shell escapes" if kind in ("system", "getoutput") else f"%{name}"
                notes.append(
                    f"{label}: {what} cannot run outside IPython; {typed!r} kept as a comment"
                )

    def _comment(stmt: ast.stmt, typed: str | None, top: bool) -> None:
        indent = _indent(stmt)
        if typed is None:
            text = "" if top else f"{indent}pass"
        else:
            lines = typed.splitlines() or [""]
            comment = "\n".join(f"{indent}# {line}".rstrip() for line in lines)
            text = comment if top else f"{indent}pass\n{comment}"
        edits.append(_Edit(stmt.lineno, stmt.end_lineno or stmt.lineno, text))

    if "get_ipython" in code:  # IPython syntax, transformed, or a call of the user's own
        visit(tree.body, True)
    if not code.endswith("\n"):
        code += "\n"
    if edits:
        code = _apply(code, edits)
        try:
            ast.parse(code)
        except SyntaxError as e:  # pragma: no cover - a magic sharing its line with code
            raise ExportError(
                f"{label}: IPython syntax at line {e.lineno} shares its line with other code; "
                f"put it on a line of its own"
            ) from None
    return code, tuple(envs), tuple(notes)


def _nested_bodies(stmt: ast.stmt) -> list[list[ast.stmt]]:
    bodies = []
    for name in ("body", "orelse", "finalbody"):
        value = getattr(stmt, name, None)
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            bodies.append(value)
    for handler in getattr(stmt, "handlers", ()):
        bodies.append(handler.body)
    for case in getattr(stmt, "cases", ()):
        bodies.append(case.body)
    return bodies


def _indent(stmt: ast.stmt) -> str:
    return " " * stmt.col_offset


def _apply(code: str, edits: list[_Edit]) -> str:
    lines = code.splitlines()
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        replacement = edit.text.splitlines() if edit.text else []
        lines[edit.start - 1 : edit.end] = replacement
    return "\n".join(lines) + "\n"


def _environment(
    text: str,
    label: str,
    presets: Mapping[str, Resources],
    environments: Mapping[str, Environment],
    number: int,
) -> EnvironmentDef | None:
    """``%task_env NAME OPTIONS`` as the magic reads it; a bare ``%task_env`` lists: None."""
    name, _, rest = text.strip().partition(" ")
    if not name:
        return None
    try:
        request = build_request(parse_task_line(rest), lambda: presets, environments, {})
    except SpecError as e:
        raise ExportError(f"{label}: %task_env {name}: {e}") from e
    resources = request if isinstance(request, Resources) else Resources()
    return EnvironmentDef(name, resources, number)
