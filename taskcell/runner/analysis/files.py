"""The files a cell opens by a path it names, as the planner reads them to size a task.

A file the cell opens (``open("a.csv")``, ``pd.read_csv(path)``, ``np.load(...)``,
``Path("x").read_text()``) is found by the call's name and where its path argument sits; the
path is known when it is a literal (or ``Path`` of one). The planner's recognisers ask
:func:`file_read` and :func:`dotted` directly.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass


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


#: Readers whose first argument (or one of these keywords) is a path.
_PATH_KEYWORDS = (
    "filepath_or_buffer", "path", "path_or_buf", "file", "fname", "filename", "io", "urlpath",
    "source",
)  # fmt: skip
_READERS = frozenset(
    {"open", "load", "loadtxt", "genfromtxt", "fromfile", "memmap", "imread", "load_npz", "loadmat"}
)
_PATH_READERS = frozenset({"read_text", "read_bytes", "open"})


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


def path_literal(node: ast.expr) -> str | None:
    """The string a literal (or ``Path("literal")``) stands for; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if (
        isinstance(node, ast.Call)
        and dotted(node.func).rpartition(".")[2] in ("Path", "PurePath")
        and len(node.args) == 1
        and not node.keywords
    ):
        return path_literal(node.args[0])
    return None
