"""What a notebook may do that a module cannot, found once here, each message naming the cell.

Refused (:class:`~taskcell.export.notebook.ExportError`): a notebook function that declares
``global`` (the module keeps the notebook's names inside ``main()``), top-level ``await`` (only
IPython runs it), and a request over the configured platform's limits. Noted (a sentence in the
module): reading IPython's output history (``_``, ``Out``...). Supplied: IPython's ``display``,
which a module must import.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

from taskcell.errors import SpecError
from taskcell.export.notebook import Cell, ExportError
from taskcell.export.requests import TaskRequest
from taskcell.spec import PROFILES, check_limits

_HISTORY = re.compile(r"_+|_i+|_\d+|_i\d+|In|Out|_oh|_ih|_dh")


def check_no_global(cell: Cell, tree: ast.Module) -> None:
    """Refuse a notebook function that rebinds a global: in ``main()`` it could not."""
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


def check_no_await(cell: Cell, tree: ast.Module) -> None:
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


def check_platform(cell: Cell, request: TaskRequest, platform: str) -> None:
    """Refuse a request over the limits of ``platform`` (a profile name or a mapping)."""
    try:
        check_limits(request.resources, PROFILES.get(platform, platform))
    except SpecError as e:
        raise ExportError(f"{cell.label}: {e}") from e


def history_notes(cell: Cell, bound: Iterable[str]) -> list[str]:
    """A note per name the cell reads from IPython's output history, unless ``bound`` holds it."""
    bound = set(bound)
    return [
        f"{cell.label}: reads {name!r}, IPython's output history, which the module does not have"
        for name in cell.analysis.inputs
        if _HISTORY.fullmatch(name) and name not in bound
    ]


def reads_display(trees: Iterable[ast.Module]) -> bool:
    """Whether any cell reads IPython's ``display`` (a builtin in IPython, not in a module)."""
    return any(
        isinstance(node, ast.Name) and node.id == "display" and isinstance(node.ctx, ast.Load)
        for tree in trees
        for node in ast.walk(tree)
    )
