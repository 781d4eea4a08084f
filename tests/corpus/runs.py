"""Running a corpus notebook in a real kernel, and what a user would compare between two runs.

A run's record is, for each code cell, what it showed (printed text, displays, ``Out[]``,
errors), normalised only where two honest runs differ anyway (timings, object addresses,
taskcell's own status lines), and the values of the notebook's names at the end.
"""

from __future__ import annotations

import json
import pathlib
import re
from dataclasses import dataclass

import nbformat
from nbclient import NotebookClient

NOTEBOOKS = sorted((pathlib.Path(__file__).parent / "notebooks").glob("*.ipynb"))

_TIMING = [
    re.compile(r"^(CPU times|Wall time):.*$", re.M),
    re.compile(r"^.* ± .* per loop \(mean ± std\. dev\. of .*\)$", re.M),
]
#: %timeit's note on runs that varied: printed or not as the machine's load has it, so dropped.
_VARIED = re.compile(r"^The slowest run took .* times longer than the fastest\..*\n?", re.M)
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")
#: Where a warning was raised: a cell's file name is the kernel's own (``/tmp/ipykernel_…``).
_WARNED_AT = re.compile(r"^.+?:\d+: (\w+Warning: )", re.M)
_NOTE = re.compile(r"^taskcell: .*\n?", re.M)
_LOST = re.compile(r"^taskcell: (\w+) \(.*\) cannot come back from the worker", re.M)

# The last cell of every run: the notebook's names, as values two processes can compare.
_NAMES_CELL = r"""
def _taskcell_canon(value, depth=0):
    import types
    if depth > 6:
        return type(value).__name__
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return [_taskcell_canon(v, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(repr(_taskcell_canon(v, depth + 1)) for v in value)
    if isinstance(value, dict):  # timings differ between any two runs
        items = [(repr(_taskcell_canon(k)), _taskcell_canon(v, depth + 1))
                 for k, v in value.items() if "time" not in str(k)]
        return sorted(items)
    kind = type(value).__module__.partition(".")[0]
    code = (types.ModuleType, type, types.FunctionType)
    if kind in ("dask", "distributed", "matplotlib") or isinstance(value, code):
        return None
    if kind == "numpy" and hasattr(value, "tolist"):
        dtype = str(getattr(value, "dtype", ""))
        return [type(value).__name__, dtype, _taskcell_canon(value.tolist(), depth + 1)]
    if kind == "pandas" and hasattr(value, "to_json"):
        return [type(value).__name__, value.to_json(orient="split")]
    if hasattr(value, "__dict__"):
        return [type(value).__name__, _taskcell_canon(vars(value), depth + 1)]
    return type(value).__name__


import json as _taskcell_json
print("TASKCELL-NAMES" + _taskcell_json.dumps({
    _n: _taskcell_canon(_v) for _n, _v in list(globals().items())
    if not _n.startswith("_") and _n not in ("In", "Out", "get_ipython", "exit", "quit")
    and _taskcell_canon(_v) is not None
}))
"""


@dataclass
class Run:
    """What one run of a notebook showed, cell by cell, and its names' values at the end."""

    cells: list[list[tuple]]
    names: dict[str, object]
    #: Names taskcell said could not come back from a worker.
    lost: set[str]


def without_taskcell(book: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook as it was before ``%%task`` lines were added: every taskcell line gone,
    each cell where it was."""
    plain = nbformat.from_dict(json.loads(json.dumps(book)))
    for cell in plain.cells:
        if cell.cell_type == "code":
            lines = cell.source.split("\n")
            kept = [
                line
                for line in lines
                if not line.startswith("%%task") and line.strip() != "%load_ext taskcell"
            ]
            cell.source = "\n".join(kept)
    return plain


def run(book: nbformat.NotebookNode, folder: pathlib.Path, timeout: int = 300) -> Run:
    """Execute ``book`` in a fresh kernel (errors allowed, as a user would see them)."""
    book = nbformat.from_dict(json.loads(json.dumps(book)))
    book.cells.append(nbformat.v4.new_code_cell(_NAMES_CELL))
    NotebookClient(
        book,
        kernel_name="python3",
        timeout=timeout,
        allow_errors=True,
        resources={"metadata": {"path": str(folder)}},
    ).execute()
    code = [c for c in book.cells if c.cell_type == "code"]
    final = "".join(o.get("text", "") for o in code[-1].outputs if o.output_type == "stream")
    assert "TASKCELL-NAMES" in final, f"the last cell did not run: {code[-1].outputs}"
    names = json.loads(final.split("TASKCELL-NAMES", 1)[1])
    shown = [_outputs(c.outputs) for c in code[:-1]]
    lost = {
        m.group(1)
        for c in code
        for o in c.outputs
        if o.output_type == "stream"
        for m in _LOST.finditer(o.get("text", ""))
    }
    return Run(shown, names, lost)


def _outputs(outputs: list) -> list[tuple]:
    """A cell's outputs as a user compares them: streams joined whole, each display by MIME
    type, ``Out[]`` and errors, with timings and addresses masked."""
    shown: list[tuple] = []
    for out in outputs:
        kind = out.output_type
        if kind == "stream":
            text = _masked(_NOTE.sub("", out.text))
            if shown and shown[-1][0] == "stream" and shown[-1][1] == out.name:
                shown[-1] = ("stream", out.name, shown[-1][2] + text)
            elif text:
                shown.append(("stream", out.name, text))
        elif kind in ("display_data", "execute_result"):
            data = {k: _masked(v) if isinstance(v, str) else v for k, v in out.data.items()}
            if str(data.get("text/plain", "")).startswith("taskcell:"):
                continue
            shown.append((kind, sorted(data.items())))
        elif kind == "error":
            shown.append(("error", out.ename, _masked(out.evalue)))
    return [s for s in shown if s[0] != "stream" or s[2]]


def _masked(text: str) -> str:
    text = _VARIED.sub("", text)
    for pattern in _TIMING:
        text = pattern.sub("<timing>", text)
    text = _WARNED_AT.sub(r"<cell>: \1", text)
    return _ADDRESS.sub(" at 0x…", text)
