"""A saved notebook read as the exporter needs it: each cell's kind, Python code and analysis.

A code cell is a ``%%task`` cell (its line parsed with the magic's own grammar,
:func:`~taskcell.runner.task_line.parse_task_line`), or a cell the driver runs. Cell magics
stacked at the top of a cell keep their body: ``%%time`` and ``%%task`` in either order,
``%%capture`` around the body, and a magic whose body is text (``%%bash``, ``%%writefile``,
``%%html``...) as the Python that does the same.

IPython syntax inside a cell is read with IPython's own transformer, then translated by
:mod:`taskcell.export.ipython_syntax`: ``%time`` keeps its statement, ``!cmd`` runs the shell,
``%env`` sets ``os.environ``, the notebook's set-up (``%load_ext``, ``%matplotlib``) is left as
a comment; ``%task_env NAME ...`` defines an environment. What a module cannot run (``%run``,
``%store``, ``get_ipython()`` used otherwise) is a problem of the cell: export refuses the
notebook, naming every such cell. Nothing is dropped or changed silently.

Cells are numbered from 1 in notebook order, markdown cells included, as a reader counts them.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import json
import os
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from taskcell.errors import ExportError, SpecError
from taskcell.export import ipython_syntax
from taskcell.export.ipython_syntax import Helpers, Refused, Translation
from taskcell.runner.analysis import CellAnalysis, analyze_cell, ipython_call, is_get_ipython
from taskcell.runner.task_line import TaskLine, build_request, parse_task_line
from taskcell.spec import Environment, Resources

__all__ = [
    "Cell",
    "CellKind",
    "EnvironmentDef",
    "ExportError",
    "ExportWarning",
    "Notebook",
    "problems_error",
    "read_notebook",
]

CellKind = Literal["task", "code", "markdown"]
"""What a cell becomes.

- ``"task"``: a ``%%task`` cell, exported as a task function.
- ``"code"``: any other code cell, run by the driver (possibly only comments after export).
- ``"markdown"``: text; the first one becomes the module's docstring, the others comments.
"""


class ExportWarning(UserWarning):
    """Part of a cell was left out of the module (the notebook's set-up, a package install)."""


@dataclass(frozen=True)
class EnvironmentDef:
    """A ``%task_env NAME OPTIONS`` line: a named request later ``%%task --env NAME`` cells use."""

    name: str
    resources: Resources
    cell: int


@dataclass(frozen=True, kw_only=True)
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
        Python to emit: IPython syntax translated (see the module docstring); for a task cell,
        the body without the ``%%task`` line. Empty for markdown.
    analysis
        :func:`~taskcell.runner.analysis.analyze_cell` of ``code``.
    task
        The parsed ``%%task`` line of a task cell.
    environments
        The ``%task_env`` lines of the cell, in order.
    notes
        What was left out, one sentence each; warned about when exporting.
    problems
        Why the cell cannot be exported, one sentence each naming the cell.
    roles
        The helpers its translated IPython syntax calls (:data:`ipython_syntax.HELPER_SOURCES`).
    """

    number: int
    kind: CellKind
    source: str
    code: str = ""
    analysis: CellAnalysis = field(default_factory=CellAnalysis)
    task: TaskLine | None = None
    environments: tuple[EnvironmentDef, ...] = ()
    notes: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """``cell 4 (%%task --gpu A100:2)``: how messages name the cell."""
        return _label(self.number, self.source)


def _label(number: int, source: str) -> str:
    first = next((line.strip() for line in source.splitlines() if line.strip()), "")
    if len(first) > 60:
        first = first[:57] + "..."
    return f"cell {number} ({first})" if first else f"cell {number}"


@dataclass(frozen=True)
class Notebook:
    """A notebook's cells, and the names of the helpers their translated syntax calls."""

    cells: tuple[Cell, ...]
    path: str | None = None
    helpers: Helpers = field(default_factory=lambda: Helpers(()))

    @property
    def environments(self) -> dict[str, EnvironmentDef]:
        """The last definition of each environment (a redefinition replaces the earlier one)."""
        return {env.name: env for cell in self.cells for env in cell.environments}

    @property
    def problems(self) -> list[str]:
        """Every cell's problems, in order."""
        return [problem for cell in self.cells for problem in cell.problems]


def problems_error(problems: Sequence[str]) -> ExportError:
    """One error naming every problem: the sentence itself when there is one."""
    if len(problems) == 1:
        return ExportError(problems[0])
    ordered = sorted(problems, key=_cell_number)  # a reader's order, whoever found them
    listed = "\n".join(f"- {problem}" for problem in ordered)
    return ExportError(f"{len(problems)} cells cannot be exported as they are:\n{listed}")


def _cell_number(problem: str) -> int:
    found = re.match(r"cell (\d+)", problem)
    return int(found.group(1)) if found else 0


def read_notebook(
    notebook: str | os.PathLike[str] | Mapping[str, Any],
    presets: Mapping[str, Resources],
    *,
    strict: bool = True,
) -> Notebook:
    """Read a notebook file, or a notebook already loaded as JSON (an ``nbformat`` node works).

    Parameters
    ----------
    notebook
        A path to an ``.ipynb`` file, or its parsed JSON.
    presets
        The presets ``%%task`` lines may name (``taskcell.config.presets()``).
    strict
        Raise if any cell has a problem; otherwise leave them in :attr:`Cell.problems`.

    Raises
    ------
    ExportError
        For a file that is not notebook JSON; with ``strict``, for cells that are not valid
        Python (IPython syntax aside), bad ``%%task`` / ``%task_env`` lines or IPython syntax a
        module cannot run, naming every such cell.
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
    sources = [_source(number, raw) for number, raw in enumerate(raw_cells, 1)]
    helpers = Helpers(source for _, source in sources)
    environments: dict[str, Environment] = {}
    bound: set[str] = set()  # what the cells before bind: a name shadows IPython's automagic
    cells = []
    for number, (kind, source) in enumerate(sources, 1):
        cell = _Reader(number, source, presets, environments, helpers).read(kind, bound)
        for env in cell.environments:
            environments[env.name] = Environment(env.name, env.resources)
        bound.update(cell.analysis.outputs)
        cells.append(cell)
    found = Notebook(tuple(cells), path, helpers)
    if strict and found.problems:
        raise problems_error(found.problems)
    return found


#: ``%%task?``: help on a cell magic, which IPython reads as a line (``%pinfo %%task``).
_HELP = re.compile(r"%%\w+\?")

#: A ``%%task`` line as the magic reads it; notebooks repeat a few lines many times.
_task_line = functools.lru_cache(maxsize=1024)(parse_task_line)


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


class _Reader:
    """Reads one cell: its magic stack, its Python, and what could not be carried."""

    def __init__(
        self,
        number: int,
        source: str,
        presets: Mapping[str, Resources],
        environments: Mapping[str, Environment],
        helpers: Helpers,
    ) -> None:
        self.number, self.source = number, source
        self.label = _label(number, source)
        self.presets, self.helpers = presets, helpers
        self.known = dict(environments)
        self.envs: list[EnvironmentDef] = []
        self.notes: list[str] = []
        self.problems: list[str] = []
        self.roles: list[str] = []

    def read(self, kind: str, bound: Collection[str]) -> Cell:
        """The cell; ``bound``: the notebook's names when it runs (IPython's automagic)."""
        if kind != "code":
            # Raw cells are not run by the kernel; they are kept as text like markdown.
            return Cell(number=self.number, kind="markdown", source=self.source)
        lines = self.source.splitlines()
        while lines and not lines[0].strip():
            lines.pop(0)
        stack: list[tuple[str, str]] = []
        while lines and lines[0].startswith("%%") and not _HELP.match(lines[0]):
            name, _, line = lines.pop(0)[2:].partition(" ")
            stack.append((name, line))
            if name != "task" and name not in ipython_syntax.PYTHON_BODIES:
                break  # the rest is the magic's text
        body = "\n".join(lines) + "\n"
        task = self._task_line([line for name, line in stack if name == "task"])
        wrappers = [(name, line) for name, line in stack if name != "task"]
        if not wrappers or wrappers[-1][0] in ipython_syntax.PYTHON_BODIES:  # a Python body
            body = ipython_syntax.automagic(body, bound) or body
        plain = self._plain(body) if not wrappers else None
        if plain is not None:  # plain Python: analysed once, read no further
            return self._cell(body, plain, task)
        code = self._body(body, wrappers)
        if task is not None and self.envs:
            self.problems.append(
                f"{self.label}: %task_env belongs in a cell of its own, not in %%task"
            )
        analysis = self._analyze(code)
        if self.roles and not self.problems:
            analysis = self._with_magic_reads(analysis, wrappers, body)
        return self._cell(code, analysis, task)

    def _cell(self, code: str, analysis: CellAnalysis, task: TaskLine | None) -> Cell:
        """The code cell read: its code as it runs, and what was found reading it."""
        return Cell(
            number=self.number,
            kind="task" if task is not None else "code",
            source=self.source,
            code=code,
            analysis=analysis,
            task=task,
            environments=tuple(self.envs),
            notes=tuple(self.notes),
            problems=tuple(self.problems),
            roles=tuple(dict.fromkeys(self.roles)),
        )

    def _plain(self, body: str) -> CellAnalysis | None:
        """The analysis of a body that is plain Python, calling no ``get_ipython()``; None for
        any other."""
        if "get_ipython" in body:
            return None
        try:
            return analyze_cell(body)
        except SyntaxError:
            return None  # IPython syntax, or an error the IPython path names

    def _task_line(self, lines: list[str]) -> TaskLine | None:
        if not lines:
            return None
        if len(lines) > 1:
            self.problems.append(f"{self.label}: %%task is given twice")
        try:
            return _task_line(lines[0])
        except SpecError as e:
            self.problems.append(f"{self.label}: {e}")
            return TaskLine()

    def _body(self, body: str, wrappers: list[tuple[str, str]]) -> str:
        """The cell's Python: its body translated, inside the Python of its cell magics."""
        last = wrappers[-1] if wrappers else None
        text_magic = (
            last if last is not None and last[0] not in ipython_syntax.PYTHON_BODIES else None
        )
        try:
            if text_magic is not None:
                made = ipython_syntax.cell_magic(*text_magic, body, self.helpers)
                self.roles += made.roles
                code = made.code + "\n"
                wrappers = wrappers[:-1]
            else:
                code = self._python(body)
            for name, line in reversed(wrappers):
                made = ipython_syntax.cell_magic(name, line, "", self.helpers)
                self.roles += made.roles
                code = ipython_syntax.wrap(made.code, code)
        except Refused as e:
            self.problems.append(f"{self.label}: {e}")
            return "pass\n"
        return code

    def _with_magic_reads(
        self, analysis: CellAnalysis, wrappers: list[tuple[str, str]], body: str
    ) -> CellAnalysis:
        """``analysis`` with the names the cell's magics read where the translation holds them
        as text (``%timeit f(x)``, ``!echo {x}``), as the analysis reads IPython syntax."""
        from IPython.core.inputtransformer2 import TransformerManager

        typed = "".join(f"%%{name} {line}\n" for name, line in wrappers) + body
        transform = TransformerManager().transform_cell
        try:
            original = analyze_cell(transform(typed), transform=transform)
        except SyntaxError:
            return analysis
        known = {*analysis.inputs, *analysis.outputs}
        extra = tuple(name for name in original.inputs if name not in known)
        return dataclasses.replace(analysis, inputs=analysis.inputs + extra) if extra else analysis

    def _analyze(self, code: str) -> CellAnalysis:
        try:
            return analyze_cell(code)
        except SyntaxError as e:
            if not self.problems:
                line = (e.text or "").strip()
                self.problems.append(f"{self.label}: {e.msg} at line {e.lineno}: {line!r}")
            return CellAnalysis()

    # -- IPython syntax -------------------------------------------------------------------------

    def _python(self, source: str) -> str:
        """A Python body with its IPython syntax translated."""
        parsed = _transform(source)
        if isinstance(parsed, str):
            self.problems.append(f"{self.label}: {parsed}")
            return "pass\n"
        code, tree = parsed
        edits: list[_Edit] = []
        if "get_ipython" in code:  # IPython syntax, transformed, or a call of the user's own
            self._visit(tree.body, code, edits)
        if not code.endswith("\n"):
            code += "\n"
        if not edits:
            return code
        code = _apply(code, edits)
        try:
            ast.parse(code)
        except SyntaxError:  # a magic sharing its line with other code
            self.problems.append(
                f"{self.label}: IPython syntax shares its line with other code; put it on a line "
                f"of its own"
            )
            return "pass\n"
        return code

    def _visit(self, body: list[ast.stmt], code: str, edits: list[_Edit]) -> None:
        for stmt in body:
            value = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign)) else None
            call = ipython_call(value) if value is not None else None
            if call is None:
                if _uses_get_ipython(stmt) and not _nested_bodies(stmt):
                    text = ast.get_source_segment(code, stmt) or "get_ipython()"
                    self.problems.append(
                        f"{self.label}: line {stmt.lineno} ({text.strip()[:40]!r}) uses "
                        f"get_ipython(), which a module does not have"
                    )
                for child in _nested_bodies(stmt):
                    self._visit(child, code, edits)
                continue
            kind, args = call
            target = None
            if isinstance(stmt, ast.Assign):
                target = " = ".join(ast.unparse(t) for t in stmt.targets)
            try:
                made = self._translate(kind, args, target)
            except Refused as e:
                self.problems.append(f"{self.label}: {e}")
                continue
            if made is None:
                made = Translation("")
            self.roles += made.roles
            if made.note:
                self.notes.append(f"{self.label}: {made.note}")
            edits.append(_Edit(stmt.lineno, stmt.end_lineno or stmt.lineno, _indented(stmt, made)))

    def _translate(self, kind: str, args: list[str], target: str | None) -> Translation | None:
        name = args[0] if args else ""
        line = args[1] if len(args) > 1 else ""
        if kind == "run_line_magic" and name == "task_env" and target is None:
            self._environment(line)
            return None
        if kind == "run_line_magic" and (
            name in ipython_syntax.TASKCELL_OWN
            or (name in ("load_ext", "reload_ext") and line.strip() == "taskcell")
        ):
            return None
        if kind == "run_line_magic":
            return ipython_syntax.line_magic(name, line, target, self.helpers)
        if kind in ("system", "getoutput"):
            if kind == "system" and target is not None:
                raise Refused(f"{target} = get_ipython().system(...) binds None; use x = !cmd")
            getoutput = target if kind == "getoutput" else None
            return ipython_syntax.shell_escape(name, getoutput, self.helpers)
        # run_cell_magic written out by hand: IPython's transformer makes it only from a
        # cell's first line, which the magic stack has taken.
        if name in ipython_syntax.PYTHON_BODIES:
            raise Refused(
                f"get_ipython().run_cell_magic({name!r}, ...): write the cell as %%{name}"
            )
        return ipython_syntax.cell_magic(name, line, args[2] if len(args) > 2 else "", self.helpers)

    def _environment(self, text: str) -> None:
        """``%task_env NAME OPTIONS`` as the magic reads it; a bare ``%task_env`` lists."""
        name, _, rest = text.strip().partition(" ")
        if not name:
            return
        try:
            request = build_request(parse_task_line(rest), lambda: self.presets, self.known, {})
        except SpecError as e:
            self.problems.append(f"{self.label}: %task_env {name}: {e}")
            return
        resources = request if isinstance(request, Resources) else Resources()
        self.envs.append(EnvironmentDef(name, resources, self.number))
        self.known[name] = Environment(name, resources)


def _uses_get_ipython(stmt: ast.stmt) -> bool:
    """Whether a statement calls ``get_ipython()`` anywhere: a module has no shell to give."""
    return any(is_get_ipython(node) for node in ast.walk(stmt))


def _transform(source: str) -> tuple[str, ast.Module] | str:
    """The cell as the kernel runs it (IPython syntax transformed), or why it does not parse."""
    try:
        return source, ast.parse(source)
    except SyntaxError:
        pass
    except ValueError as e:  # null bytes
        return str(e)
    from IPython.core.inputtransformer2 import TransformerManager

    code = TransformerManager().transform_cell(source)
    try:
        return code, ast.parse(code)
    except SyntaxError as e:
        line = (e.text or "").strip()
        return f"invalid syntax at line {e.lineno}: {line!r}"


@dataclass
class _Edit:
    start: int  # first line, 1-based
    end: int  # last line
    text: str  # replacement lines (may be empty)


def _indented(stmt: ast.stmt, made: Translation) -> str:
    """A translation indented as the statement it replaces; ``pass`` where a block would be
    left empty."""
    prefix = " " * stmt.col_offset
    lines = made.code.splitlines()
    code = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if stmt.col_offset and not code:
        lines = ["pass", *lines]
    return "\n".join(f"{prefix}{line}".rstrip() for line in lines)


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


def _apply(code: str, edits: list[_Edit]) -> str:
    lines = code.splitlines()
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        replacement = edit.text.splitlines() if edit.text else []
        lines[edit.start - 1 : edit.end] = replacement
    return "\n".join(lines) + "\n"
