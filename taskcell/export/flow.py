"""A notebook's data flow as a workflow plan, which each target renders.

The plan walks the cells in notebook order, as the kernel ran them, and records for each name
whether the driver holds its value, a module, or the result of a task it has not waited for:

- A ``%%task`` cell becomes a :class:`TaskStep`: a function whose parameters are the names the
  cell reads that an earlier cell bound (plus those its dynamic resource expressions read), and
  which returns the names it binds and the notebook's objects it changes in place
  (``results.append(x)``, ``df["c"] = ...``, ``model.fit(X)``): the driver makes its own object
  take the new state (:mod:`taskcell.runner.inplace`), so every other name for it sees the
  change, as ``%%task`` does. Its ``Out[]`` is shown where it runs.
- Any other code cell becomes a :class:`DriverStep`, its ``Out[]`` shown as IPython writes it.
- A markdown cell becomes a :class:`TextStep` (the first one is the module's docstring).

What each cell reads, binds, deletes and changes is the one cell analysis
(:func:`taskcell.runner.analysis.analyze_cell`), which ``%%task`` uses too. Choices, each made
once (:mod:`.hoisting` for imports, :mod:`.cell_code` for edits, :mod:`.checks` for what a module
cannot do):

- **Imports.** Imports at the top of the notebook (before any other code, each name always bound
  by the same import) move to the top of the module; ``from __future__`` imports always do. A
  later import stays where it is, and so does every star import, run where its cell ran it
  (``exec("from m import *", globals())``: Python allows no star import in a function). A task
  that reads a module bound by an import starts with that import rather than taking the module
  as an argument. A ``flyte`` or ``latch`` task, which may run in a process of its own, starts
  with the star imports before its cell, where that process has not run them
  (:func:`~taskcell.export.standalone.star_import`).
- **Scoping.** The driver's names are the module's globals (its function declares them
  ``global``), as a notebook's are: a cell that reads ``sum`` before a later one binds it reads
  the builtin. A ``global`` statement at a cell's top level, which does nothing there, is left
  as ``pass``. The module's own machinery has private names (``_show``, ``_flyte``), which no
  star import or notebook name rebinds.
- **Process-wide state.** Where the notebook imports numpy, pandas, matplotlib, scikit-learn or
  ``random``, the state its cells share (seeded generators, options, style) travels to each task
  and, from a task that reads one of those modules, back (:attr:`TaskStep.changes_state`).
- **A Dask cluster the notebook makes** (``client = Client()``): the ``dask`` target keeps it,
  and runs a task cell that uses it in the driver, where its Dask work goes to that cluster; in
  the ``flyte`` and ``latch`` targets each task that uses it makes a cluster of its own on
  127.0.0.1, with the notebook's arguments, and a real client of it
  (:func:`~taskcell.export.carriers.local_dask`).
- **Names bound on some paths only** (a ``for`` target, a name bound in a branch) are returned
  by a task only if a later cell reads them, since the task fails if such a name is unbound.
- **Values that cannot travel**: a generator a cell binds and another task reads is refused.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from taskcell import config
from taskcell.errors import SpecError
from taskcell.export import checks
from taskcell.export.cell_code import (
    Edit,
    apply_edits,
    function_scope_edits,
    last_value_edit,
    star_imports,
)
from taskcell.export.codegen import Namer
from taskcell.export.hoisting import CellImports, Hoisting, future_imports, statement_hoisted
from taskcell.export.ipython_syntax import Helpers
from taskcell.export.notebook import Cell, EnvironmentDef, ExportError, Notebook, problems_error
from taskcell.export.requests import TaskRequest, dynamic_fields, expression, resolve_request
from taskcell.export.targets import ExportTarget, export_target
from taskcell.export.value_types import ANY, FRAME_MAKERS, IMMUTABLE, Type, cell_types
from taskcell.runner.analysis import CellAnalysis
from taskcell.spec import Environment, Resources

__all__ = [
    "DriverStep",
    "Namer",
    "Step",
    "TaskStep",
    "TextStep",
    "Workflow",
    "plan_workflow",
]

#: Modules whose process-wide state the notebook's cells share (see the module docstring).
STATE_MODULES = frozenset({"random", "numpy", "pandas", "matplotlib", "sklearn", "seaborn"})
#: Modules that draw figures, which the notebook's inline backend closes after each cell.
FIGURE_MODULES = frozenset({"matplotlib", "seaborn"})


@dataclass(frozen=True)
class TextStep:
    """A markdown cell, kept as comments in the driver."""

    cell: Cell
    text: str


@dataclass(frozen=True, kw_only=True)
class DriverStep:
    """A code cell the driver runs.

    Attributes
    ----------
    code
        The cell's Python: hoisted imports removed, its ``Out[]`` shown, its figures closed.
    imports
        Import statements to run first: modules a task cell imported that this cell reads.
    star_imports
        Lines to run first where the cell runs in a process of its own (a Latch task): the
        notebook's star imports before it (:func:`~taskcell.export.standalone.star_import`).
    changes_state
        It reads a module whose process-wide state it may change (see the module docstring).
    """

    cell: Cell
    code: str
    imports: tuple[str, ...] = ()
    star_imports: tuple[str, ...] = ()
    changes_state: bool = False


class NameUses:
    """Where each name is read and where it is bound, in order: whether the value a step binds
    is read later. A later cell that binds a name before reading it reads its own value, so it
    reads no earlier one (what it reads before binding is
    :attr:`~taskcell.runner.analysis.CellAnalysis.inputs`)."""

    def __init__(self) -> None:
        self.uses: dict[str, list[tuple[int, bool]]] = {}  # name -> (position, reads it)

    def add(self, position: int, reads: Iterable[str], analysis: CellAnalysis) -> None:
        """The names a step reads first, and those its cell binds on every path."""
        read = set(reads)
        certain = set(analysis.outputs) - set(analysis.maybe_unbound) - read
        for name in read:
            self.uses.setdefault(name, []).append((position, True))
        for name in certain:
            self.uses.setdefault(name, []).append((position, False))

    def read_after(self, position: int, name: str) -> bool:
        """Whether a step after ``position`` reads the value ``name`` has there."""
        uses = self.uses.get(name, [])
        i = bisect.bisect_right(uses, (position, True))
        return i < len(uses) and uses[i][1]


@dataclass(frozen=True, kw_only=True)
class TaskStep:
    """A ``%%task`` cell as a task function and its call.

    Attributes
    ----------
    function
        The function's name (``--name``, else ``compute_<first output>``, else ``cell_<n>``).
    params
        The names it takes, in the order the cell reads them.
    returns
        The names it returns (one value, or a tuple when several), those in :attr:`updates`
        first.
    updates
        Those of :attr:`returns` that are the notebook's objects the cell changes in place.
    body
        The cell's Python: hoisted imports removed, its ``Out[]`` shown, its figures closed.
    request
        What the cell asks for.
    local_imports
        Import statements the function starts with (modules it reads).
    star_imports
        Lines it starts with in a process of its own (``flyte``, ``latch``): the notebook's
        star imports before its cell (:func:`~taskcell.export.standalone.star_import`).
    needs
        Names whose values a call needs at once: read by a resource expression, or by a
        notebook function the task receives.
    deletes
        Names the cell deletes, which the driver deletes too.
    after
        Positions (in :attr:`Workflow.steps`) of the task steps whose results it reads.
    environment
        The ``%task_env`` definition its ``--env`` names (the latest before the cell).
    changes_state
        It reads a module whose process-wide state it may change (see the module docstring).
    types
        The types of its parameters and of the values it returns, as far as the code makes
        them certain (:mod:`taskcell.export.value_types`); a name not there is of any type.
    """

    cell: Cell
    function: str
    params: tuple[str, ...]
    returns: tuple[str, ...]
    body: str
    request: TaskRequest
    updates: tuple[str, ...] = ()
    local_imports: tuple[str, ...] = ()
    star_imports: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    deletes: tuple[str, ...] = ()
    after: tuple[int, ...] = ()
    environment: EnvironmentDef | None = None
    changes_state: bool = False
    types: Mapping[str, Type] = field(default_factory=dict)


Step = TextStep | DriverStep | TaskStep


@dataclass(frozen=True, kw_only=True)
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
    helpers
        The names of the helpers the module's code calls
        (:data:`taskcell.export.ipython_syntax.HELPER_SOURCES` and
        :mod:`taskcell.export.standalone`).
    notes
        What was left out, one sentence each naming the cell.
    names
        Every name the notebook binds or reads; module-level names must avoid them.
    carries_state
        Tasks take the process-wide state (see the module docstring).
    ipython
        The notebook displays values or captures output: the module makes an IPython shell.
    callables
        How the code calls ``pathlib.Path`` and pandas' DataFrame makers, for the types
        (:mod:`taskcell.export.value_types`).
    """

    docstring: str
    imports: tuple[str, ...]
    environments: tuple[EnvironmentDef, ...]
    steps: tuple[Step, ...]
    helpers: Helpers = field(default_factory=lambda: Helpers(()))
    notes: tuple[str, ...] = ()
    names: frozenset[str] = frozenset()
    carries_state: bool = False
    ipython: bool = False
    callables: frozenset[str] = frozenset({"pathlib.Path"})

    @property
    def tasks(self) -> list[TaskStep]:
        """The task steps, in order."""
        return [step for step in self.steps if isinstance(step, TaskStep)]

    def namer(self, *more: Iterable[str]) -> Namer:
        """A namer for module-level names: none clashes with the notebook's or the helpers'."""
        taken = set(self.names) | set(self.helpers.names.values())
        for names in more:
            taken.update(names)
        return Namer(taken)


@dataclass(frozen=True, kw_only=True)
class _Takes:
    """What a task step takes: its parameters, the imports it starts with, the names whose
    values a call needs at once, the steps it comes after, and the names the notebook's
    functions it takes change in place (name -> function)."""

    params: list[str]
    local_imports: tuple[str, ...]
    needs: tuple[str, ...]
    after: tuple[int, ...]
    changed_through: Mapping[str, str]


@dataclass(kw_only=True)
class _Binding:
    """What the driver holds under a name at a point of the notebook."""

    kind: str  # "value" | "future" | "module"
    import_text: str | None = None  # for "module": the import that binds it
    in_driver: bool = True  # for "module": whether main() has run that import
    producer: int | None = None  # for "future": position of the task step
    generator: str | None = None  # the cell that bound it to a generator, if one did


def plan_workflow(
    notebook: Notebook,
    presets: Mapping[str, Resources] | None = None,
    target: str | ExportTarget = "dask",
) -> Workflow:
    """Plan the workflow module of a notebook for a target (see the module docstring).

    Parameters
    ----------
    notebook
        From :func:`~taskcell.export.notebook.read_notebook`.
    presets
        The presets ``%%task`` lines may name; ``taskcell.config.presets()`` by default.
    target
        A name in :data:`~taskcell.export.targets.EXPORT_TARGETS`, or a target itself: the
        traits the plan follows.

    Returns
    -------
    Workflow

    Raises
    ------
    ExportError
        Naming every cell the module cannot carry: a bad request, a resource expression reading
        a name no earlier cell binds, a request over the configured platform's limits
        (``taskcell.platform``), a notebook function using ``global``, a top-level ``await``, a
        value that cannot travel between tasks, IPython syntax a module cannot run.
    """
    known = export_target(target)
    return _NotebookWalk(notebook, config.presets() if presets is None else presets, known).plan()


class _NotebookWalk:
    """Walks the cells in order, keeping what the driver holds under each name.

    A cell's syntax tree lives only while its cell is read: a first pass finds the imports and
    the names each cell reads, a second plans the steps. Memory and time grow with the
    notebook's length, never with its square.
    """

    def __init__(
        self, notebook: Notebook, presets: Mapping[str, Resources], target: ExportTarget
    ) -> None:
        self.notebook, self.presets, self.target = notebook, presets, target
        self.helpers = notebook.helpers
        hoisting = Hoisting()
        self.imports: dict[int, CellImports] = {}
        self.names: set[str] = set()
        self.uses = NameUses()
        self.expression_names: dict[int, tuple[str, ...]] = {}
        self.task_reads: set[str] = set()  # names a task cell reads
        self.task_changes: set[str] = set()  # names a task cell may change in place
        used: set[str] = set()
        for cell in notebook.cells:
            if cell.kind == "markdown":
                continue
            self.imports[cell.number] = hoisting.add(cell, _parse)
            if cell.task is not None:
                self.expression_names[cell.number] = _expression_names(cell)
            reads = {*cell.analysis.inputs, *self.expression_names.get(cell.number, ())}
            if cell.task is not None:
                self.task_reads.update(reads)
                self.task_changes.update(cell.analysis.mutated)
            for _, changed in cell.analysis.function_mutated:  # a task may call the function
                self.task_changes.update(changed)
            self.uses.add(cell.number, reads, cell.analysis)
            self.names |= reads | set(cell.analysis.outputs)
            used.update(cell.analysis.imports)
        self.hoisted, self.hoisted_statements = hoisting.finish()
        self.names |= self.hoisted
        # The module each import binds (top-level name: "np" -> "numpy"), and the import.
        self.modules: dict[str, str] = {}
        self.import_texts: dict[str, str] = {}
        for found in self.imports.values():
            for name, text in found.names.items():
                self.modules.setdefault(name, checks.imported_module(text))
                self.import_texts.setdefault(name, text)
        used = {m.partition(".")[0] for m in [*used, *self.modules.values()]}
        self.carries_state = bool(STATE_MODULES & used)
        self.draws = bool(FIGURE_MODULES & used)
        self.callables = _callables(self.import_texts)
        self.notes: list[str] = [note for cell in notebook.cells for note in cell.notes]
        self.problems: list[str] = list(notebook.problems)
        self.module_globals = self.hoisted | set(self.helpers.names.values())
        self.state: dict[str, _Binding] = {}
        self.types: dict[str, Type] = {}  # what the code makes certain of the names' types
        self.definitions: dict[str, tuple[str, ...]] = {}  # functions -> names they read
        self.changes: dict[str, tuple[str, ...]] = {}  # functions -> names they change
        self.clusters: set[str] = set()  # names holding the notebook's Client or cluster
        self.environments: dict[str, Environment] = {}
        self.env_defs: dict[str, EnvironmentDef] = {}
        self.env_version = 0  # how many environment definitions the walk has met
        self.built: dict[str, TaskRequest] = {}  # requests, by line
        self.built_under = 0
        self.used_envs: dict[EnvironmentDef, None] = {}
        self.steps: list[Step] = []
        self.stars: list[str] = []  # flyte, latch: what a task in a process of its own runs first
        self.docstring = ""
        self.namer = Namer(self.names | set(self.helpers.names.values()))
        self.platform = config.get("platform")

    def plan(self) -> Workflow:
        for cell in self.notebook.cells:
            if cell.kind == "markdown":
                self._markdown(cell)
                continue
            if cell.problems:
                continue  # named already; the cells after it are still checked
            tree = _parse(cell.code)
            self._check(cell)
            if cell.task is not None and not self._in_driver(cell, tree):
                self._task(cell, tree)
            else:
                self._driver(cell, tree)
            self._record_stars(cell, tree)
        if self.problems:
            raise problems_error(self.problems)
        docstring = self.docstring
        if not docstring:
            where = f" {self.notebook.path}" if self.notebook.path else ""
            docstring = f"Workflow exported from the notebook{where} by taskcell."
        module_imports = list(self.hoisted_statements)
        if "display" not in self.names and checks.reads_display(
            c.code for c in self.notebook.cells
        ):
            module_imports.append("from IPython.display import display")
            self.names.add("display")
        return Workflow(
            docstring=docstring,
            imports=tuple(module_imports),
            environments=tuple(self.used_envs),
            steps=tuple(self.steps),
            helpers=self.helpers,
            notes=tuple(self.notes),
            names=frozenset(self.names),
            carries_state=self.carries_state,
            ipython=checks.uses_ipython(self.notebook.cells, self.modules.values()),
            callables=self.callables,
        )

    # -- helpers --------------------------------------------------------------------------------

    def _read_later(self, cell: Cell, name: str) -> bool:
        return self.uses.read_after(cell.number, name)

    def _reach(self, start: Iterable[str]) -> list[str]:
        """The names read directly, and through the notebook functions they name."""
        seen: dict[str, None] = {}
        stack = list(start)
        while stack:
            name = stack.pop()
            if name not in seen:
                seen[name] = None
                stack.extend(self.definitions.get(name, ()))
        return list(seen)

    def _changed_through(self, reached: Iterable[str]) -> dict[str, str]:
        """The notebook's data the notebook functions in ``reached`` change in place when
        called, each with the function that does."""
        found: dict[str, str] = {}
        for function in reached:
            for name in self.changes.get(function, ()):
                binding = self.state.get(name)
                if binding is None or binding.kind == "module" or name in self.definitions:
                    continue
                if name not in self.module_globals and name not in self.clusters:
                    found.setdefault(name, function)
        return found

    def _needed(self, start: Iterable[str]) -> list[str]:
        """:meth:`_reach` without the module's globals (hoisted imports, helpers)."""
        return [name for name in self._reach(start) if name not in self.module_globals]

    def _reads_module(self, names: Iterable[str], modules: frozenset[str]) -> bool:
        """Whether any of ``names`` (or what notebook functions they name read) is bound to
        an import of one of ``modules``."""
        for name in self._reach(names):
            binding = self.state.get(name)
            if name in self.hoisted:
                module = self.modules.get(name, "")
            elif binding is not None and binding.kind == "module" and binding.import_text:
                module = checks.imported_module(binding.import_text)
            else:
                continue
            if module.partition(".")[0] in modules:
                return True
        return False

    def _changes_state(self, cell: Cell) -> bool:
        """Whether a cell may change the process-wide state: it imports or reads a module that
        holds some (see the module docstring)."""
        if not self.carries_state:
            return False
        imported = {module.partition(".")[0] for module in cell.analysis.imports}
        return bool(STATE_MODULES & imported) or self._reads_module(
            cell.analysis.inputs, STATE_MODULES
        )

    def _typed(self, names: Iterable[str]) -> bool:
        """Whether the types of names a cell binds matter: those of what a task reads where
        the target types parameters, else those of what a task changes where it types updates."""
        target = self.target
        wanted = self.task_reads if target.types_params else self.task_changes
        return (target.types_params or target.types_updates) and not wanted.isdisjoint(names)

    def _types_of(self, names: Iterable[str]) -> dict[str, Type]:
        """The types known of ``names``: what a cell reading them starts from."""
        return {name: self.types[name] for name in names if name in self.types}

    def _unbind(self, names: Iterable[str]) -> None:
        for name in names:
            self.state.pop(name, None)
            self.types.pop(name, None)
            self.definitions.pop(name, None)
            self.clusters.discard(name)

    def _markdown(self, cell: Cell) -> None:
        text = cell.source.strip()
        if not text:
            return
        if not self.docstring and not any(isinstance(s, DriverStep | TaskStep) for s in self.steps):
            self.docstring = text
        else:
            self.steps.append(TextStep(cell, text))

    def _check(self, cell: Cell) -> None:
        """What every code cell passes; the environments it defines."""
        self.problems += checks.module_problems(cell)
        self.notes += checks.history_notes(cell, lambda n: n in self.state or n in self.hoisted)
        for env in cell.environments:
            self.environments[env.name] = Environment(env.name, env.resources)
            self.env_defs[env.name] = env
            self.env_version += 1

    def _star(self, cell: Cell, again: bool = True) -> Callable[[str], str] | None:
        """How a task in a process of its own runs a star import of ``cell``
        (:func:`~taskcell.export.standalone.star_import`); None where tasks are pickled with
        the driver's globals."""
        if self.target.ships_functions == "pickle":
            return None
        last = "" if again else ", again=False"

        def run(statement: str) -> str:
            helper = self.helpers("star_import")  # named only where there is a star import
            return f"{helper}(globals(), {cell.number}, {statement!r}{last})"

        return run

    def _record_stars(self, cell: Cell, tree: ast.Module) -> None:
        """The cell's star imports, which each later task runs first in a process of its own."""
        star = self._star(cell, again=False)
        if star is not None:
            self.stars += star_imports(tree, star)

    def _code(self, cell: Cell, tree: ast.Module, setups: list[tuple[ast.stmt, str]]) -> str:
        """The cell's code as the module runs it: the imports that moved to the top taken out,
        the notebook's cluster replaced where the target runs without it, the ``Out[]`` shown,
        the figures closed where it draws."""
        found = self.imports[cell.number]
        removed = [s for s in found.statements if statement_hoisted(s, self.hoisted)]
        edits: list[Edit] = [(s.lineno, s.end_lineno or s.lineno, []) for s in removed]
        edits += [(s.lineno, s.end_lineno or s.lineno, []) for s in future_imports(tree)]
        edits += function_scope_edits(cell.code, tree, self._star(cell))
        if setups and not self.target.keeps_cluster:
            edits += self._without_cluster(cell, setups)
        shown = last_value_edit(
            cell.code, tree, cell.analysis.last_expr_silenced, self.helpers("show")
        )
        if shown is not None:
            edits.append(shown)
        code = apply_edits(cell.code, edits) if edits else cell.code
        if self.draws and self._reads_module(cell.analysis.inputs, FIGURE_MODULES):
            code = code.rstrip("\n") + f"\n{self.helpers('close_figures')}()\n"
        return code

    def _in_driver(self, cell: Cell, tree: ast.Module) -> bool:
        """A task cell run in the driver where the target keeps the notebook's Dask cluster
        there: it uses or makes that cluster."""
        if not self.target.keeps_cluster:
            return False
        uses = [n for n in self._needed(cell.analysis.inputs) if n in self.clusters]
        makes = checks.cluster_setups(tree, self._dask_names())
        if not (uses or makes):
            return False
        what = f"uses the notebook's Dask client {uses[0]!r}" if uses else "makes a Dask cluster"
        self.notes.append(
            f"{cell.label}: {what}, which lives in the driver; the cell runs there, and its Dask "
            f"work on that cluster (its own request is not applied)"
        )
        return True

    def _dask_names(self) -> dict[str, str]:
        """Names bound to Dask's modules or classes (``Client``, ``distributed``...), with the
        module they come from."""
        return {
            name: module
            for name, module in self.modules.items()
            if module.partition(".")[0] in checks.DASK_PACKAGES
        }

    def _without_cluster(self, cell: Cell, setups: list[tuple[ast.stmt, str]]) -> list[Edit]:
        """The notebook's cluster made again in each task that uses it, of the task's own, with
        the notebook's arguments (:func:`~taskcell.export.carriers.local_dask`; the notebook's
        call stays, commented out)."""
        lines = cell.code.splitlines()
        helper = self.helpers("local_dask")
        edits = []
        for stmt, name in setups:
            if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)):
                continue  # what checks.cluster_setups finds is always ``name = call(...)``
            call = stmt.value
            kind = checks.dotted(call.func)[-1]
            arguments = [repr(kind), *map(ast.unparse, [*call.args, *call.keywords])]
            start, end = stmt.lineno, stmt.end_lineno or stmt.lineno
            typed = [f"# {line}".rstrip() for line in lines[start - 1 : end]]
            made = f"{name} = {helper}({', '.join(arguments)})  # taskcell: the task's own cluster"
            edits.append((start, end, [*typed, made]))
            self.notes.append(
                f"{cell.label}: the notebook's Dask cluster ({name!r}) becomes a local cluster of "
                f"the task's own on 127.0.0.1, made with the same arguments"
            )
        return edits

    def _check_travel(self, cell: Cell, names: Iterable[str]) -> None:
        """Refuse a cell that reads a generator another task bound: it cannot travel."""
        for name in names:
            binding = self.state.get(name)
            if binding is not None and binding.generator and binding.generator != cell.label:
                self.problems.append(
                    f"{cell.label}: reads {name!r}, which {binding.generator} binds to a "
                    f"generator; a generator cannot travel between tasks. Bind a list instead "
                    f"({name} = [...])"
                )

    def _request(self, cell: Cell) -> TaskRequest:
        """The cell's request; cells with the same line under the same environments share it."""
        if self.env_version != self.built_under:
            self.built.clear()
            self.built_under = self.env_version
        return resolve_request(cell, self.presets, self.environments, self.built)

    # -- cells ----------------------------------------------------------------------------------

    def _driver(self, cell: Cell, tree: ast.Module) -> None:
        analysis = cell.analysis
        setups = checks.cluster_setups(tree, self._dask_names())
        code = self._code(cell, tree, setups)
        self.clusters.update(name for _, name in setups)
        reads = self._needed(analysis.inputs)
        run_imports = []
        for name in reads:
            binding = self.state.get(name)
            if binding and binding.kind == "module" and not binding.in_driver:
                run_imports.append(binding.import_text or "")
                binding.in_driver = True
        if self.target.checks_travel:
            self._check_travel(cell, reads)
        if code.strip() or run_imports:
            changes = self._changes_state(cell)
            self.steps.append(
                DriverStep(
                    cell=cell,
                    code=code,
                    imports=tuple(run_imports),
                    star_imports=tuple(self.stars),
                    changes_state=changes,
                )
            )
        only = self.imports[cell.number]
        generators = analysis.unpicklable
        set_up = {name for _, name in setups}
        for name in analysis.outputs:
            text = only.names[name] if name in only.only else None
            binding = _Binding(kind="module", import_text=text) if text else _Binding(kind="value")
            binding.generator = cell.label if name in generators else None
            self.state[name] = binding
            self.definitions.pop(name, None)
            if name not in set_up:
                self.clusters.discard(name)
        # What a notebook function reads: at most what its cell reads (one analysis a cell).
        self.definitions.update(
            dict.fromkeys([*analysis.functions, *analysis.classes], analysis.inputs)
        )
        mutating = dict(analysis.function_mutated)
        self.changes.update({name: mutating.get(name, ()) for name in analysis.functions})
        if self._typed(analysis.outputs):
            self.types.update(cell_types(tree, self._types_of(analysis.inputs), self.callables))
        for name in analysis.mutated:
            if name in self.types and self.types[name].kind not in IMMUTABLE:
                self.types[name] = _changed(self.types[name])
        self._unbind(analysis.deleted)

    def _task(self, cell: Cell, tree: ast.Module) -> None:
        """A ``%%task`` cell as a task step: its request, the values it takes and those it gives
        back; a problem found on the way is named and the cell left out."""
        request = self._task_request(cell)
        takes = self._takes(cell, request) if request is not None else None
        if request is None or takes is None:
            return
        updates, returns, types = self._gives(cell, tree, takes)
        assert cell.task is not None
        preferred = cell.task.name or (
            f"compute_{returns[0]}" if returns else f"cell_{cell.number}"
        )
        analysis, state = cell.analysis, self.state
        position = len(self.steps)
        self.steps.append(
            TaskStep(
                cell=cell,
                function=self.namer.fresh(preferred, f"{preferred}_task"),
                params=tuple(takes.params),
                returns=(*updates, *returns),
                body=self._code(cell, tree, []),
                request=request,
                updates=updates,
                local_imports=takes.local_imports,
                star_imports=tuple(self.stars),
                needs=takes.needs,
                deletes=tuple(
                    n for n in analysis.deleted if n in state and n not in analysis.outputs
                ),
                after=takes.after,
                environment=self.env_defs.get(request.env) if request.env is not None else None,
                changes_state=self._changes_state(cell),
                types=types,
            )
        )
        self._bind_results(cell, updates, returns, types, position)

    def _task_request(self, cell: Cell) -> TaskRequest | None:
        """The cell's request, checked against the platform; None when it has a problem."""
        try:
            request = self._request(cell)
        except ExportError as e:
            self.problems.append(str(e))
            return None
        if request.env is not None and request.env in self.env_defs:
            self.used_envs[self.env_defs[request.env]] = None
        if self.platform:
            try:
                checks.check_platform(cell, request, self.platform)
            except ExportError as e:
                self.problems.append(str(e))
        return request

    def _takes(self, cell: Cell, request: TaskRequest) -> _Takes | None:
        """What the task takes: the names it reads, those its resource expressions read, and
        the notebook functions' values they need; None when one cannot be given to it."""
        state, module_globals = self.state, self.module_globals
        params: list[str] = []
        local_imports: list[str] = []
        for name in cell.analysis.inputs:
            binding = state.get(name)
            if name in module_globals or binding is None:
                continue  # a module global, or unbound here (the cell fails as in the notebook)
            if binding.kind == "module":
                local_imports.append(binding.import_text or "")
            else:
                params.append(name)
        expression_names = [
            n for n in self.expression_names[cell.number] if n not in module_globals
        ]
        for name in expression_names:
            if name not in state:
                field = next(f for f, text in request.dynamic.items() if name in text)
                self.problems.append(
                    f"{cell.label}: --{field} {request.dynamic[field]!r} reads {name!r}, which "
                    f"no cell before it binds"
                )
                return None
            if name not in params:
                params.append(name)
        self._check_travel(cell, params)

        # Resource expressions need values, and so do notebook functions' closures.
        through_functions = self._needed(p for p in params if p in self.definitions)
        changed_through = self._changed_through(through_functions)
        if changed_through and self.target.ships_functions == "copy":
            by_function: dict[str, list[str]] = {}
            for name, function in changed_through.items():
                by_function.setdefault(function, []).append(name)
            self.problems += [
                f"{cell.label}: calls {function}(), which changes {', '.join(names)} in place; "
                f"a Flyte task gets its own copies, so the notebook's would not change. Pass "
                f"{', '.join(names)} to {function}() as arguments"
                for function, names in by_function.items()
            ]
            return None
        if self.target.ships_functions == "pickle":  # one pickle: the function and the name
            params += [name for name in changed_through if name not in params]
        needs = tuple(
            n
            for n in dict.fromkeys([*expression_names, *through_functions])
            if n in state and state[n].kind == "future"
        )
        after = {
            state[n].producer
            for n in [*params, *needs]
            if n in state and state[n].kind == "future" and state[n].producer is not None
        }
        return _Takes(
            params=params,
            local_imports=tuple(dict.fromkeys(local_imports)),
            needs=needs,
            after=tuple(sorted(a for a in after if a is not None)),
            changed_through=changed_through,
        )

    def _gives(
        self, cell: Cell, tree: ast.Module, takes: _Takes
    ) -> tuple[tuple[str, ...], list[str], dict[str, Type]]:
        """What the task gives back: the notebook's objects it changes in place (updates), the
        names it binds that the driver keeps (returns), and the types of both and of its
        parameters."""
        analysis = cell.analysis
        only = self.imports[cell.number].only
        types = {p: self.types.get(p, ANY) for p in takes.params}
        changed = dict.fromkeys([*analysis.mutated, *analysis.loops_over, *takes.changed_through])
        updates = tuple(
            n
            for n in changed
            if n in takes.params
            and n not in self.definitions
            and n not in self.clusters
            and types[n].kind not in IMMUTABLE
        )
        outputs = [n for n in analysis.outputs if n not in self.module_globals and n not in only]
        # A name no later cell reads comes back for main()'s results only where every path
        # through the cell binds it: a task fails returning an unbound name.
        unsure, generators = analysis.maybe_unbound, analysis.unpicklable
        returns = [
            n
            for n in outputs
            if n not in updates
            and (
                self._read_later(cell, n)
                or (self.target.returns_results and n not in unsure and n not in generators)
            )
        ]
        for name in returns:
            if name in generators:
                self.problems.append(
                    f"{cell.label}: binds {name!r} to a generator, which cannot travel from a "
                    f"task, and a later cell reads it. Bind a list instead ({name} = [...])"
                )
        typed = self.target.types_returns or self._typed(returns)
        found = cell_types(tree, types, self.callables) if typed else {}
        for name in (*updates, *returns):
            types[name] = found.get(name, _changed(types.get(name, ANY)))
        return updates, returns, types

    def _bind_results(
        self,
        cell: Cell,
        updates: tuple[str, ...],
        returns: list[str],
        types: Mapping[str, Type],
        position: int,
    ) -> None:
        """What the driver holds after the task step at ``position``: futures of its results,
        the modules it imported, nothing for the names it deleted."""
        analysis, state = cell.analysis, self.state
        only = self.imports[cell.number].only
        for name in (*updates, *analysis.outputs):
            if name in only and name not in self.hoisted:
                import_text = self.imports[cell.number].names[name]
                state[name] = _Binding(kind="module", import_text=import_text, in_driver=False)
            elif name in updates or name in returns:
                state[name] = _Binding(kind="future", producer=position)
                self.types[name] = types[name]
            self.definitions.pop(name, None)
        self._unbind(n for n in analysis.deleted if n not in analysis.outputs)


def _callables(import_texts: Mapping[str, str]) -> frozenset[str]:
    """How the code calls ``pathlib.Path`` and pandas' DataFrame makers
    (:mod:`taskcell.export.value_types`): ``Path``, ``pd.DataFrame``, ``pd.read_csv``..."""
    found = {"pathlib.Path"}
    for name, text in import_texts.items():
        module = checks.imported_module(text)
        if text.startswith("from "):
            imported = text.split()[3]
            if (module, imported) == ("pathlib", "Path") or (
                module == "pandas" and imported in FRAME_MAKERS
            ):
                found.add(name)
        elif module == "pandas":
            found.update(f"{name}.{maker}" for maker in FRAME_MAKERS)
        elif module == "pathlib":
            found.add(f"{name}.Path")
    return frozenset(found)


def _changed(t: Type) -> Type:
    """The type of a value after a change in place: a DataFrame stays one; a container's items
    may be of any type."""
    return t if t.kind == "frame" else ANY


def _parse(code: str) -> ast.Module:
    try:
        return ast.parse(code)
    except SyntaxError:  # the cell's problem is named already
        return ast.Module(body=[], type_ignores=[])


def _expression_names(cell: Cell) -> tuple[str, ...]:
    """Names a task cell's dynamic resource expressions read (without resolving the request)."""
    if cell.task is None or not cell.task.fields:
        return ()
    try:
        return _fields_names(tuple(cell.task.fields.items()))
    except SpecError:
        return ()  # the request's own error names the cell


def _fields_names(fields: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """The task's names the expressions read, in the order the text names them."""
    found: dict[str, None] = {}
    for text in dynamic_fields(fields).values():
        names = expression(text).names
        found.update(dict.fromkeys(w for w in _WORD.findall(text) if w in names))
    return tuple(found)


_WORD = re.compile(r"[A-Za-z_]\w*")
