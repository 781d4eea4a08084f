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

What each cell reads, binds and deletes is the one cell analysis
(:func:`taskcell.runner.analysis.analyze_cell`), which ``%%task`` uses too. Choices, each made
once (the code of the first three lives in :mod:`.hoisting` and :mod:`.cell_code`, what a module
cannot do is refused or noted by :mod:`.checks`):

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
from dataclasses import dataclass

from taskcell import config
from taskcell.errors import SpecError
from taskcell.export import checks
from taskcell.export.cell_code import (
    drop_last_value,
    maybe_unbound,
    remove_statements,
    show_last_value,
)
from taskcell.export.hoisting import cell_imports, hoisting, special_imports, statement_hoisted
from taskcell.export.notebook import Cell, EnvironmentDef, ExportError, Notebook
from taskcell.export.requests import TaskRequest, resolve_request
from taskcell.runner.analysis import analyze_cell
from taskcell.spec import Environment, Resources

__all__ = ["DriverStep", "Namer", "Step", "TaskStep", "TextStep", "Workflow", "plan_workflow"]


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


#: Top-level statements that may define a function (``def``, ``f = lambda: ...``) or a class.
_DEFINING = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)


def _definitions(code: str, tree: ast.Module) -> dict[str, tuple[str, ...]]:
    """Functions and classes a driver cell defines -> the global names their bodies read."""
    defined: dict[str, tuple[str, ...]] = {}
    for stmt in tree.body:
        if isinstance(stmt, _DEFINING):
            segment = ast.get_source_segment(code, stmt) or ast.unparse(stmt)
            analysis = analyze_cell(segment)
            for name in (*analysis.functions, *analysis.classes):
                defined[name] = analysis.inputs
    return defined


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
            n: cell_imports(c, self.trees[n]) for c in cells if (n := c.number) in self.trees
        }
        self.hoisted, self.hoisted_statements = hoisting(cells, self.trees, self.imports)
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
        if "display" not in self.state and checks.reads_display(self.trees.values()):
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
            checks.check_no_global(cell, tree)
        if "await" in cell.code or "async" in cell.code:
            checks.check_no_await(cell, tree)
        self.notes += checks.history_notes(cell, [*self.state, *self.hoisted])
        for env in cell.environments:
            self.environments[env.name] = Environment(env.name, env.resources)
            self.env_defs[env.name] = env
        found = self.imports[cell.number]
        removed: list[ast.stmt] = [
            s for s in found.statements if statement_hoisted(s, self.hoisted)
        ]
        removed += special_imports(tree)
        return remove_statements(cell.code, tree, removed) if removed else cell.code

    # -- cells ----------------------------------------------------------------------------------

    def _driver(self, cell: Cell, code: str) -> None:
        code = show_last_value(cell, code)
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
            checks.check_platform(cell, request, self.platform)
        code = drop_last_value(code)
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
        maybe = maybe_unbound(code, tree, analysis.outputs)
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
    """The task's names the expressions read, in the order they are read (the cell analysis's)."""
    from taskcell.runner.task_line import is_dynamic
    from taskcell.spec import Expression

    found: dict[str, None] = {}
    for name, text in fields:
        if is_dynamic(name, text):
            names = Expression(text).names
            found.update(dict.fromkeys(n for n in analyze_cell(text.strip()).inputs if n in names))
    return tuple(found)
