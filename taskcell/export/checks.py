"""What a notebook may do that a module cannot, found once here, each message naming the cell.

Refused (a problem of the cell; export names every such cell): a notebook function that
declares ``global`` (the module keeps the notebook's names inside ``main()``), top-level
``await`` (only IPython runs it), and a request over the configured platform's limits. Noted (a
sentence in the module): reading IPython's output history (``_``, ``Out``...). Found for the
planner: the statements that make a Dask cluster or client, and whether the module needs
IPython's shell. What a cell binds, changes and awaits is the one cell analysis's
(:class:`~taskcell.runner.analysis.CellAnalysis`); this module only words it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Mapping

from taskcell.errors import SpecError
from taskcell.export.notebook import Cell, ExportError
from taskcell.export.requests import TaskRequest
from taskcell.spec import PROFILES, check_limits

_HISTORY = re.compile(r"_+|_i+|_\d+|_i\d+|In|Out|_oh|_ih|_dh")
_DISPLAY = re.compile(r"(?<![.\w])display\s*\(")
#: Packages whose ``Client``, ``LocalCluster``, ``...Cluster`` make a Dask cluster or client.
DASK_PACKAGES = frozenset(
    {
        "dask",
        "distributed",
        "dask_jobqueue",
        "dask_kubernetes",
        "dask_gateway",
        "dask_cloudprovider",
    }
)


def module_problems(cell: Cell) -> list[str]:
    """Why the cell cannot run in a module function: ``global`` in a notebook function,
    top-level ``await`` (which IPython runs; a module function cannot, outside ``async def``)."""
    problems = [
        f"{cell.label}: function {function}() declares `global {', '.join(names)}`; the "
        f"exported module keeps the notebook's names inside main(), where a "
        f"function cannot rebind them. Return the new value instead"
        for function, names in cell.analysis.function_globals
    ]
    if cell.analysis.top_level_await is not None:
        problems.append(
            f"{cell.label}: top-level `await` (line {cell.analysis.top_level_await}) runs only "
            f"in IPython; wrap the code in an async function and call asyncio.run(...)"
        )
    return problems


def check_platform(cell: Cell, request: TaskRequest, platform: str) -> None:
    """Refuse a request over the limits of ``platform`` (a profile name or a mapping)."""
    try:
        check_limits(request.resources, PROFILES.get(platform, platform))
    except SpecError as e:
        raise ExportError(f"{cell.label}: {e}") from e


def history_notes(cell: Cell, bound: Callable[[str], bool]) -> list[str]:
    """A note per name the cell reads from IPython's output history, unless the notebook
    ``bound`` it itself."""
    return [
        f"{cell.label}: reads {name!r}, IPython's output history, which the module does not have"
        for name in cell.analysis.inputs
        if _HISTORY.fullmatch(name) and not bound(name)
    ]


def reads_display(codes: Iterable[str]) -> bool:
    """Whether any cell calls ``display(...)`` (a builtin in IPython, not in a module)."""
    return any(_DISPLAY.search(code) for code in codes)


def uses_ipython(cells: Iterable[Cell], modules: Iterable[str]) -> bool:
    """Whether the module needs IPython's shell: the notebook imports IPython, displays values
    or captures output."""
    if any(module.partition(".")[0] == "IPython" for module in modules):
        return True
    return any(
        {"capture", "display"} & set(cell.roles) or _DISPLAY.search(cell.code) for cell in cells
    )


def imported_module(import_text: str) -> str:
    """The module a one-alias import takes its name from: ``numpy`` for ``import numpy as np``,
    ``dask.distributed`` for ``from dask.distributed import Client``."""
    words = import_text.split()
    return words[1] if words else ""


def cluster_setups(tree: ast.Module, dask_names: Mapping[str, str]) -> list[tuple[ast.stmt, str]]:
    """The top-level statements that make a Dask client or cluster (``client = Client()``,
    ``cluster = LocalCluster(...)``), with the name each binds. ``dask_names`` maps the names
    bound to Dask's modules and classes to their module."""
    found: list[tuple[ast.stmt, str]] = []
    for stmt in tree.body:
        if not (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Call)
        ):
            continue
        parts = dotted(stmt.value.func)
        if not parts or parts[0] not in dask_names:
            continue
        last = parts[-1]
        if last in ("Client", "get_client") or last.endswith("Cluster"):
            found.append((stmt, stmt.targets[0].id))
    return found


def dotted(node: ast.expr) -> list[str]:
    """``["distributed", "Client"]`` for ``distributed.Client``; empty for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    return [node.id, *parts] if isinstance(node, ast.Name) else []
