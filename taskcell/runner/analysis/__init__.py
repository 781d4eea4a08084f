"""What one cell reads, binds and deletes: the analysis ``%%task`` and the exporter share.

Modelled on marimo's ``_ast``: the analysis is split by concern, each part with the rules it
follows in its docstring, and one pure function, :func:`analyze_cell`, composes them into a
frozen :class:`CellAnalysis`. Pure Python on the standard library; nothing here imports IPython
or Dask.

- :mod:`.scopes`: Python's scoping and flow, which global names the cell reads, binds, deletes.
- :mod:`.ipython`: IPython's embedded language, the Python its magics and shell escapes run.
- :mod:`.effects`: what the cell changes in place, the files it opens, what no pickle carries.
- :mod:`.files`: the files a call opens by a path it names, which the planner asks too.

:func:`analyze_statements` analyses each top-level statement alone, by the same rules: what it
reads and binds, taken out of its cell. :func:`taskcell.runner.closure.function_globals`
complements this at run time, from byte code.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from taskcell.runner.analysis.effects import EffectsVisitor
from taskcell.runner.analysis.files import FileRead, dotted, file_read
from taskcell.runner.analysis.ipython import (
    Shell,
    ends_with_semicolon,
    followed_by_semicolon,
    ipython_call,
    is_get_ipython,
    shell,
)
from taskcell.runner.analysis.scopes import copy_state

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
        Notebook names whose objects the cell may change in place, in order (see
        :mod:`.effects`).
    function_mutated
        For each top-level function that may change global names in place when called, those
        names, as ``(function, names)`` pairs in order of definition (see :mod:`.effects`).
    magics
        IPython magics and shell escapes the cell uses, as written: ``"%time"``,
        ``"%%capture"``, ``"!"`` (``!cmd``), ``"!!"`` (``x = !cmd``), in order of use.
    files
        Files the cell reads by a path it names, in order (see :class:`FileRead`).
    maybe_unbound
        Those of ``outputs`` the cell may finish without (see :mod:`.scopes`): a task returning
        one may find it unbound.
    function_globals
        For each ``global`` statement in a function the cell defines, ``(function, names)``,
        once for each function it is in, outermost first; a function's body comes after the
        statement that defines it.
    top_level_await
        The line of the cell's first top-level ``await`` (see :mod:`.scopes`); None if it has
        none.
    loops_over
        Names the cell's top-level ``for`` loops run over (see :mod:`.effects`).
    unpicklable
        Names the cell's top-level statements bind to a generator or an open file (see
        :mod:`.effects`).
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


class _CellVisitor(EffectsVisitor):
    """A cell's scopes and effects, with those of the Python its IPython syntax runs."""

    def __init__(self, transform: Callable[[str], str] | None = None) -> None:
        super().__init__()
        self.transform = transform
        self.magics: dict[str, None] = {}

    def visit_Call(self, node: ast.Call) -> None:
        super().visit_Call(node)
        call = ipython_call(node)
        if call is not None and call[1]:
            self._shell(shell(*call, self.transform))

    def _shell(self, run: Shell) -> None:
        """A magic or shell escape, with the Python it runs in the notebook's namespace."""
        self.magics.setdefault(run.magic)
        self._visit_all(run.reads)
        if run.captured is not None:
            self._bind(run.captured)
        state = copy_state(self.module.state)
        kept = (dict(self.binds), dict(self.dels), state, dict(self.literals))
        self._visit_body(run.code)
        if not run.binds:  # keep only what it reads
            self.binds, self.dels, self.module.state, self.literals = kept


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
        The cell's record; see the parts' docstrings for the rules on edge cases.

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
    return _record(visitor, has_last_expr, has_last_expr and ends_with_semicolon(source))


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
        silenced = expression and followed_by_semicolon(lines, stmt)
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
