"""Python's scoping, for one cell: which global names it reads, binds and deletes.

Modelled on marimo's ``_ast`` visitor: one :class:`ast.NodeVisitor` walks the cell with Python's
own scoping rules and control flow, and collects definitions and references. It is conservative
in the direction that is safe for shipping a cell to a worker: when a name *may* be read before
the cell binds it, it is an input. The rules, one line each:

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
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

# Names every cell can read without the notebook's namespace. IPython adds the last three to
# builtins while it runs a cell; they are listed so the result is the same in and out of IPython.
# Single-underscore names are left out: ``_`` is IPython's last output (or gettext's), a global.
BUILTINS: frozenset[str] = frozenset(
    name
    for name in dir(builtins)
    if not name.startswith("_") or (name.startswith("__") and name.endswith("__"))
) | {"__builtins__", "display", "get_ipython", "__IPYTHON__"}


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


def copy_state(state: State) -> State:
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
        parts += [p.annotation for p in _parameters(args) if p.annotation is not None]
        if node.returns is not None:
            parts.append(node.returns)
    return parts


def _parameters(args: ast.arguments) -> list[ast.arg]:
    """Every parameter a function takes, in order."""
    params = [*args.posonlyargs, *args.args, args.vararg, *args.kwonlyargs, args.kwarg]
    return [p for p in params if p is not None]


def _function_locals(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> _Scope:
    """A function scope with the names Python makes local to it and those declared global."""
    args = node.args
    bound = {p.arg for p in _parameters(args)}
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


class ScopeVisitor(ast.NodeVisitor):
    """Collects a cell's global reads, binds and deletions, with Python's scoping and flow."""

    def __init__(self) -> None:
        self.module = _Scope(kind="module")
        self.scope = self.module
        self.reads: dict[str, None] = {}
        self.binds: dict[str, None] = {}
        self.dels: dict[str, None] = {}
        self.imports: dict[str, None] = {}
        self.star_imports: dict[str, None] = {}
        self.functions: dict[str, None] = {}
        self.classes: dict[str, None] = {}
        self._function: str | None = None  # the top-level function whose body is visited
        self.top_binds: dict[str, None] = {}  # names bound outside any function
        self.function_globals: dict[tuple[str, tuple[str, ...]], None] = {}
        self.top_level_await: int | None = None
        self._statement: ast.stmt | None = None  # the cell's top-level statement being visited
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

    def _read(self, name: str) -> None:
        if self._reads_notebook(name):
            self.reads.setdefault(name)

    def _reads_notebook(self, name: str) -> bool:
        """Whether reading ``name`` here reads the notebook's value: a global not bound yet."""
        return (
            self._is_global(name)
            and name not in (self.module.state or ())
            and (name not in BUILTINS)
        )

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
            self._bind_global(name)
        elif scope.kind == "class" and scope.state is not None:
            scope.state.add(name)

    def _bind_global(self, name: str) -> None:
        """Bind a notebook name: an output, and bound from here on (subclasses add facts)."""
        self.binds.setdefault(name)
        if not self._in_function():
            self.top_binds.setdefault(name)
        if self.module.state is not None:
            self.module.state.add(name)

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
            flow.state = copy_state(start)
            branch()
            ends.append(flow.state)
        flow.state = _meet(ends)

    def _end_path(self) -> None:
        self._flow().state = None

    def _loop(self, node: ast.For | ast.AsyncFor | ast.While) -> None:
        flow = self._flow()
        start = copy_state(flow.state)
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

    def _lambda_name(self, target: ast.AST) -> None:
        if self.scope is self.module and isinstance(target, ast.Name):
            self.functions.setdefault(target.id)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name):
            self._read(node.target.id)
            self.visit(node.value)
            self._bind(node.target.id)
        else:
            self.visit(node.target)
            self.visit(node.value)

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
        self._loops[-1].breaks.append(copy_state(self._flow().state))
        self._end_path()

    def visit_Continue(self, node: ast.Continue) -> None:
        self._loops[-1].continues.append(copy_state(self._flow().state))
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
        start = copy_state(flow.state)
        self._visit_body(node.body)
        body_end = flow.state
        flow.state = copy_state(body_end)
        self._visit_body(node.orelse)
        ends = [flow.state]
        # A handler may start anywhere in the body: count only what was bound before it.
        handler_start = _meet([start, body_end])
        for handler in node.handlers:
            flow.state = copy_state(handler_start)
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
            flow.state = copy_state(final_start)
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
        start = copy_state(flow.state)
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
