"""A notebook's data flow as a workflow plan, the same for every target.

The plan walks the cells in notebook order, as the kernel ran them, and records for each name
whether the driver holds its value or a task's future:

- A ``%%task`` cell becomes a :class:`TaskStep`: a function whose parameters are the names the
  cell reads that an earlier cell bound (plus those its dynamic resource expressions read), and
  which returns the names it binds. Its inputs that are futures are passed as futures, so a task
  waits only for the tasks it reads from: those are the workflow's edges, and tasks that do not
  read each other's names run at the same time.
- Any other code cell becomes a :class:`DriverStep`. Before it runs, the driver waits for the
  futures it reads, directly or through a notebook function it calls (``gather``).
- A markdown cell becomes a :class:`TextStep` (the first one is the module's docstring).

Choices, each made once here:

- **Imports.** Imports at the top of the notebook (before any other code, each name always bound
  by the same import) move to the top of the module, as a person would write them; star imports
  and ``from __future__`` imports always do (Python allows them nowhere else). A later import
  stays where it is. A task that reads a module bound by an import starts with that import
  rather than taking the module as an argument; a task's own imports are not returned.
- **A task's last expression.** It is kept as a statement (its side effects happen) but its
  value, the notebook's ``Out[]``, is not returned: a task returns only the names it binds.
- **A driver cell's last expression.** A plain value (``total``, ``df.shape``, ``a, b``) is
  printed, standing in for the notebook's ``Out[]``; silenced with ``;`` it is dropped. A call
  is kept as a statement.
- **Names bound on some paths only** (a ``for`` target, a name bound in one branch) are returned
  by a task only if a later cell reads them, since the task fails if such a name is unbound.
- **A task that binds nothing** runs for its side effects; the module waits for it at the end.
  Side effects through files are not edges: a cell that reads a file a task writes must also read
  one of that task's names (or be a driver cell after it that reads one).
"""

from __future__ import annotations

import ast
import functools
import keyword
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from taskcell import config
from taskcell.errors import SpecError
from taskcell.export.notebook import Cell, EnvironmentDef, ExportError, Notebook
from taskcell.export.requests import TaskRequest, resolve_request
from taskcell.runner.analysis import analyze_cell
from taskcell.spec import PROFILES, Environment, Resources, check_limits

__all__ = ["DriverStep", "Namer", "Step", "TaskStep", "TextStep", "Workflow", "plan_workflow"]

_HISTORY = re.compile(r"_+|_i+|_\d+|_i\d+|In|Out|_oh|_ih|_dh")


@dataclass(frozen=True)
class TextStep:
    """A markdown cell, kept as comments in the driver."""

    cell: Cell
    text: str


@dataclass(frozen=True)
class DriverStep:
    """A code cell the driver runs.

    Attributes
    ----------
    code
        The cell's Python, hoisted imports removed, its last expression printed or dropped.
    gather
        Names holding futures whose values the cell needs, in order.
    imports
        Import statements to run first: modules a task cell imported that this cell reads.
    """

    cell: Cell
    code: str
    gather: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()


@dataclass(frozen=True)
class TaskStep:
    """A ``%%task`` cell as a task function and its call.

    Attributes
    ----------
    function
        The function's name (``--name``, else ``compute_<first output>``, else ``cell_<n>``).
    params
        The names it takes, in the order the cell reads them.
    returns
        The names it returns (one value, or a tuple when several).
    body
        The cell's Python, hoisted imports removed.
    local_imports
        Import statements the function starts with (modules it reads).
    gather
        Futures the driver must wait for before the call: those read by a resource expression
        or by a notebook function the task receives.
    deletes
        Names the cell deletes, which the driver deletes too.
    request
        What the cell asks for.
    environment
        The ``%task_env`` definition its ``--env`` names (the latest before the cell).
    after
        Positions (in :attr:`Workflow.steps`) of the task steps whose results it reads.
    """

    cell: Cell
    function: str
    params: tuple[str, ...]
    returns: tuple[str, ...]
    body: str
    request: TaskRequest
    local_imports: tuple[str, ...] = ()
    gather: tuple[str, ...] = ()
    deletes: tuple[str, ...] = ()
    after: tuple[int, ...] = ()
    environment: EnvironmentDef | None = None


Step = TextStep | DriverStep | TaskStep


@dataclass(frozen=True)
class Workflow:
    """The plan of a notebook's workflow module; targets render it.

    Attributes
    ----------
    docstring
        The module docstring: the first markdown cell, or a sentence naming the notebook.
    imports
        Import statements for the top of the module, in notebook order (``__future__`` first).
    environments
        The ``%task_env`` environments the task cells use.
    steps
        Every cell, in order.
    notes
        What could not be carried as is, one sentence each naming the cell.
    names
        Every name the notebook binds or reads; module-level names must avoid them.
    """

    docstring: str
    imports: tuple[str, ...]
    environments: tuple[EnvironmentDef, ...]
    steps: tuple[Step, ...]
    notes: tuple[str, ...] = ()
    names: frozenset[str] = frozenset()

    @property
    def tasks(self) -> list[TaskStep]:
        """The task steps, in order."""
        return [step for step in self.steps if isinstance(step, TaskStep)]


class Namer:
    """Hands out module-level names that clash with no notebook name, keyword or builtin."""

    def __init__(self, taken: Iterable[str]) -> None:
        import builtins

        self.taken = set(taken) | set(dir(builtins)) | set(keyword.kwlist)

    def fresh(self, preferred: str, alternative: str | None = None) -> str:
        """``preferred`` as an identifier, else ``alternative``, else that with ``_2``, ``_3``..."""

        def clean(text: str) -> str:
            name = re.sub(r"\W+", "_", text).strip("_") or "task"
            return f"task_{name}" if name[0].isdigit() else name

        first = clean(preferred)
        second = clean(alternative) if alternative else first
        candidates = [first, second] + [f"{second}_{i}" for i in range(2, 1000)]
        for candidate in candidates:
            if candidate not in self.taken:
                self.taken.add(candidate)
                return candidate
        raise AssertionError("unreachable: a thousand names taken")  # pragma: no cover


# -- imports ------------------------------------------------------------------------------------


@dataclass
class _Imports:
    """The whole-line, top-level import statements of one cell."""

    statements: list[ast.stmt] = field(default_factory=list)
    # name -> the single-alias import text that binds it (its last binding in the cell)
    names: dict[str, str] = field(default_factory=dict)
    # names the cell binds only through those imports
    only: set[str] = field(default_factory=set)


def _alias_text(stmt: ast.Import | ast.ImportFrom, alias: ast.alias) -> tuple[str, str]:
    if isinstance(stmt, ast.Import):
        name = alias.asname or alias.name.partition(".")[0]
        text = f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
        return name, text
    module = "." * stmt.level + (stmt.module or "")
    text = f"from {module} import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
    return alias.asname or alias.name, text


def _whole_lines(tree: ast.Module) -> list[bool]:
    """For each top-level statement: does it have its lines to itself?"""
    body = tree.body
    alone = []
    for i, stmt in enumerate(body):
        before = i > 0 and (body[i - 1].end_lineno or 0) >= stmt.lineno
        after = i + 1 < len(body) and body[i + 1].lineno <= (stmt.end_lineno or stmt.lineno)
        alone.append(not (before or after))
    return alone


def _cell_imports(cell: Cell, tree: ast.Module) -> _Imports:
    found = _Imports()
    for stmt, alone in zip(tree.body, _whole_lines(tree), strict=True):
        if not alone or not isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(stmt, ast.ImportFrom) and (stmt.module == "__future__" or stmt.level):
            continue
        if any(alias.name == "*" for alias in stmt.names):
            continue
        found.statements.append(stmt)
        for alias in stmt.names:
            name, text = _alias_text(stmt, alias)
            found.names[name] = text
    if found.statements:
        rest = _remove(cell.code, tree, found.statements)
        others = set(analyze_cell(rest).outputs)
        found.only = {name for name in found.names if name not in others}
    return found


def _remove(code: str, tree: ast.Module, statements: Iterable[ast.stmt]) -> str:
    """``code`` without the given top-level statements (each on lines of its own)."""
    drop: set[int] = set()
    for stmt in statements:
        drop.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    lines = code.splitlines()
    return "\n".join(line for i, line in enumerate(lines, 1) if i not in drop) + "\n"


def _special_imports(tree: ast.Module) -> list[ast.stmt]:
    """Star and ``__future__`` imports: Python allows them only at a module's top."""
    return [
        stmt
        for stmt in tree.body
        if isinstance(stmt, ast.ImportFrom)
        and (stmt.module == "__future__" or any(a.name == "*" for a in stmt.names))
    ]


# -- driver cells -------------------------------------------------------------------------------

_PURE = (ast.Name, ast.Constant, ast.Attribute, ast.Subscript, ast.Tuple, ast.List, ast.Slice,
         ast.BinOp, ast.UnaryOp, ast.Compare, ast.expr_context, ast.operator, ast.unaryop,
         ast.cmpop)  # fmt: skip


def _is_plain_value(node: ast.expr) -> bool:
    """An expression that only reads values (no call): showing it has no side effect."""
    return all(isinstance(n, _PURE) for n in ast.walk(node))


def _show_last_value(cell: Cell, code: str) -> str:
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


def _drop_last_value(code: str) -> str:
    """A task body without a trailing plain value: it would only have been the cell's Out[]."""
    found = _trailing_plain_value(code)
    if found is None:
        return code
    tree, last = found
    return _remove(code, tree, [last])


def _trailing_plain_value(code: str) -> tuple[ast.Module, ast.Expr] | None:
    """The cell's last statement when it is a plain value on lines of its own, with the tree."""
    tree = ast.parse(code)
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return None
    last = tree.body[-1]
    if not _whole_lines(tree)[-1] or not _is_plain_value(last.value):
        return None
    return tree, last


def _definitions(code: str, tree: ast.Module) -> dict[str, tuple[str, ...]]:
    """Functions and classes a driver cell defines -> the global names their bodies read."""
    defined = {}
    for stmt in tree.body:
        target = None
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            target = stmt.name
        elif (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Lambda)
        ):
            target = stmt.targets[0].id
        if target is not None:
            segment = ast.get_source_segment(code, stmt) or ast.unparse(stmt)
            defined[target] = analyze_cell(segment).inputs
    return defined


def _check_no_global(cell: Cell, tree: ast.Module) -> None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Global):
                    names = ", ".join(inner.names)
                    raise ExportError(
                        f"{cell.label}: function {node.name}() declares `global {names}`; the "
                        f"exported module keeps the notebook's names inside main(), where a "
                        f"function cannot rebind them. Return the new value instead"
                    )


def _check_no_await(cell: Cell, tree: ast.Module) -> None:
    """IPython runs a cell's top-level ``await``; a module function cannot (outside async def)."""
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, (ast.Await, ast.AsyncFor, ast.AsyncWith)) or (
            isinstance(node, ast.comprehension) and node.is_async
        ):
            raise ExportError(
                f"{cell.label}: top-level `await` (line {getattr(node, 'lineno', '?')}) runs only "
                f"in IPython; wrap the code in an async function and call asyncio.run(...)"
            )
        stack.extend(ast.iter_child_nodes(node))


_STRAIGHT = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Import, ast.ImportFrom,
             ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Pass, ast.Delete)  # fmt: skip


def _maybe_unbound(code: str, tree: ast.Module, outputs: tuple[str, ...]) -> set[str]:
    """Outputs that some path through the cell leaves unbound (loop targets, one branch)."""
    if not outputs:
        return set()
    if all(isinstance(stmt, _STRAIGHT) for stmt in tree.body) and not any(
        isinstance(node, (ast.NamedExpr, ast.Delete)) for node in ast.walk(tree)
    ):
        return set()  # straight-line code binds every name it binds
    probe = analyze_cell(code + "\n(" + ", ".join(outputs) + ",)\n")
    return set(probe.inputs) & set(outputs)


# -- the plan -----------------------------------------------------------------------------------


@dataclass
class _Binding:
    """What the driver holds under a name at a point of the notebook."""

    kind: str  # "value" | "future" | "module"
    import_text: str | None = None  # for "module": the import that binds it
    in_driver: bool = True  # for "module": whether main() has run that import
    producer: int | None = None  # for "future": position of the task step


def plan_workflow(notebook: Notebook, presets: Mapping[str, Resources] | None = None) -> Workflow:
    """Plan the workflow module of a notebook (see the module docstring for the rules).

    Parameters
    ----------
    notebook
        From :func:`~taskcell.export.notebook.read_notebook`.
    presets
        The presets ``%%task`` lines may name; ``taskcell.config.presets()`` by default.

    Returns
    -------
    Workflow

    Raises
    ------
    ExportError
        A bad request, a resource expression reading a name no earlier cell binds, a request
        over the configured platform's limits (``taskcell.platform``), a notebook function
        using ``global``, or a top-level ``await``; the message names the cell.
    """
    return _Planner(notebook, config.presets() if presets is None else presets).plan()


class _Planner:
    """Walks the cells in order, keeping what the driver holds under each name."""

    def __init__(self, notebook: Notebook, presets: Mapping[str, Resources]) -> None:
        self.notebook = notebook
        self.presets = presets
        cells = notebook.cells
        self.trees = {c.number: ast.parse(c.code) for c in cells if c.kind != "markdown"}
        self.imports = {
            n: _cell_imports(c, self.trees[n]) for c in cells if (n := c.number) in self.trees
        }
        self.hoisted, self.hoisted_statements = _hoisting(cells, self.trees, self.imports)
        self.notes: list[str] = [note for cell in cells for note in cell.notes]
        # Every name the notebook binds or reads, and those read after each cell.
        self.names: set[str] = set(self.hoisted)
        self.read_after: dict[int, set[str]] = {}
        later: set[str] = set()
        for cell in reversed(cells):
            self.read_after[cell.number] = set(later)
            reads = {*cell.analysis.inputs, *_expression_names(cell)}
            later |= reads
            self.names |= reads | set(cell.analysis.outputs)
        self.state: dict[str, _Binding] = {}
        self.definitions: dict[str, tuple[str, ...]] = {}  # driver functions -> names they read
        self.environments: dict[str, Environment] = {}
        self.env_defs: dict[str, EnvironmentDef] = {}
        self.used_envs: dict[EnvironmentDef, None] = {}
        self.steps: list[Step] = []
        self.docstring = ""
        self.namer = Namer(self.names)
        self.platform = config.get("platform")

    def plan(self) -> Workflow:
        for cell in self.notebook.cells:
            if cell.kind == "markdown":
                self._markdown(cell)
                continue
            code = self._prepare(cell)
            if cell.task is None:
                self._driver(cell, code)
            else:
                self._task(cell, code)
        docstring = self.docstring
        if not docstring:
            where = f" {self.notebook.path}" if self.notebook.path else ""
            docstring = f"Workflow exported from the notebook{where} by taskcell."
        module_imports = list(self.hoisted_statements)
        uses_display = "display" not in self.state and any(
            isinstance(node, ast.Name) and node.id == "display" and isinstance(node.ctx, ast.Load)
            for tree in self.trees.values()
            for node in ast.walk(tree)
        )
        if uses_display:
            module_imports.append("from IPython.display import display")
            self.names.add("display")
        return Workflow(
            docstring=docstring,
            imports=tuple(module_imports),
            environments=tuple(self.used_envs),
            steps=tuple(self.steps),
            notes=tuple(self.notes),
            names=frozenset(self.names),
        )

    # -- helpers --------------------------------------------------------------------------------

    def _needed(self, start: Iterable[str]) -> list[str]:
        """The names read directly, and through the notebook functions they name."""
        seen: dict[str, None] = {}
        stack = list(start)
        while stack:
            name = stack.pop(0)
            if name not in seen:
                seen[name] = None
                stack.extend(self.definitions.get(name, ()))
        return [name for name in seen if name not in self.hoisted]

    def _futures(self, candidates: Iterable[str]) -> tuple[str, ...]:
        state = self.state
        return tuple(n for n in candidates if n in state and state[n].kind == "future")

    def _unbind(self, names: Iterable[str]) -> None:
        for name in names:
            self.state.pop(name, None)
            self.definitions.pop(name, None)

    def _markdown(self, cell: Cell) -> None:
        text = cell.source.strip()
        if not text:
            return
        if not self.docstring and not any(isinstance(s, DriverStep | TaskStep) for s in self.steps):
            self.docstring = text
        else:
            self.steps.append(TextStep(cell, text))

    def _prepare(self, cell: Cell) -> str:
        """Checks every code cell passes; its code without the imports that moved to the top."""
        tree = self.trees[cell.number]
        if "global" in cell.code:
            _check_no_global(cell, tree)
        if "await" in cell.code or "async" in cell.code:
            _check_no_await(cell, tree)
        for name in cell.analysis.inputs:
            if _HISTORY.fullmatch(name) and name not in self.state and name not in self.hoisted:
                self.notes.append(
                    f"{cell.label}: reads {name!r}, IPython's output history, which the module "
                    f"does not have"
                )
        for env in cell.environments:
            self.environments[env.name] = Environment(env.name, env.resources)
            self.env_defs[env.name] = env
        found = self.imports[cell.number]
        removed = [s for s in found.statements if _statement_hoisted(s, self.hoisted)]
        removed += _special_imports(tree)
        return _remove(cell.code, tree, removed) if removed else cell.code

    # -- cells ----------------------------------------------------------------------------------

    def _driver(self, cell: Cell, code: str) -> None:
        code = _show_last_value(cell, code)
        unchanged = code == cell.code
        analysis = cell.analysis if unchanged else analyze_cell(code)
        reads = self._needed(analysis.inputs)
        run_imports = []
        for name in reads:
            binding = self.state.get(name)
            if binding and binding.kind == "module" and not binding.in_driver:
                run_imports.append(binding.import_text or "")
                binding.in_driver = True
        gather = self._futures(reads)
        for name in gather:
            self.state[name] = _Binding("value")
        if code.strip() or run_imports:
            self.steps.append(DriverStep(cell, code, gather, tuple(run_imports)))
        only = self.imports[cell.number]
        for name in analysis.outputs:
            text = only.names[name] if name in only.only else None
            self.state[name] = _Binding("module", text) if text else _Binding("value")
            self.definitions.pop(name, None)
        if analysis.functions or analysis.classes or "lambda" in code:
            tree = self.trees[cell.number] if unchanged else ast.parse(code)
            self.definitions.update(_definitions(code, tree))
        self._unbind(analysis.deleted)

    def _task(self, cell: Cell, code: str) -> None:
        request = resolve_request(cell, self.presets, self.environments)
        environment = self.env_defs.get(request.env) if request.env is not None else None
        if environment is not None:
            self.used_envs[environment] = None
        if self.platform:
            _check_platform(cell, request, self.platform)
        code = _drop_last_value(code)
        unchanged = code == cell.code
        analysis = cell.analysis if unchanged else analyze_cell(code)
        state, hoisted = self.state, self.hoisted

        params: list[str] = []
        local_imports: list[str] = []
        for name in analysis.inputs:
            binding = state.get(name)
            if name in hoisted or binding is None:
                continue  # a module global, or unbound here (the cell fails as in the notebook)
            if binding.kind == "module":
                local_imports.append(binding.import_text or "")
            else:
                params.append(name)
        expression_names = [n for n in _expression_names(cell) if n not in hoisted]
        for name in expression_names:
            if name not in state:
                field = next(f for f, text in request.dynamic.items() if name in text)
                raise ExportError(
                    f"{cell.label}: --{field} {request.dynamic[field]!r} reads {name!r}, which "
                    f"no cell before it binds"
                )
            if name not in params:
                params.append(name)

        # Resource expressions need values, and so do notebook functions' closures.
        through_functions = self._needed(p for p in params if p in self.definitions)
        gather = self._futures([*expression_names, *through_functions])
        after = {
            state[n].producer
            for n in [*params, *gather]
            if n in state and state[n].kind == "future" and state[n].producer is not None
        }
        for name in gather:
            state[name] = _Binding("value")

        only = self.imports[cell.number].only
        tree = self.trees[cell.number] if unchanged else ast.parse(code)
        maybe = _maybe_unbound(code, tree, analysis.outputs)
        returns = tuple(
            n
            for n in analysis.outputs
            if n not in hoisted
            and n not in only
            and (n not in maybe or n in self.read_after[cell.number])
        )
        assert cell.task is not None
        preferred = cell.task.name or (
            f"compute_{returns[0]}" if returns else f"cell_{cell.number}"
        )
        position = len(self.steps)
        self.steps.append(
            TaskStep(
                cell,
                self.namer.fresh(preferred, f"{preferred}_task"),
                tuple(params),
                returns,
                code,
                request,
                tuple(dict.fromkeys(local_imports)),
                gather,
                tuple(n for n in analysis.deleted if n in state and n not in analysis.outputs),
                tuple(sorted(a for a in after if a is not None)),
                environment,
            )
        )
        for name in analysis.outputs:
            if name in only and name not in hoisted:
                import_text = self.imports[cell.number].names[name]
                state[name] = _Binding("module", import_text, in_driver=False)
            elif name in returns:
                state[name] = _Binding("future", producer=position)
            self.definitions.pop(name, None)
        self._unbind(n for n in analysis.deleted if n not in analysis.outputs)


def _expression_names(cell: Cell) -> tuple[str, ...]:
    """Names a task cell's dynamic resource expressions read (without resolving the request)."""
    if cell.task is None or not cell.task.fields:
        return ()
    try:
        return _fields_names(tuple(cell.task.fields.items()))
    except SpecError as e:
        raise ExportError(f"{cell.label}: {e}") from e


@functools.lru_cache(maxsize=1024)
def _fields_names(fields: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    from taskcell.runner.task_line import is_dynamic
    from taskcell.spec import Expression

    found: dict[str, None] = {}
    for name, text in fields:
        if is_dynamic(name, text):
            names = Expression(text).names
            for node in ast.walk(ast.parse(text.strip(), mode="eval")):
                if isinstance(node, ast.Name) and node.id in names:
                    found.setdefault(node.id)
    return tuple(found)


def _check_platform(cell: Cell, request: TaskRequest, platform: str) -> None:
    try:
        check_limits(request.resources, PROFILES.get(platform, platform))
    except SpecError as e:
        raise ExportError(f"{cell.label}: {e}") from e


def _statement_hoisted(stmt: ast.stmt, hoisted: set[str]) -> bool:
    assert isinstance(stmt, (ast.Import, ast.ImportFrom))
    return all(_alias_text(stmt, alias)[0] in hoisted for alias in stmt.names)


def _hoisting(
    cells: tuple[Cell, ...], trees: Mapping[int, ast.Module], imports: Mapping[int, _Imports]
) -> tuple[set[str], list[str]]:
    """The names whose imports move to the module's top, and those import statements."""
    # Where the notebook's import prologue ends: the first driver statement that is not an
    # import, or the first task cell.
    prologue: set[int] = set()  # ids of statements in it
    open_ = True
    texts: dict[str, set[str | None]] = {}
    deleted: set[str] = set()
    first_in_prologue: dict[str, bool] = {}
    for cell in cells:
        if cell.kind == "markdown":
            continue
        found = imports[cell.number]
        if cell.task is not None:
            open_ = False
        else:
            for stmt in trees[cell.number].body:
                if open_ and stmt in found.statements:
                    prologue.add(id(stmt))
                elif not isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    open_ = False
        for name in cell.analysis.outputs:
            text = found.names.get(name) if name in found.only else None
            texts.setdefault(name, set()).add(text)
            if name not in first_in_prologue:
                stmt_ids = {
                    id(s)
                    for s in found.statements
                    if any(_alias_text(s, a)[0] == name for a in s.names)
                }
                first_in_prologue[name] = bool(stmt_ids) and stmt_ids <= prologue
        deleted.update(cell.analysis.deleted)
    hoisted = {
        name
        for name, seen in texts.items()
        if len(seen) == 1
        and None not in seen
        and name not in deleted
        and first_in_prologue.get(name, False)
    }
    # A statement moves only if every name it binds does; drop names tied to one that stays.
    changed = True
    while changed:
        changed = False
        for found in imports.values():
            for stmt in found.statements:
                aliases = [_alias_text(stmt, a)[0] for a in stmt.names]
                if any(a in hoisted for a in aliases) and not all(a in hoisted for a in aliases):
                    hoisted.difference_update(aliases)
                    changed = True
    statements: dict[str, None] = {}
    for cell in cells:
        if cell.kind == "markdown":
            continue
        tree = trees[cell.number]
        for stmt in _special_imports(tree):
            statements.setdefault(ast.get_source_segment(cell.code, stmt) or ast.unparse(stmt))
        for stmt in imports[cell.number].statements:
            if cell.task is None and id(stmt) in prologue and _statement_hoisted(stmt, hoisted):
                statements.setdefault(ast.get_source_segment(cell.code, stmt) or ast.unparse(stmt))
    future = [s for s in statements if s.startswith("from __future__")]
    return hoisted, future + [s for s in statements if s not in future]
