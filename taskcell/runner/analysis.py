"""What one cell reads, binds and deletes: the analysis ``%%task`` and the exporter share.

Modelled on marimo's ``_ast`` visitor: one :class:`ast.NodeVisitor` walks the cell with Python's
own scoping rules and collects definitions and references, and one pure function,
:func:`analyze_cell`, turns them into a frozen :class:`CellAnalysis`. Pure Python on the standard
library; nothing here imports IPython or Dask.

The analysis is conservative in the direction that is safe for shipping a cell to a worker: when
a name *may* be read before the cell binds it, it is an input. The rules, one line each:

- A read counts against the names bound on *every* path so far: a name bound in one branch of an
  ``if``, in a loop body, an ``except`` handler, a ``match`` case that need not match, or behind
  ``and``/``or``/``if-else``/a comprehension (walrus) is still unbound after it. A ``raise``,
  ``break``, ``continue`` or ``return`` ends its path, so ``else: raise`` keeps the other branch.
- ``x += 1``, ``del x`` and ``y = y + 1`` read before they bind (or unbind).
- The body of a ``def`` or ``lambda`` is analysed when the module-level statement that defines it
  has finished (so a recursive function, or a method naming its own class, is not its own input):
  its free globals are reads at that point, checked against what is bound *then*. A helper
  defined further down the cell is therefore an input too; the caller ships it if it exists.
- Class bodies and comprehensions run at once and are analysed in place; comprehension targets
  and function parameters and locals are never globals; class attributes are not seen by
  methods or comprehensions in the class, as in Python.
- ``global x`` in a function makes its reads of ``x`` global reads and its binds (and ``del``)
  outputs (and deletions), although the function may never be called. Each such declaration
  is listed in ``function_globals``, under every function it is in.
- ``maybe_unbound`` lists the outputs the cell may finish without: bound on some paths only
  (by the rules above), deleted after, or bound only by a function through ``global``.
- Builtins (``print``, ``len``, IPython's ``display``, ...) are never inputs: a notebook name
  that shadows a builtin is not shipped unless the cell reads it as something it bound.
- Attribute and subscript targets (``a.b = 1``, ``a[0] = 1``, ``del a[0]``) read ``a`` and bind
  nothing; an annotation without a value (``x: int``) binds nothing but its annotation is read.
- ``import a.b`` binds ``a``, ``import a.b as c`` binds ``c``; ``from m import *`` binds nothing
  and is listed in ``star_imports``. ``match`` captures, ``with ... as``, ``for`` targets and
  walrus targets bind; ``except E as e`` binds ``e`` and then deletes it, as Python does.
- ``await``, ``async for``, ``async with`` or an async comprehension outside any function or
  class is a top-level await, which only IPython runs; ``top_level_await`` has its first line.
- ``with`` bodies are analysed as straight-line code (a context manager that swallows the
  exception is not modelled), and the code run by ``exec``/``eval``/``globals()`` is not seen.
- IPython's own syntax, once transformed (``get_ipython().run_line_magic(...)``,
  ``run_cell_magic``, ``system``, ``getoutput``), is listed in ``magics``. The Python a magic runs
  in the notebook's namespace is analysed as the cell's own: ``%time``/``%%time``, ``%prun``
  and ``%%capture`` bodies read and bind, ``%timeit`` only reads; ``{expr}`` and ``$name`` in a
  shell command or a line magic's arguments are reads. A cell magic's body is transformed with
  the ``transform`` given to :func:`analyze_cell` (IPython's ``transform_cell``).
- ``mutated`` lists the notebook names whose objects the cell may change in place: the base of
  an attribute or item it assigns, deletes or augments (``d[k] = v``, ``o.a += 1``), of a
  method it calls (``lst.append(x)``, ``model.fit(X)``, ``np.random.seed(0)``: a module too;
  consumers drop what they know is code), a name passed to a call other than a builtin that
  changes nothing (``shuffle(items)``), and ``x += ...`` on a name it reads. Only names read
  from the notebook count: a cell's own new objects are its outputs.
- ``function_mutated`` lists, for each function the cell defines at top level, the global
  names it (or a function nested in it) surely changes in place when called, whoever binds
  them: an item or attribute it stores or deletes, a container's in-place method
  (``log.append(x)``), not a name it only passes to a call. What a task that calls it changes
  without naming.
- A file the cell opens by a path it names (``open("a.csv")``, ``pd.read_csv(path)``,
  ``np.load(...)``, ``Path("x").read_text()``) is listed in ``files``, with the path when it is
  a literal (or a name the cell bound to one), or the notebook name holding it.
- Two facts about the cell's own top-level statements (not those nested in a block):
  ``loops_over`` lists the names a ``for`` loop runs over (``for m in models``, ``for k, v in
  d.items()``/``.values()``), whose items the loop may change in place without naming them;
  ``unpicklable`` lists the names ``NAME = (generator expression)`` or ``NAME = open(...)``
  binds to a value no pickle carries.
- :func:`analyze_statements` analyses each top-level statement alone, by the same rules: what it
  reads and binds, taken out of its cell.

:func:`taskcell.runner.closure.function_globals` complements this at run time, from byte code.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import re
import string
import tokenize
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "CellAnalysis",
    "FileRead",
    "analyze_cell",
    "analyze_statements",
    "dotted",
    "file_read",
    "ipython_call",
    "is_get_ipython",
]

# Names every cell can read without the notebook's namespace. IPython adds the last three to
# builtins while it runs a cell; they are listed so the result is the same in and out of IPython.
# Single-underscore names are left out: ``_`` is IPython's last output (or gettext's), a global.
_BUILTINS: frozenset[str] = frozenset(
    name
    for name in dir(builtins)
    if not name.startswith("_") or (name.startswith("__") and name.endswith("__"))
) | {"__builtins__", "display", "get_ipython", "__IPYTHON__"}


@dataclass(frozen=True)
class FileRead:
    """A file a cell reads by a path it names.

    Attributes
    ----------
    function
        The reader as the cell calls it: ``"open"``, ``"pd.read_csv"``, ``"np.load"``.
    path
        The path, where the cell writes it as a literal or binds a name to one first.
    name
        Else the notebook name that holds the path (a global the cell reads).
    """

    function: str
    path: str | None = None
    name: str | None = None


@dataclass(frozen=True, kw_only=True)
class CellAnalysis:
    """What one cell reads from and writes to the notebook's global namespace.

    Every tuple is ordered by first occurrence in the cell and holds no duplicates.

    Attributes
    ----------
    inputs
        Global names the cell may read before it binds them, in order of first read. Builtins
        are never inputs.
    outputs
        Global names the cell binds: at top level (assignment, augmented and annotated
        assignment with a value, ``for``/``with``/``except`` targets, walrus, ``import``
        aliases, ``def``, ``class``, ``match`` captures) and through ``global`` in its functions,
        in order of first binding.
    deleted
        Global names the cell may leave unbound: ``del`` (or an ``except ... as`` name) with no
        binding on every path after it. A name can be in ``outputs`` too (``x = 1; if c: del x``):
        write back the outputs the finished cell has, and remove the deleted names it lacks.
    imports
        Top-level module names the cell imports anywhere (``numpy`` for
        ``import numpy.linalg as la``); relative imports and ``__future__`` are left out.
    star_imports
        Modules the cell star-imports (``from m import *``), as written (``.m`` for a relative
        one). They bind names the analysis cannot see.
    functions
        Names of functions defined at the cell's top level, by ``def`` or by assigning a
        ``lambda``, in order of definition.
    classes
        Names of classes defined at the cell's top level.
    mutated
        Notebook names whose objects the cell may change in place, in order (see above).
    function_mutated
        For each top-level function that may change global names in place when called, those
        names, as ``(function, names)`` pairs in order of definition (see above).
    magics
        IPython magics and shell escapes the cell uses, as written: ``"%time"``,
        ``"%%capture"``, ``"!"`` (``!cmd``), ``"!!"`` (``x = !cmd``), in order of use.
    files
        Files the cell reads by a path it names, in order (see :class:`FileRead`).
    maybe_unbound
        Those of ``outputs`` the cell may finish without (see above): a task returning one
        may find it unbound.
    function_globals
        For each ``global`` statement in a function the cell defines, ``(function, names)``,
        once for each function it is in, outermost first; a function's body comes after the
        statement that defines it.
    top_level_await
        The line of the cell's first top-level ``await`` (see above); None if it has none.
    loops_over
        Names the cell's top-level ``for`` loops run over (see above).
    unpicklable
        Names the cell's top-level statements bind to a generator or an open file (see above).
    has_last_expr
        The cell ends with a bare expression statement, whose value is the cell's ``Out[]``.
    last_expr_silenced
        That last expression is followed by ``;`` (comments after it aside), so IPython shows
        no ``Out[]``.
    """

    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()
    star_imports: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()
    classes: tuple[str, ...] = ()
    mutated: tuple[str, ...] = ()
    function_mutated: tuple[tuple[str, tuple[str, ...]], ...] = ()
    magics: tuple[str, ...] = ()
    files: tuple[FileRead, ...] = ()
    maybe_unbound: tuple[str, ...] = ()
    function_globals: tuple[tuple[str, tuple[str, ...]], ...] = ()
    top_level_await: int | None = None
    loops_over: tuple[str, ...] = ()
    unpicklable: tuple[str, ...] = ()
    has_last_expr: bool = False
    last_expr_silenced: bool = False


ScopeKind = Literal["module", "class", "function", "comprehension"]
"""Where a name is looked up.

- ``"module"``: the cell's top level, that is the notebook's global namespace.
- ``"class"``: a class body; its names become attributes, invisible to the functions and
  comprehensions nested in it.
- ``"function"``: a ``def`` or ``lambda`` body; a name it binds anywhere is local throughout.
- ``"comprehension"``: a list, set or dict comprehension or generator expression; its ``for``
  targets are local to it, and a walrus in it binds in the nearest enclosing other scope.
"""

State = set[str] | None
"""Names bound on every path reaching a point of a module or class body; None if no path does."""


@dataclass(kw_only=True)
class _Scope:
    kind: ScopeKind
    parent: _Scope | None = None
    name: str = ""  # a function scope: the function's name
    # Function and comprehension scopes: every name bound in them (Python decides this statically).
    local: frozenset[str] = frozenset()
    declared_global: set[str] = field(default_factory=set)
    # Module and class scopes: flow-sensitive; function scopes carry one that nothing reads.
    state: State = field(default_factory=set)


@dataclass
class _Loop:
    breaks: list[State] = field(default_factory=list)
    continues: list[State] = field(default_factory=list)


def _meet(states: Iterable[State]) -> State:
    """Names bound on every live path; None when no path is live."""
    live = [s for s in states if s is not None]
    if not live:
        return None
    result = set(live[0])
    for s in live[1:]:
        result &= s
    return result


def _copy(state: State) -> State:
    return None if state is None else set(state)


def _is_true_constant(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and bool(node.value)


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _def_time_nodes(node: ast.AST, annotations: bool = True) -> list[ast.AST]:
    """The parts of a def, lambda or class evaluated in the enclosing scope, in order."""
    if isinstance(node, ast.ClassDef):
        return [*node.decorator_list, *node.bases, *node.keywords]
    args: ast.arguments = node.args  # type: ignore[attr-defined]
    parts: list[ast.AST] = [*getattr(node, "decorator_list", ())]
    parts += [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
    if annotations and isinstance(node, _FUNCTIONS):
        params = [*args.posonlyargs, *args.args, args.vararg, *args.kwonlyargs, args.kwarg]
        parts += [p.annotation for p in params if p is not None and p.annotation is not None]
        if node.returns is not None:
            parts.append(node.returns)
    return parts


def _function_locals(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> _Scope:
    """A function scope with the names Python makes local to it and those declared global."""
    args = node.args
    params = [*args.posonlyargs, *args.args, args.vararg, *args.kwonlyargs, args.kwarg]
    bound = {p.arg for p in params if p is not None}
    declared_global: set[str] = set()
    declared_nonlocal: set[str] = set()

    def walk(child: ast.AST, in_comprehension: bool) -> None:
        if isinstance(child, ast.Name):
            if not in_comprehension and not isinstance(child.ctx, ast.Load):
                bound.add(child.id)
            return
        if isinstance(child, ast.NamedExpr):
            bound.add(child.target.id)
            walk(child.value, in_comprehension)
            return
        children: Iterable[ast.AST] = ast.iter_child_nodes(child)
        if isinstance(child, (*_FUNCTIONS, ast.ClassDef)):
            bound.add(child.name)
            children = _def_time_nodes(child)
        elif isinstance(child, ast.Lambda):
            children = _def_time_nodes(child)
        elif isinstance(child, _COMPREHENSIONS):
            in_comprehension = True
        elif isinstance(child, ast.Global):
            declared_global.update(child.names)
        elif isinstance(child, ast.Nonlocal):
            declared_nonlocal.update(child.names)
        elif isinstance(child, ast.alias) and child.name != "*":
            bound.add(child.asname or child.name.partition(".")[0])
        elif isinstance(child, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and child.name:
            bound.add(child.name)
        elif isinstance(child, ast.MatchMapping) and child.rest:
            bound.add(child.rest)
        for grandchild in children:
            walk(grandchild, in_comprehension)

    body = node.body if isinstance(node.body, list) else [node.body]
    for stmt in body:
        walk(stmt, False)
    local = frozenset(bound - declared_global - declared_nonlocal)
    name = getattr(node, "name", "<lambda>")
    return _Scope(kind="function", name=name, local=local, declared_global=declared_global)


class _CellVisitor(ast.NodeVisitor):
    """Collects a cell's global reads, binds and deletions, with Python's scoping and flow."""

    def __init__(self, transform: Callable[[str], str] | None = None) -> None:
        self.transform = transform
        self.module = _Scope(kind="module")
        self.scope = self.module
        self.reads: dict[str, None] = {}
        self.binds: dict[str, None] = {}
        self.dels: dict[str, None] = {}
        self.imports: dict[str, None] = {}
        self.star_imports: dict[str, None] = {}
        self.functions: dict[str, None] = {}
        self.classes: dict[str, None] = {}
        self.mutated: dict[str, None] = {}
        self.function_mutated: dict[str, dict[str, None]] = {}
        self._function: str | None = None  # the top-level function whose body is visited
        self.magics: dict[str, None] = {}
        self.files: dict[FileRead, None] = {}
        self.top_binds: dict[str, None] = {}  # names bound outside any function
        self.function_globals: dict[tuple[str, tuple[str, ...]], None] = {}
        self.top_level_await: int | None = None
        self.loops_over: dict[str, None] = {}
        self.unpicklable: dict[str, None] = {}
        self._statement: ast.stmt | None = None  # the cell's top-level statement being visited
        #: Module-level names the cell last bound to a string literal (``path = "a.csv"``).
        self.literals: dict[str, str] = {}
        self.lazy_annotations = False  # `from __future__ import annotations`
        self._deferred: list[tuple[_Scope, list[ast.AST], str | None]] = []
        self._loops: list[_Loop] = []

    # -- names ---------------------------------------------------------------------------------

    def _flow(self) -> _Scope:
        """The nearest scope that is not a comprehension: where a walrus binds."""
        scope = self.scope
        while scope.kind == "comprehension":
            scope = scope.parent  # type: ignore[assignment]
        return scope

    def _global_read(self, name: str) -> None:
        if name not in (self.module.state or ()) and name not in _BUILTINS:
            self.reads.setdefault(name)

    def _read(self, name: str) -> None:
        if self._is_global(name):
            self._global_read(name)

    def _is_global(self, name: str) -> bool:
        """Whether reading ``name`` here looks it up in the notebook's global namespace."""
        scope = self.scope
        if name in scope.declared_global or scope.kind == "module":
            return True
        if scope.kind == "class" and name in (scope.state or ()):
            return False
        if scope.kind in ("function", "comprehension") and name in scope.local:
            return False
        # A free name: enclosing function scopes, never enclosing class bodies, then globals.
        enclosing = scope.parent
        while enclosing is not None and enclosing.kind != "module":
            if enclosing.kind != "class":
                if name in enclosing.declared_global:
                    return True
                if name in enclosing.local:
                    return False
            enclosing = enclosing.parent
        return True

    def _target(self, walrus: bool) -> _Scope:
        return self._flow() if walrus else self.scope

    def _bind(self, name: str, walrus: bool = False) -> None:
        scope = self._target(walrus)
        if scope.kind == "module" or name in scope.declared_global:
            self.binds.setdefault(name)
            if not self._in_function():
                self.top_binds.setdefault(name)
            self.literals.pop(name, None)
            if self.module.state is not None:
                self.module.state.add(name)
        elif scope.kind == "class" and scope.state is not None:
            scope.state.add(name)

    def _unbind(self, name: str) -> None:
        scope = self.scope
        if scope.kind == "module" or name in scope.declared_global:
            self.dels.setdefault(name)
            if self.module.state is not None:
                self.module.state.discard(name)
        elif scope.kind == "class" and scope.state is not None:
            scope.state.discard(name)

    def _in_function(self) -> bool:
        """Whether the code visited now is in a function's body (binding a global only if
        that function is called)."""
        scope: _Scope | None = self.scope
        while scope is not None and scope.kind != "function":
            scope = scope.parent
        return scope is not None

    # -- flow ----------------------------------------------------------------------------------

    def visit_cell(self, body: Sequence[ast.stmt]) -> None:
        """Visit a cell's top-level statements, each known as such while it is visited."""
        for stmt in body:
            self._statement = stmt
            self._visit_body([stmt])
        self._statement = None

    def _visit_body(self, body: Sequence[ast.AST]) -> None:
        for stmt in body:
            self.visit(stmt)
            if self.scope is self.module:
                self._flush()

    def _flush(self) -> None:
        """Analyse the bodies of the functions the statement just finished has defined."""
        while self._deferred:
            scope, body, function = self._deferred.pop(0)
            outer, outer_loops, outer_function = self.scope, self._loops, self._function
            self.scope, self._loops, self._function = scope, [], function
            self._visit_all(body)
            self.scope, self._loops, self._function = outer, outer_loops, outer_function

    def _branches(self, *branches: Callable[[], None]) -> None:
        """Run each branch from the current state; afterwards only what all of them bound."""
        flow = self._flow()
        start = flow.state
        ends: list[State] = []
        for branch in branches:
            flow.state = _copy(start)
            branch()
            ends.append(flow.state)
        flow.state = _meet(ends)

    def _end_path(self) -> None:
        self._flow().state = None

    def _loop(self, node: ast.For | ast.AsyncFor | ast.While) -> None:
        flow = self._flow()
        start = _copy(flow.state)
        loop = _Loop()
        self._loops.append(loop)
        if not isinstance(node, ast.While):
            self.visit(node.target)
        self._visit_body(node.body)
        self._loops.pop()
        if isinstance(node, ast.While) and _is_true_constant(node.test):
            flow.state = _meet(loop.breaks)
            return
        flow.state = _meet([start, flow.state, *loop.continues])
        self._visit_body(node.orelse)
        flow.state = _meet([flow.state, *loop.breaks])

    # -- statements ----------------------------------------------------------------------------

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self.visit(target)
            if isinstance(node.value, ast.Lambda):
                self._lambda_name(target)
        if node is self._statement:
            self._note_unpicklable(node)
        literal = _string(node.value)
        if literal is not None and self.scope is self.module:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.literals[target.id] = literal

    def _note_unpicklable(self, node: ast.Assign) -> None:
        """``NAME = (generator expression)`` or ``NAME = open(...)``: a value no pickle carries."""
        (target, *more), value = node.targets, node.value
        opened = (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "open"
        )
        unpicklable = opened or isinstance(value, ast.GeneratorExp)
        if not more and isinstance(target, ast.Name) and unpicklable:
            self.unpicklable.setdefault(target.id)

    def _lambda_name(self, target: ast.AST) -> None:
        if self.scope is self.module and isinstance(target, ast.Name):
            self.functions.setdefault(target.id)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name):
            self._read(node.target.id)
            self._mutate(node.target, by_function=False)  # in a function, `global n; n += 1`
            self.visit(node.value)
            self._bind(node.target.id)
        else:
            self._mutate(node.target)
            self.visit(node.target)
            self.visit(node.value)

    def _mutate(self, node: ast.expr, by_function: bool = True) -> None:
        """Note the notebook name at the base of ``node`` (``a`` of ``a.b[c]``) as changed in
        place, if the cell reads it from the notebook here; in a function's body, as changed by
        that function too, where ``by_function`` says the change is certain (a store, or a
        container's in-place method: not a call that is only given the name)."""
        while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
            node = node.value
        if not isinstance(node, ast.Name):
            return
        if self._reads_notebook(node.id):
            self.mutated.setdefault(node.id)
        function = self._function if by_function else None
        if function is not None and self._is_global(node.id) and node.id not in _BUILTINS:
            self.function_mutated.setdefault(function, {}).setdefault(node.id)

    def _reads_notebook(self, name: str) -> bool:
        return (
            self._is_global(name)
            and name not in (self.module.state or ())
            and (name not in _BUILTINS)
        )

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if not isinstance(node.ctx, ast.Load):
            self._mutate(node.value)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if not isinstance(node.ctx, ast.Load):
            self._mutate(node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        if self.scope.kind != "function" and not self.lazy_annotations:
            self.visit(node.annotation)
        if not isinstance(node.target, ast.Name):
            self.visit(node.target)
        elif node.value is not None:
            self.visit(node.target)
            if isinstance(node.value, ast.Lambda):
                self._lambda_name(node.target)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self.visit(target)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        if node is self._statement:
            source = node.iter
            if (
                isinstance(source, ast.Call)
                and isinstance(source.func, ast.Attribute)
                and source.func.attr in ("items", "values")
            ):
                source = source.func.value
            if isinstance(source, ast.Name):
                self.loops_over.setdefault(source.id)
        if isinstance(node, ast.AsyncFor):
            self._await(node)
        self._loop(node)

    visit_AsyncFor = visit_For

    def visit_Await(self, node: ast.Await) -> None:
        self._await(node)
        self.generic_visit(node)

    def _await(self, node: ast.expr | ast.stmt) -> None:
        """Note a top-level ``await`` (not in a function or class body)."""
        if self.top_level_await is None and self._flow() is self.module:
            self.top_level_await = node.lineno

    def visit_While(self, node: ast.While) -> None:
        self.visit(node.test)
        self._loop(node)

    def visit_Break(self, node: ast.Break) -> None:
        self._loops[-1].breaks.append(_copy(self._flow().state))
        self._end_path()

    def visit_Continue(self, node: ast.Continue) -> None:
        self._loops[-1].continues.append(_copy(self._flow().state))
        self._end_path()

    def visit_Return(self, node: ast.Return) -> None:
        self.generic_visit(node)
        self._end_path()

    def visit_Raise(self, node: ast.Raise) -> None:
        self.generic_visit(node)
        self._end_path()

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        self._branches(lambda: self._visit_body(node.body), lambda: self._visit_body(node.orelse))

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        if isinstance(node, ast.AsyncWith):
            self._await(node)
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self.visit(item.optional_vars)
        self._visit_body(node.body)

    visit_AsyncWith = visit_With

    def visit_Try(self, node: ast.Try) -> None:
        flow = self._flow()
        start = _copy(flow.state)
        self._visit_body(node.body)
        body_end = flow.state
        flow.state = _copy(body_end)
        self._visit_body(node.orelse)
        ends = [flow.state]
        # A handler may start anywhere in the body: count only what was bound before it.
        handler_start = _meet([start, body_end])
        for handler in node.handlers:
            flow.state = _copy(handler_start)
            if handler.type is not None:
                self.visit(handler.type)
            if handler.name:
                self._bind(handler.name)
            self._visit_body(handler.body)
            if handler.name:
                self._unbind(handler.name)  # Python deletes the name when the handler ends
            ends.append(flow.state)
        after = _meet(ends)
        if node.finalbody:
            final_start = _meet([start, body_end, after])
            flow.state = _copy(final_start)
            self._visit_body(node.finalbody)
            final_end = flow.state
            if final_end is None or after is None or final_start is None:
                after = None if final_end is None else after
            else:
                after = (after | (final_end - final_start)) - (final_start - final_end)
        flow.state = after

    visit_TryStar = visit_Try

    def visit_Match(self, node: ast.Match) -> None:
        self.visit(node.subject)
        branches: list[Callable[[], None]] = [self._case(case) for case in node.cases]
        if not any(self._irrefutable(case) for case in node.cases):
            branches.append(lambda: None)  # no case matched
        self._branches(*branches)

    def _case(self, case: ast.match_case) -> Callable[[], None]:
        def run() -> None:
            self.visit(case.pattern)
            if case.guard is not None:
                self.visit(case.guard)
            self._visit_body(case.body)

        return run

    @staticmethod
    def _irrefutable(case: ast.match_case) -> bool:
        pattern = case.pattern
        return case.guard is None and isinstance(pattern, ast.MatchAs) and pattern.pattern is None

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.pattern is not None:
            self.visit(node.pattern)
        if node.name:
            self._bind(node.name)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name:
            self._bind(node.name)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        for key in node.keys:
            self.visit(key)
        for pattern in node.patterns:
            self.visit(pattern)
        if node.rest:
            self._bind(node.rest)

    def visit_Global(self, node: ast.Global) -> None:
        if self.scope is not self.module:
            self.scope.declared_global.update(node.names)
        functions: list[str] = []
        scope: _Scope | None = self.scope
        while scope is not None:
            if scope.kind == "function":
                functions.insert(0, scope.name)
            scope = scope.parent
        for function in functions:
            self.function_globals.setdefault((function, tuple(node.names)))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            top = alias.name.partition(".")[0]
            self.imports.setdefault(top)
            self._bind(alias.asname or top)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if module == "__future__":
            if any(alias.name == "annotations" for alias in node.names):
                self.lazy_annotations = True
            return
        if node.level == 0:
            self.imports.setdefault(module.partition(".")[0])
        for alias in node.names:
            if alias.name == "*":
                self.star_imports.setdefault("." * node.level + module)
            else:
                self._bind(alias.asname or alias.name)

    # -- scopes --------------------------------------------------------------------------------

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._def_time(node)
        self._bind(node.name)
        if self.scope is self.module:
            self.functions.setdefault(node.name)
        self._defer(node, node.body)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._def_time(node)
        self._defer(node, [node.body])

    def _def_time(self, node: ast.AST) -> None:
        for part in _def_time_nodes(node, annotations=not self.lazy_annotations):
            self.visit(part)

    def _defer(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, body: list) -> None:
        scope = _function_locals(node)
        scope.parent = self.scope
        function = self._function
        if self.scope is self.module and not isinstance(node, ast.Lambda):
            function = node.name
        self._deferred.append((scope, body, function))

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._def_time(node)
        outer = self.scope
        self.scope = _Scope(kind="class", parent=outer)
        self._visit_body(node.body)
        self.scope = outer
        self._bind(node.name)
        if self.scope is self.module:
            self.classes.setdefault(node.name)

    def _comprehension(self, node: ast.AST, results: Sequence[ast.expr]) -> None:
        generators: list[ast.comprehension] = node.generators  # type: ignore[attr-defined]
        if any(g.is_async for g in generators):
            self._await(node)  # type: ignore[arg-type]
        self.visit(generators[0].iter)  # evaluated in the enclosing scope
        targets = {n.id for g in generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        flow = self._flow()
        start = _copy(flow.state)
        outer = self.scope
        self.scope = _Scope(kind="comprehension", parent=outer, local=frozenset(targets))
        for i, generator in enumerate(generators):
            if i:
                self.visit(generator.iter)
            self.visit(generator.target)
            for condition in generator.ifs:
                self.visit(condition)
        for result in results:
            self.visit(result)
        self.scope = outer
        flow.state = start  # it may run zero times: a walrus in it binds on no certain path

    def visit_ListComp(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp) -> None:
        self._comprehension(node, [node.elt])

    visit_SetComp = visit_GeneratorExp = visit_ListComp

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._comprehension(node, [node.key, node.value])

    # -- expressions ---------------------------------------------------------------------------

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self._read(node.id)
        elif isinstance(node.ctx, ast.Store):
            self._bind(node.id)
        else:
            self._read(node.id)
            self._unbind(node.id)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self._bind(node.target.id, walrus=True)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        self.visit(node.values[0])
        self._branches(lambda: self._visit_all(node.values[1:]), lambda: None)

    def _visit_all(self, nodes: Iterable[ast.AST]) -> None:
        for node in nodes:
            self.visit(node)

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self.visit(node.test)
        self._branches(lambda: self.visit(node.body), lambda: self.visit(node.orelse))

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        if isinstance(node.func, ast.Attribute):
            self._mutate(node.func.value, by_function=node.func.attr in _IN_PLACE_METHODS)
        if not (isinstance(node.func, ast.Name) and node.func.id in _PURE_BUILTINS):
            for argument in [*node.args, *(k.value for k in node.keywords)]:
                if isinstance(argument, (ast.Name, ast.Starred)):
                    self._mutate(argument, by_function=False)
        call = ipython_call(node)
        if call is not None and call[1]:
            self._shell(_SHELL_METHODS[call[0]], call[1])
            return
        read = file_read(node)
        if read is not None:
            function, path = read
            self._file(function, path)

    # -- IPython and files ---------------------------------------------------------------------

    def _shell(self, kind: str, args: list[str]) -> None:
        """A magic or shell escape, with the Python it runs in the notebook's namespace."""
        if kind in ("!", "!!"):
            self.magics.setdefault(kind)
            self._expanded_reads(args[0])
            return
        name, line, body = args[0], args[1] if len(args) > 1 else "", args[2:]
        self.magics.setdefault(kind + name)
        if not body:  # a line magic
            if name in _LINE_CODE:
                self._embedded(_statement(line, _LINE_CODE[name]), binds=name != "timeit")
            else:
                self._expanded_reads(line)
            return
        if name == "capture":
            self._capture_target(line)
        elif name != "timeit":
            self._expanded_reads(line)
        if name in _CELL_CODE:
            code = self._transformed(body[0])
            if name == "timeit":  # the line is setup code, run in one function with the body
                code = _statement(line, _LINE_CODE["timeit"]) + "\n" + code
            self._embedded(code, binds=name != "timeit")

    def _transformed(self, code: str) -> str:
        return code if self.transform is None else self.transform(code)

    def _embedded(self, code: str, binds: bool) -> None:
        """Analyse Python a magic runs here; with ``binds=False`` keep only what it reads."""
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError):
            return  # IPython will say so when the cell runs
        kept = (dict(self.binds), dict(self.dels), _copy(self.module.state), dict(self.literals))
        self._visit_body(tree.body)
        if not binds:
            self.binds, self.dels, self.module.state, self.literals = kept

    def _expanded_reads(self, text: str) -> None:
        """The names IPython expands into a command or magic line: ``{expr}`` and ``$name``."""
        try:
            expressions = [f for _, f, _, _ in string.Formatter().parse(text) if f]
        except ValueError:
            expressions = []
        for expression in expressions:
            with contextlib.suppress(SyntaxError, ValueError):
                self.visit(ast.parse(expression, mode="eval"))
        for name in _DOLLAR_NAME.findall(text):
            self._read(name)

    def _capture_target(self, line: str) -> None:
        words = [w for w in line.split() if not w.startswith("-")]
        if words and words[-1].isidentifier():
            self._bind(words[-1])

    def _file(self, function: str, path: ast.expr) -> None:
        literal = _string(path)
        if literal is not None:
            self.files.setdefault(FileRead(function, path=literal))
        elif isinstance(path, ast.Name):
            if self.scope is self.module and path.id in self.literals:
                self.files.setdefault(FileRead(function, path=self.literals[path.id]))
            elif self._is_global(path.id) and path.id not in (self.module.state or ()):
                self.files.setdefault(FileRead(function, name=path.id))


#: Methods by which the built-in containers (and ``collections``') change in place.
_IN_PLACE_METHODS = frozenset(
    {
        "append",
        "appendleft",
        "extend",
        "extendleft",
        "insert",
        "update",
        "setdefault",
        "pop",
        "popitem",
        "popleft",
        "remove",
        "discard",
        "add",
        "clear",
        "sort",
        "reverse",
    }
)

#: Builtins that never change what they are given.
_PURE_BUILTINS = frozenset(
    {
        "print",
        "len",
        "sum",
        "min",
        "max",
        "sorted",
        "list",
        "tuple",
        "dict",
        "set",
        "frozenset",
        "str",
        "repr",
        "int",
        "float",
        "bool",
        "abs",
        "round",
        "range",
        "enumerate",
        "zip",
        "any",
        "all",
        "isinstance",
        "issubclass",
        "type",
        "id",
        "hash",
        "iter",
        "map",
        "filter",
        "format",
        "reversed",
        "divmod",
        "pow",
        "chr",
        "ord",
        "hex",
        "bin",
        "oct",
        "callable",
        "hasattr",
        "getattr",
        "vars",
        "dir",
        "display",
        "open",
    }
)
_SHELL_METHODS = {"run_line_magic": "%", "run_cell_magic": "%%", "system": "!", "getoutput": "!!"}
#: Line magics whose argument is Python run in the namespace, with the options they take a value
#: for (``%timeit -n 10 -r 3 stmt``); ``%timeit`` binds nothing (it runs in a function).
_LINE_CODE = {"time": "", "timeit": "nrp", "prun": "lDTsq"}
#: Cell magics whose body is Python run in the namespace.
_CELL_CODE = frozenset({"time", "timeit", "prun", "capture"})
_DOLLAR_NAME = re.compile(r"(?<![$\\])\$([A-Za-z_][A-Za-z0-9_]*)")
#: Readers whose first argument (or one of these keywords) is a path.
_PATH_KEYWORDS = (
    "filepath_or_buffer",
    "path",
    "path_or_buf",
    "file",
    "fname",
    "filename",
    "io",
    "urlpath",
    "source",
)
_READERS = frozenset(
    {"open", "load", "loadtxt", "genfromtxt", "fromfile", "memmap", "imread", "load_npz", "loadmat"}
)
_PATH_READERS = frozenset({"read_text", "read_bytes", "open"})


def is_get_ipython(node: ast.AST) -> bool:
    """Whether ``node`` is the call ``get_ipython()``, by which Python reaches IPython's shell."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "get_ipython"
    )


def ipython_call(node: ast.AST) -> tuple[str, list[str]] | None:
    """``("run_line_magic", ["time", "x = f()"])`` for IPython's transformed syntax,
    ``get_ipython().run_line_magic("time", "x = f()")`` (also ``run_cell_magic``, ``system``,
    ``getoutput``): the method and its arguments, all string literals; None for any other call,
    such as one with computed arguments (``get_ipython()`` used as an object)."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _SHELL_METHODS
        and is_get_ipython(node.func.value)
    ):
        return None
    args = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if len(args) != len(node.args) or node.keywords:
        return None
    return node.func.attr, args


def _statement(line: str, valued_options: str) -> str:
    """A magic line without its leading options: ``-n 10 -r 3 f(x)`` -> ``f(x)``."""
    words = line.split(" ")
    while words and words[0].startswith("-") and len(words[0]) > 1:
        option = words.pop(0)
        if option[-1] in valued_options and len(option) == 2 and words:
            words.pop(0)
        while words and not words[0]:
            words.pop(0)
    return " ".join(words)


def file_read(node: ast.Call) -> tuple[str, ast.expr] | None:
    """``("pd.read_csv", <path expr>)`` when ``node`` reads a file by a path it names."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if (
        name in _PATH_READERS
        and isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Call)
        and dotted(func.value.func).rpartition(".")[2] in ("Path", "PurePath")
        and func.value.args
    ):
        return dotted(func), func.value.args[0]
    if not (name in _READERS or name.startswith("read_")):
        return None
    if node.args and not isinstance(node.args[0], ast.Starred):
        return dotted(func), node.args[0]
    for keyword in node.keywords:
        if keyword.arg in _PATH_KEYWORDS:
            return dotted(func), keyword.value
    return None


def dotted(node: ast.expr) -> str:
    """``np.load`` for the expression ``np.load``; ``Path(...).read_text`` for a call in it."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return f"{dotted(node.func)}(...)"
    return "..."


def _string(node: ast.expr) -> str | None:
    """The string a literal (or ``Path("literal")``) stands for; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if (
        isinstance(node, ast.Call)
        and dotted(node.func).rpartition(".")[2] in ("Path", "PurePath")
        and len(node.args) == 1
        and not node.keywords
    ):
        return _string(node.args[0])
    return None


def _ends_with_semicolon(source: str) -> bool:
    """IPython's rule: the cell's last token, comments and newlines aside, is ``;``."""
    if ";" not in source:
        return False  # without tokenizing: most cells
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return False
    skip = {tokenize.ENDMARKER, tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.DEDENT}
    for token in reversed(tokens):
        if token.type not in skip:
            return token.type == tokenize.OP and token.string == ";"
    return False


def analyze_cell(source: str, transform: Callable[[str], str] | None = None) -> CellAnalysis:
    """Analyse one cell's Python source: what it reads, binds, deletes and imports.

    Parameters
    ----------
    source
        The cell as plain Python (IPython syntax such as ``%magic`` or ``!cmd`` already
        transformed, e.g. by ``shell.transform_cell``). Top-level ``await`` is allowed, as in
        IPython.
    transform
        Turns IPython source into Python (``shell.transform_cell``), for the bodies of cell
        magics such as ``%%time`` inside the cell; without it they are parsed as they are.

    Returns
    -------
    CellAnalysis
        The cell's record; see the module docstring for the rules on edge cases.

    Raises
    ------
    SyntaxError
        The source does not compile (including ``return`` outside a function), unchanged.

    Examples
    --------
    >>> a = analyze_cell("total += x\\nmean = total / n;")
    >>> a.inputs, a.outputs, a.has_last_expr
    (('total', 'x', 'n'), ('total', 'mean'), False)
    """
    tree = _parse(source)
    visitor = _CellVisitor(transform)
    visitor.visit_cell(tree.body)
    has_last_expr = bool(tree.body) and isinstance(tree.body[-1], ast.Expr)
    return _record(visitor, has_last_expr, has_last_expr and _ends_with_semicolon(source))


def analyze_statements(
    source: str,
    transform: Callable[[str], str] | None = None,
    *,
    tree: ast.Module | None = None,
) -> tuple[CellAnalysis, ...]:
    """Analyse each top-level statement of a cell alone, as :func:`analyze_cell` would analyse
    the cell made of that statement only (so a name an earlier statement binds is an input).

    The source is parsed once (not at all when the caller gives its ``tree``, parsed from
    ``source``); the exporter asks this what each statement reads and binds, for the
    statements it moves or weighs one by one.

    Returns
    -------
    tuple[CellAnalysis, ...]
        One record per top-level statement, in order; ``has_last_expr`` says the statement is
        an expression, ``last_expr_silenced`` that ``;`` follows it.

    Raises
    ------
    SyntaxError
        The source does not compile, as for :func:`analyze_cell`.
    """
    tree = _parse(source) if tree is None else tree
    lines = source.splitlines()
    records = []
    for stmt in tree.body:
        visitor = _CellVisitor(transform)
        visitor.visit_cell([stmt])
        expression = isinstance(stmt, ast.Expr)
        silenced = expression and _followed_by_semicolon(lines, stmt)
        records.append(_record(visitor, expression, silenced))
    return tuple(records)


def _parse(source: str) -> ast.Module:
    """The cell's syntax tree, once it is known to compile (top-level ``await`` allowed)."""
    try:
        tree = ast.parse(source)
    except ValueError as e:  # null bytes, before Python 3.12
        raise SyntaxError(str(e)) from None
    compile(tree, "<cell>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    return tree


def _followed_by_semicolon(lines: list[str], stmt: ast.stmt) -> bool:
    """Whether ``;`` follows the statement on its last line."""
    line = lines[(stmt.end_lineno or stmt.lineno) - 1].encode()  # offsets count UTF-8 bytes
    return line[stmt.end_col_offset or 0 :].lstrip().startswith(b";")


def _record(visitor: _CellVisitor, has_last_expr: bool, silenced: bool) -> CellAnalysis:
    """The frozen record of what a visitor collected over a cell."""
    final = visitor.module.state or set()
    return CellAnalysis(
        inputs=tuple(visitor.reads),
        outputs=tuple(visitor.binds),
        deleted=tuple(name for name in visitor.dels if name not in final),
        imports=tuple(visitor.imports),
        star_imports=tuple(visitor.star_imports),
        functions=tuple(visitor.functions),
        classes=tuple(visitor.classes),
        mutated=tuple(visitor.mutated),
        function_mutated=tuple(
            (function, tuple(names)) for function, names in visitor.function_mutated.items()
        ),
        magics=tuple(visitor.magics),
        files=tuple(visitor.files),
        maybe_unbound=tuple(
            name for name in visitor.binds if name not in final or name not in visitor.top_binds
        ),
        function_globals=tuple(visitor.function_globals),
        top_level_await=visitor.top_level_await,
        loops_over=tuple(visitor.loops_over),
        unpicklable=tuple(visitor.unpicklable),
        has_last_expr=has_last_expr,
        last_expr_silenced=silenced,
    )
