"""What a cell may do besides binding names: change objects in place, open files, hold
values no pickle carries.

A :class:`~taskcell.runner.analysis.scopes.ScopeVisitor` that also notes, as it walks:

- ``mutated``: the notebook names whose objects the cell may change in place: the base of an
  attribute or item it assigns, deletes or augments (``d[k] = v``, ``o.a += 1``), of a method it
  calls (``lst.append(x)``, ``model.fit(X)``, ``np.random.seed(0)``: a module too; consumers drop
  what they know is code), a name passed to a call other than a builtin that changes nothing
  (``shuffle(items)``), and ``x += ...`` on a name it reads. Only names read from the notebook
  count: a cell's own new objects are its outputs.
- ``function_mutated``: for each function the cell defines at top level, the global names it (or
  a function nested in it) surely changes in place when called, whoever binds them: an item or
  attribute it stores or deletes, a container's in-place method (``log.append(x)``), not a name
  it only passes to a call. What a task that calls it changes without naming.
- ``files``: a file the cell opens by a path it names (:mod:`.files`), with the path when it is a
  literal (or a name the cell bound to one), or the notebook name holding it.
- Two facts about the cell's own top-level statements (not those nested in a block):
  ``loops_over``, the names a ``for`` loop runs over (``for m in models``, ``for k, v in
  d.items()``/``.values()``), whose items the loop may change in place without naming them;
  ``unpicklable``, the names ``NAME = (generator expression)`` or ``NAME = open(...)`` binds to a
  value no pickle carries.
"""

from __future__ import annotations

import ast

from taskcell.runner.analysis.files import FileRead, file_read, path_literal
from taskcell.runner.analysis.scopes import BUILTINS, ScopeVisitor


class EffectsVisitor(ScopeVisitor):
    """Collects, besides scopes, what a cell changes in place, the files it opens and what it
    binds to values no pickle carries."""

    def __init__(self) -> None:
        super().__init__()
        self.mutated: dict[str, None] = {}
        self.function_mutated: dict[str, dict[str, None]] = {}
        self.files: dict[FileRead, None] = {}
        self.loops_over: dict[str, None] = {}
        self.unpicklable: dict[str, None] = {}
        #: Module-level names the cell last bound to a string literal (``path = "a.csv"``).
        self.literals: dict[str, str] = {}

    def _bind_global(self, name: str) -> None:
        super()._bind_global(name)
        self.literals.pop(name, None)

    def visit_Assign(self, node: ast.Assign) -> None:
        super().visit_Assign(node)
        if node is self._statement:
            self._note_unpicklable(node)
        literal = path_literal(node.value)
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

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        # In a function, `global n; n += 1` rebinds n: no change in place by that function.
        self._mutate(node.target, by_function=not isinstance(node.target, ast.Name))
        super().visit_AugAssign(node)

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
        if function is not None and self._is_global(node.id) and node.id not in BUILTINS:
            self.function_mutated.setdefault(function, {}).setdefault(node.id)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if not isinstance(node.ctx, ast.Load):
            self._mutate(node.value)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if not isinstance(node.ctx, ast.Load):
            self._mutate(node.value)
        self.generic_visit(node)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
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
        super().visit_For(node)

    visit_AsyncFor = visit_For

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        if isinstance(node.func, ast.Attribute):
            self._mutate(node.func.value, by_function=node.func.attr in _IN_PLACE_METHODS)
        if not (isinstance(node.func, ast.Name) and node.func.id in _PURE_BUILTINS):
            for argument in [*node.args, *(k.value for k in node.keywords)]:
                if isinstance(argument, (ast.Name, ast.Starred)):
                    self._mutate(argument, by_function=False)
        read = file_read(node)
        if read is not None:
            function, path = read
            self._file(function, path)

    def _file(self, function: str, path: ast.expr) -> None:
        literal = path_literal(path)
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
        "append", "appendleft", "extend", "extendleft", "insert", "update", "setdefault", "pop",
        "popitem", "popleft", "remove", "discard", "add", "clear", "sort", "reverse",
    }
)  # fmt: skip
#: Builtins that never change what they are given.
_PURE_BUILTINS = frozenset(
    {
        "print", "len", "sum", "min", "max", "sorted", "list", "tuple", "dict", "set", "frozenset",
        "str", "repr", "int", "float", "bool", "abs", "round", "range", "enumerate", "zip", "any",
        "all", "isinstance", "issubclass", "type", "id", "hash", "iter", "map", "filter", "format",
        "reversed", "divmod", "pow", "chr", "ord", "hex", "bin", "oct", "callable", "hasattr",
        "getattr", "vars", "dir", "display", "open",
    }
)  # fmt: skip
