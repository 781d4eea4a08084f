"""A workflow plan recast as a Latch workflow: typed parameters, typed tasks, module-level code.

A Latch (Flyte) workflow body only wires tasks together: it runs once, at registration, on
placeholders, so every line of the notebook that computes must run in a task. From the one
workflow plan (:mod:`taskcell.export.flow`) this module decides, cell by cell:

- **Parameters.** A top-level ``NAME = LITERAL`` in a code cell (a constant, a list or dict of
  them, ``Path("...")``; see :func:`~taskcell.export.value_types.literal_type`), on lines of its
  own, binding a name no other statement binds, becomes a typed parameter of the workflow with
  the notebook's value as its default (a path has none: Latch asks for the file).
- **Module-level code.** A function, class or lambda a code cell defines moves to the top of the
  module, where every task can call it, when the notebook binds its name nowhere else and all it
  reads is there too (imports, literals as module constants, other such definitions). Any other
  definition stays in its cell's task, and the function travels to the tasks that call it as a
  value, as every other value does: a function defined again in a later cell, or rebound
  (``f = dask.delayed(f)``), means what it meant in the notebook. A task that calls such a
  function also takes the notebook names it reads, and makes it read them as they are then
  (:func:`~taskcell.export.standalone.rebound`), as the notebook looks them up at the call.
- **Tasks.** The rest of each code cell becomes a ``small_task`` (``cell_N``), and each
  ``%%task`` cell a task with its request. A task takes the names it reads that a parameter or an
  earlier task bound, and returns those a later cell reads (a code cell also returns what it
  changes in place: ``data.append(x)``, ``df["y"] = ...``), plus the notebook's results. Where
  the notebook imports numpy, pandas, matplotlib, scikit-learn or ``random``, the process-wide
  state its cells share travels from each task that may change it to the tasks after it.
- **Shared objects.** Names a cell binds to objects that may share parts (``alias = results``,
  ``ledger = {"ada": acct}``: a statement binding one reads another) travel together in one
  pickle (``shared_N``), so that a later task's change through one name shows through all, as
  in the notebook.
- **Results.** A name whose last binding no later cell reads, and whose type is known, is an
  output of the workflow, named after it.

Types come from :mod:`taskcell.export.value_types`; a value of unknown type travels as a pickle.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from taskcell.export.cell_code import shares_parts
from taskcell.export.codegen import comment
from taskcell.export.flow import (
    DriverStep,
    Namer,
    NameUses,
    Step,
    TaskStep,
    TextStep,
    Workflow,
)
from taskcell.export.hoisting import alias_text
from taskcell.export.notebook import Cell
from taskcell.export.value_types import (
    ANY,
    IMMUTABLE,
    Type,
    cell_types,
    has_path,
    is_known,
    literal_type,
)
from taskcell.runner.analysis import analyze_cell, analyze_statements

__all__ = ["LatchPlan", "LatchTask", "Param", "listed", "plan_latch"]

_DEFINITION = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class Param:
    """A workflow parameter: a notebook literal, its type and its source text."""

    name: str
    type: Type
    default: str


@dataclass(frozen=True, kw_only=True)
class LatchTask:
    """One task of the workflow: a ``%%task`` cell (``step``) or the rest of a code cell."""

    function: str
    label: str
    params: tuple[tuple[str, Type], ...]
    returns: tuple[tuple[str, Type], ...]
    code: str
    imports: tuple[str, ...] = ()
    step: TaskStep | None = None
    takes_state: bool = False
    """It starts from the process-wide state an earlier task gave (its ``state`` argument)."""
    gives_state: bool = False
    """It returns the process-wide state it ended with, last."""
    bundles: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """The bundles it takes (see :class:`_Bundle`), with the names each holds."""


@dataclass(frozen=True, kw_only=True)
class LatchPlan:
    """What the ``latch`` target renders.

    Attributes
    ----------
    module_code
        Module-level statements in notebook order: constants, imports functions need, and the
        notebook's functions and classes.
    params
        The workflow's parameters, in notebook order.
    tasks
        Every task, in notebook order.
    body
        The workflow body: markdown as comments (str) and task calls, in order.
    outputs
        The workflow's results: name and type.
    """

    module_code: tuple[str, ...]
    params: tuple[Param, ...]
    tasks: tuple[LatchTask, ...]
    body: tuple[str | LatchTask, ...]
    outputs: tuple[tuple[str, Type], ...]


def _lines(stmt: ast.stmt) -> range:
    """The lines of a top-level statement, decorators included."""
    first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])
    return range(first, (stmt.end_lineno or stmt.lineno) + 1)


def _text(code: str, stmts: Iterable[ast.stmt]) -> str:
    lines = code.splitlines()
    return "\n".join(lines[i - 1] for stmt in stmts for i in _lines(stmt))


def _without(code: str, stmts: Iterable[ast.stmt]) -> str:
    drop = {i for stmt in stmts for i in _lines(stmt)}
    return "\n".join(line for i, line in enumerate(code.splitlines(), 1) if i not in drop)


def _alone(tree: ast.Module) -> list[bool]:
    """For each top-level statement: does it have its lines (decorators included) to itself?"""
    spans = [_lines(stmt) for stmt in tree.body]
    return [
        not any(set(span) & set(other) for j, other in enumerate(spans) if j != i)
        for i, span in enumerate(spans)
    ]


def _is_definition(stmt: ast.stmt) -> bool:
    return isinstance(stmt, _DEFINITION) or (
        isinstance(stmt, ast.Assign)
        and isinstance(stmt.value, ast.Lambda)
        and all(isinstance(t, ast.Name) for t in stmt.targets)
    )


def _defined(stmt: ast.stmt) -> list[str]:
    """The names a definition binds: a ``def``'s or ``class``'s, or a lambda's targets."""
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    return [getattr(stmt, "name", "")]


def _imports(tree: ast.Module) -> dict[str, str]:
    """The names a cell's top-level imports bind, with the one-alias import that binds each."""
    found = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            for alias in stmt.names:
                if alias.name != "*":
                    name, text = alias_text(stmt, alias)
                    found[name] = text
    return found


def transport(t: Type) -> Type:
    """The type a value travels between tasks as: its own, or ANY (a pickle) for a path, a
    DataFrame (Latch has no type for one) or an unknown part (a task's path is a
    ``pathlib.Path``, which Latch would upload as a file)."""
    return t if is_known(t) and not has_path(t) and "frame" not in repr(t) else ANY


def plan_latch(workflow: Workflow, namer: Namer) -> LatchPlan:
    """Recast a workflow plan for Latch (see the module docstring for the rules).

    Parameters
    ----------
    workflow
        The notebook's plan.
    namer
        Hands out the names of the driver cells' tasks (``cell_N``).

    Raises
    ------
    ExportError
        A notebook function reads a notebook value that is not a literal, or is defined twice;
        the message names the cell.
    """
    return _LatchTypes(workflow, namer).plan()


class _LatchTypes:
    """Walks the steps in order, keeping the type each bound name travels with."""

    def __init__(self, workflow: Workflow, namer: Namer) -> None:
        self.workflow = workflow
        self.namer = namer
        hoisted = analyze_cell("\n".join(workflow.imports)).outputs if workflow.imports else ()
        self.hoisted = set(hoisted)
        self.path_names = workflow.callables
        steps = workflow.steps
        self.code_steps = [
            (i, s) for i, s in enumerate(steps) if isinstance(s, DriverStep | TaskStep)
        ]
        self.uses = NameUses()
        for i, step in self.code_steps:
            reads = step.params if isinstance(step, TaskStep) else step.cell.analysis.inputs
            self.uses.add(i, reads, step.cell.analysis)
        self.params: dict[str, Param] = {}
        self.literals: dict[int, list[ast.stmt]] = {}
        self.definitions: dict[int, list[ast.stmt]] = {}
        self.reads_of: dict[int, tuple[str, ...]] = {}  # id of a definition -> what it reads
        self.imports_of: dict[str, str] = {}  # name -> the first import that binds it
        self.import_texts: dict[str, set[str]] = {}  # name -> every import that binds it
        # step -> the functions it defines that stay in its task, and the names each reads
        self.staying: dict[int, dict[str, tuple[str, ...]]] = {}
        self.module_code: list[str] = []
        self.module_names: set[str] = set(self.hoisted)

    def _read_after(self, i: int, name: str) -> bool:
        """Whether a step after the ``i``-th reads ``name``."""
        return self.uses.read_after(i, name)

    # -- a pass over the whole notebook -------------------------------------------------------

    def _split_code_cells(self) -> None:
        """Find the parameters and the definitions of the code cells: statements that bind a
        name no other statement of the notebook binds."""
        counts: dict[str, int] = {}
        candidates: list[tuple[int, ast.stmt, bool]] = []  # step, statement, a definition?
        hoisted = _imports(ast.parse("\n".join(self.workflow.imports)))
        self.import_texts = {name: {text} for name, text in hoisted.items()}
        for i, step in self.code_steps:
            if isinstance(step, TaskStep):
                counts.update({n: counts.get(n, 0) + 1 for n in step.cell.analysis.outputs})
                for name, text in _imports(ast.parse(step.body)).items():
                    self.import_texts.setdefault(name, set()).add(text)
                continue
            tree = ast.parse(step.code)
            for name, text in _imports(tree).items():
                self.imports_of.setdefault(name, text)
                self.import_texts.setdefault(name, set()).add(text)
            seen: set[str] = set()
            statements = analyze_statements(step.code, tree=tree)
            for stmt, alone, analysis in zip(tree.body, _alone(tree), statements, strict=True):
                counts.update({n: counts.get(n, 0) + 1 for n in analysis.outputs})
                seen.update(analysis.outputs)
                if alone and (_is_definition(stmt) or _is_assignment(stmt)):
                    candidates.append((i, stmt, _is_definition(stmt)))
                    self.reads_of[id(stmt)] = analysis.inputs
            # What the cell binds outside its code here (the imports moved to the top) binds too.
            unseen = [n for n in step.cell.analysis.outputs if n not in seen]
            counts.update({n: counts.get(n, 0) + 1 for n in unseen})
        self.counts = counts
        for i, stmt, definition in candidates:
            self.definitions.setdefault(i, [])
            self.literals.setdefault(i, [])
            if definition:
                self.definitions[i].append(stmt)
            elif (param := self._param(stmt, _code(self.workflow.steps[i]), counts)) is not None:
                self.params[param.name] = param
                self.literals[i].append(stmt)

    def _param(self, stmt: ast.stmt, code: str, counts: Mapping[str, int]) -> Param | None:
        """The parameter ``NAME = LITERAL`` makes, if the notebook binds NAME nowhere else."""
        if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
            return None
        target = stmt.targets[0]
        if not isinstance(target, ast.Name) or counts.get(target.id) != 1:
            return None
        found = literal_type(stmt.value, self.path_names)
        if found is None:
            return None
        return Param(target.id, found, ast.get_source_segment(code, stmt.value) or "")

    def _module_level(self) -> None:
        """Move the definitions that can go to the top; what they read becomes module constants
        or imports. The others stay in their cells."""
        imports = self.imports_of
        candidates: dict[str, tuple[int, ast.stmt, tuple[str, ...]]] = {}
        for i, stmts in self.definitions.items():
            for stmt in stmts:
                names = _defined(stmt)
                if all(self.counts.get(name) == 1 for name in names):
                    for name in names:
                        candidates[name] = (i, stmt, self.reads_of[id(stmt)])
        # A name different imports bind means, in a function, what it is when called: one
        # module-level import cannot stand for it.
        several = {name for name, texts in self.import_texts.items() if len(texts) > 1}
        changed = True
        while changed:  # a definition reading one that stays in its cell stays too
            changed = False
            for name, (_, _, reads) in list(candidates.items()):
                known = self.module_names | set(candidates) | set(imports) | set(self.params)
                if not set(reads) <= known - several:
                    del candidates[name]
                    changed = True
        moved = {id(stmt) for _, stmt, _ in candidates.values()}
        for i, stmts in self.definitions.items():
            self.staying[i] = {
                name: self.reads_of[id(stmt)]
                for stmt in stmts
                if id(stmt) not in moved
                for name in _defined(stmt)
            }
            self.definitions[i] = [stmt for stmt in stmts if id(stmt) in moved]
        self.module_names |= set(candidates)
        for i, stmts in self.definitions.items():
            code = _code(self.workflow.steps[i])
            for stmt in stmts:
                self._hoist_reads(self.reads_of[id(stmt)], imports)
                self.module_code.append(_text(code, [stmt]))

    def _hoist_reads(self, reads: Iterable[str], imports: Mapping[str, str]) -> None:
        """Put what a moved definition reads at the module's top too."""
        for name in reads:
            if name in self.module_names:
                continue
            if name in imports:
                self.module_code.append(imports[name])
            elif name in self.params:
                param = self.params.pop(name)
                self.module_code.append(f"{name} = {param.default}")
            self.module_names.add(name)

    def _label(self, i: int) -> str:
        return self.workflow.steps[i].cell.label

    # -- the walk ------------------------------------------------------------------------------

    def plan(self) -> LatchPlan:
        self._split_code_cells()
        self._module_level()
        self.types: dict[str, Type] = {}
        self.imported: dict[str, str] = {}
        self.bound_at: dict[str, int] = {}  # name -> the step whose task returned it last
        self.last_binding = self._last_bindings()
        self.state_given = False  # whether a task before gave the process-wide state
        self.bundle_of: dict[str, _Bundle] = {}
        # functions carried between tasks as values -> the notebook names they read
        self.travelling: dict[str, tuple[str, ...]] = {}
        tasks: list[LatchTask] = []
        body: list[str | LatchTask] = []
        for i, step in enumerate(self.workflow.steps):
            if isinstance(step, TextStep):
                body.append(comment(step.text))
                continue
            task = self._driver(i, step) if isinstance(step, DriverStep) else self._task(i, step)
            if task is not None:
                tasks.append(task)
                body.append(task)
        outputs = tuple(
            (name, self.types[name])
            for name, i in self.bound_at.items()
            if not self._read_after(i, name) and is_known(self.types[name])
        )
        params = tuple(self.params.values())
        return LatchPlan(
            module_code=tuple(self.module_code),
            params=params,
            tasks=tuple(tasks),
            body=tuple(body),
            outputs=outputs,
        )

    def _last_bindings(self) -> dict[str, int]:
        """For each name, the last step that binds it."""
        last: dict[str, int] = {}
        for i, step in self.code_steps:
            for name in _outputs(step):
                last[name] = i
        return last

    def _driver(self, i: int, step: DriverStep) -> LatchTask | None:
        """A code cell's task: the cell without its parameters and moved definitions (None if
        nothing else is left but imports)."""
        moved = [*self.definitions.get(i, ()), *self.literals.get(i, ())]
        for stmt in self.literals.get(i, ()):
            name = stmt.targets[0].id  # type: ignore[attr-defined]
            if name in self.params:
                self.types[name] = self.params[name].type
        code = _without(step.code, moved) if moved else step.code
        tree = ast.parse(code)
        own_imports = _imports(tree)
        if all(isinstance(s, ast.Import | ast.ImportFrom) for s in tree.body):
            self.imported.update(own_imports)
            return None
        # The cell's own analysis, less the imports that moved to the module's top, unless
        # statements moved too.
        if moved:
            analysis = analyze_cell(code)
        else:
            analysis = step.cell.analysis
            outputs = tuple(n for n in analysis.outputs if n not in self.hoisted)
            analysis = dataclasses.replace(analysis, outputs=outputs)
        inputs = [n for n in analysis.inputs if n in self.types]
        needed = [self.imported[n] for n in analysis.inputs if n in self.imported]
        changed = [
            n
            for n in dict.fromkeys([*analysis.mutated, *analysis.loops_over])
            if n in inputs and n not in analysis.outputs and self.types[n].kind not in IMMUTABLE
        ]
        task = _Draft(
            function=self.namer.fresh(f"cell_{step.cell.number}"),
            cell=step.cell,
            code=code,
            inputs=inputs,
            outputs=[*changed, *analysis.outputs],
            imports=[*step.star_imports, *step.imports, *needed],
            rebound=frozenset(analysis.outputs),
        )
        made = self._make(i, task, tree, own_imports, None, step.changes_state)
        self.travelling.update(self.staying.get(i, {}))
        return made

    def _task(self, i: int, step: TaskStep) -> LatchTask:
        """A ``%%task`` cell's task: its inputs less the names now at the module's top."""
        inputs = [p for p in step.params if p not in self.module_names]
        task = _Draft(
            function=step.function,
            cell=step.cell,
            code=step.body,
            inputs=inputs,
            outputs=list(step.returns),
            imports=[*step.star_imports, *step.local_imports],
            rebound=frozenset(step.returns) - set(step.updates),
        )
        return self._make(i, task, ast.parse(step.body), {}, step, step.changes_state)

    def _make(
        self,
        i: int,
        draft: _Draft,
        tree: ast.Module,
        own_imports: Mapping[str, str],
        step: TaskStep | None,
        changes_state: bool,
    ) -> LatchTask:
        """The task: its inputs typed as they travel, and the outputs it must return."""
        found = cell_types(tree, {n: self.types.get(n, ANY) for n in draft.inputs}, self.path_names)
        rebinds, read = self._rebinds(draft.inputs)
        params, unpack, received = self._received([*draft.inputs, *read])
        unpack += rebinds
        received_members = {b.name: list(b.members) for b in received}
        for name in draft.rebound:  # a name bound again no longer shares a bundle's objects
            self.travelling.pop(name, None)
            bundle = self.bundle_of.pop(name, None)
            if bundle is not None:
                bundle.members.remove(name)
        returns = []
        for name in draft.outputs:
            if name in own_imports:  # a module: later cells import it again
                self.imported[name] = own_imports[name]
                continue
            if name not in draft.rebound and self.types.get(name, ANY).kind in IMMUTABLE:
                continue  # "changed in place" (text.split()), but nothing changes a str
            t = transport(found.get(name, ANY))  # changed in place: of any type now
            if self._read_after(i, name) or (self.last_binding.get(name) == i and is_known(t)):
                returns.append((name, t))
                self.types[name] = t
                self.bound_at[name] = i
        back = [b for b in received if any(n in draft.outputs for n in b.members)]
        kept = {n for b in back for n in b.members}
        shared = [n for n, t in returns if t.kind not in IMMUTABLE and n not in kept]
        if len(shared) > 1 and shares_parts(draft.code, tree, shared):
            bundle = _Bundle(self.namer.fresh(f"shared_{draft.cell.number}"), shared)
            self.bundle_of.update(dict.fromkeys(shared, bundle))
            back.append(bundle)
            kept.update(shared)
        returns = [(n, t) for n, t in returns if n not in kept]
        for name in kept:  # inside a bundle: no result of the workflow on its own
            self.bound_at.pop(name, None)
        packs = []
        for bundle in back:  # the objects that share come back in one pickle
            packs.append(f"{bundle.name} = ({listed(bundle.members)})")
            returns.append((bundle.name, ANY))
        code = "\n".join([*unpack, draft.code.rstrip("\n"), *packs]) + "\n"
        imports = tuple(dict.fromkeys(draft.imports))
        takes_state = self.state_given
        self.state_given = self.state_given or changes_state
        return LatchTask(
            function=draft.function,
            label=draft.cell.label,
            params=params,
            returns=tuple(returns),
            code=code,
            imports=imports,
            step=step,
            takes_state=takes_state,
            gives_state=changes_state,
            bundles=tuple((name, tuple(members)) for name, members in received_members.items()),
        )

    def _rebinds(self, inputs: Iterable[str]) -> tuple[list[str], list[str]]:
        """For each function the task takes that travels as a value: the line that makes it read
        the notebook's names as they are now, not as they were where it was defined (a closure
        keeps those), and the names that takes."""
        lines: list[str] = []
        read: dict[str, None] = {}
        inputs = list(inputs)
        for name in inputs:
            names = [n for n in self.travelling.get(name, ()) if n in self.types]
            if names:
                arguments = ", ".join(f"{n}={n}" for n in names)
                lines.append(f"{name} = {self.workflow.helpers('rebound')}({name}, {arguments})")
                read.update(dict.fromkeys(n for n in names if n not in inputs))
        return lines, list(read)

    def _received(
        self, inputs: Iterable[str]
    ) -> tuple[tuple[tuple[str, Type], ...], list[str], list[_Bundle]]:
        """A task's parameters: its inputs, a bundle's members taken as the bundle (once);
        the lines that unpack the bundles; the bundles."""
        params: list[tuple[str, Type]] = []
        unpack: list[str] = []
        received: list[_Bundle] = []
        for name in inputs:
            bundle = self.bundle_of.get(name)
            if bundle is None:
                params.append((name, self.types.get(name, ANY)))
            elif bundle not in received:
                received.append(bundle)
                params.append((bundle.name, ANY))
                unpack.append(f"{listed(bundle.members)} = {bundle.name}")
        return tuple(params), unpack, received


@dataclass
class _Bundle:
    """Names whose objects may share parts (``alias = results``, ``ledger = {"a": acct}``),
    which travel between tasks in one pickle, so that a change through one shows through all,
    as in the notebook."""

    name: str
    members: list[str]


def listed(names: Iterable[str]) -> str:
    """``a, b`` (``a,`` for one): the items of a tuple, to pack or unpack."""
    names = list(names)
    return ", ".join(names) if len(names) > 1 else f"{names[0]},"


@dataclass(frozen=True, kw_only=True)
class _Draft:
    """A task before its types: what it is called, reads, may return and imports, and which
    of its outputs it binds anew (the others it changes in place)."""

    function: str
    cell: Cell
    code: str
    inputs: list[str]
    outputs: list[str]
    imports: Iterable[str] = ()
    rebound: frozenset[str] = frozenset()


def _code(step: Step) -> str:
    return step.code if isinstance(step, DriverStep) else step.body  # type: ignore[union-attr]


def _outputs(step: DriverStep | TaskStep) -> list[str]:
    if isinstance(step, TaskStep):
        return list(step.returns)
    return [*step.cell.analysis.outputs, *step.cell.analysis.mutated]


def _is_assignment(stmt: ast.stmt) -> bool:
    """``NAME = VALUE``: a candidate parameter."""
    return (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
    )
