"""``make demo``: run the demo notebooks headless, in a real kernel, and print what they showed.

Each notebook runs top to bottom on the embedded cluster (no cluster configured), exactly as a
new user running it in JupyterLab would; a cell that fails stops the demo with its error. The
export notebook is then exported to a workflow module, which runs with plain ``python``.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import tempfile
import time

#: The notebooks ``make demo`` runs, in order (those present in demo_notebooks/).
NOTEBOOKS = ("01-resources", "02-task-magic", "03-planner", "04-export")


def _text(output: dict) -> str:
    if output["output_type"] == "stream":
        return output["text"]
    if output["output_type"] == "error":
        return f"{output['ename']}: {output['evalue']}\n"
    data = output.get("data", {})
    return str(data.get("text/plain", "")) + "\n" if data else ""


def run(path: pathlib.Path) -> None:
    """Execute the notebook at ``path`` and print each code cell with what it showed."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    started = time.monotonic()
    NotebookClient(
        nb, kernel_name="python3", timeout=300, resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    print(f"\n=== {path.name}: ran {len(nb.cells)} cells in {time.monotonic() - started:.1f} s")
    for i, cell in enumerate(nb.cells, 1):
        if cell.cell_type != "code":
            continue
        print(f"\n--- [{i}] " + cell.source.splitlines()[0] if cell.source else f"--- [{i}]")
        shown = "".join(_text(o) for o in cell.get("outputs", []))
        lines = shown.rstrip().splitlines()
        print(
            "\n".join(
                lines[:25] + ([f"... ({len(lines) - 25} more lines)"] if len(lines) > 25 else [])
            )
        )


def run_exported(path: pathlib.Path) -> None:
    """Export the notebook to a workflow module, run it with ``python``, print what it printed."""
    from taskcell.export import export_file

    with tempfile.TemporaryDirectory() as folder:
        module = export_file(path, pathlib.Path(folder) / "workflow.py")
        print(f"\n=== taskcell export {path.name} -o workflow.py && python workflow.py")
        done = subprocess.run(
            [sys.executable, str(module)], capture_output=True, text=True, timeout=300, check=True
        )
        print(done.stdout.rstrip())


def main(argv: list[str] | None = None) -> int:
    folder = pathlib.Path(__file__).resolve().parent.parent / "demo_notebooks"
    names = (argv if argv is not None else sys.argv[1:]) or NOTEBOOKS
    for name in names:
        path = folder / f"{name}.ipynb"
        if path.exists():
            run(path)
            if name == "04-export":
                run_exported(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
