"""The demo notebooks a new user opens first run top to bottom in a real kernel."""

from __future__ import annotations

import pathlib

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.slow

FOLDER = pathlib.Path(__file__).resolve().parent.parent / "demo_notebooks"


def execute(name: str) -> list[str]:
    """Run the notebook as `make demo` does; each code cell's outputs as one text."""
    nb = nbformat.read(FOLDER / f"{name}.ipynb", as_version=4)
    NotebookClient(nb, kernel_name="python3", timeout=300).execute()
    texts = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            # Printed text is joined whole, however the kernel chunked it.
            streams = "".join(out.get("text", "") for out in cell.outputs)
            parts = [streams]
            for out in cell.outputs:
                parts.append(out.get("data", {}).get("text/plain", ""))
                parts.append(f"{out.get('ename', '')}: {out.get('evalue', '')}")
            texts.append("\n".join(parts))
    return texts


def test_resources_notebook():
    shown = "\n".join(execute("01-resources"))
    assert "Resources(cpu=(2, 8), memory=('8Gi', '32Gi'), gpu='A100:2'" in shown
    assert 'did you mean "2G" or "2Gi"?' in shown
    assert "total: 4950" in shown
    assert "asks GPU-H100=8" in shown


def test_task_magic_notebook():
    shown = execute("02-task-magic")
    text = "\n".join(shown)
    assert "kept 142858 values" in text
    assert "ValueError: bad batch" in text
    assert "step 2" in text
    assert "RemoteValue 'large'" in text
    assert "(4000000.0, (4000000,))" in text
    assert "asks GPU-A100=2" in text
    assert "finished> -> 42" in text


def test_planner_notebook():
    text = "\n".join(execute("03-planner"))
    assert "second: assigned  waiting on this worker for CPU=" in text
    assert "True True True" in text
    assert "medium_task fits: 12 GiB of input" in text and "No preset fits" in text
    assert "prepare asked for" in text and "of memory and peaked at" in text
    assert "basis='history'" in text
