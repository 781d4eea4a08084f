"""Helpers for the exporter's tests: notebooks from cell lists, and running exported modules."""

from __future__ import annotations

import os
import pickle
import sys
import textwrap
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from processes import run_session

#: Runs an exported module's main() in a fresh interpreter, as `python workflow.py` would, and
#: pickles the plain values it returns (once its cluster has a worker).
HARNESS = textwrap.dedent(
    """
    import pickle, runpy, sys, types
    from taskcell.cluster import connect
    from taskcell.export.runtime import run


    def main(namespace):
        connect.current_client().wait_for_workers(1)
        return namespace["main"]()


    def plain(values):
        kept = {}
        for name, value in values.items():
            if callable(value) or isinstance(value, types.ModuleType):
                continue
            try:
                pickle.dumps(value)
            except Exception:
                continue
            kept[name] = value
        return kept


    if __name__ == "__main__":  # worker processes start by importing this file
        module, out = sys.argv[1], sys.argv[2]
        scheduler = sys.argv[3] if len(sys.argv) > 3 else None
        namespace = runpy.run_path(module)  # not as __main__: the module's CLI does not run
        values = run(lambda: main(namespace), scheduler)
        with open(out, "wb") as f:
            pickle.dump({"values": plain(values)}, f)
    """
)

#: Appended to a notebook run by nbclient: pickles the kernel's plain values to _PATH.
DUMP_CELL = textwrap.dedent(
    """
    import pickle as _pickle, types as _types
    _plain = {}
    for _name, _value in list(globals().items()):
        if _name.startswith("_") or _name in ("In", "Out", "exit", "quit", "get_ipython", "open"):
            continue
        if callable(_value) or isinstance(_value, _types.ModuleType):
            continue
        try:
            _pickle.dumps(_value)
        except Exception:
            continue
        _plain[_name] = _value
    with open(_PATH, "wb") as _f:
        _pickle.dump(_plain, _f)
    """
)


def notebook(*cells: str) -> nbformat.NotebookNode:
    """A notebook of code cells; a cell starting with ``md:`` is markdown."""
    nb = new_notebook()
    for cell in cells:
        text = textwrap.dedent(cell).strip("\n")
        if text.startswith("md:"):
            nb.cells.append(new_markdown_cell(text[3:].strip()))
        else:
            nb.cells.append(new_code_cell(text))
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    return nb


def write_notebook(path: Path, *cells: str) -> Path:
    nbformat.write(notebook(*cells), path)
    return path


def run_module(
    path: Path, tmp_path: Path, env: dict[str, str] | None = None, scheduler: str | None = None
) -> dict[str, Any]:
    """Run an exported dask module's main() in a subprocess; its plain values."""
    harness = tmp_path / "harness.py"
    harness.write_text(HARNESS)
    out = tmp_path / f"{path.stem}.values.pickle"
    args = [sys.executable, str(harness), str(path), str(out), *([scheduler] if scheduler else [])]
    done = run_session(
        args, env={**os.environ, **(env or {})}, cwd=path.parent, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with open(out, "rb") as f:
        return pickle.load(f)


def run_notebook(nb: nbformat.NotebookNode, tmp_path: Path) -> dict[str, Any]:
    """Execute the notebook in a real kernel (nbclient); the kernel's plain values at the end."""
    from nbclient import NotebookClient

    out = tmp_path / "notebook.values.pickle"
    nb = nbformat.from_dict(nb)
    nb.cells.append(new_code_cell(f"_PATH = {str(out)!r}\n" + DUMP_CELL))
    NotebookClient(
        nb, kernel_name="python3", timeout=120, resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    with open(out, "rb") as f:
        return pickle.load(f)


@pytest.fixture
def write(tmp_path: Path):
    """``write(*cells) -> Path``: a notebook file in the test's folder."""
    count = iter(range(1000))

    def make(*cells: str, name: str | None = None) -> Path:
        return write_notebook(tmp_path / (name or f"nb{next(count)}.ipynb"), *cells)

    return make
