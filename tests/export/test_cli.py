"""``taskcell export`` and ``jupyter nbconvert --to taskcell``: files written, or nothing."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest

from taskcell.export import ExportError, export_file
from taskcell.export.cli import main
from taskcell.export.nbconvert_exporter import TaskcellExporter

from .conftest import notebook


def test_writes_beside_the_notebook(write, capsys):
    path = write("x = 1", "%%task\ny = x + 1", name="analysis.ipynb")
    assert main([str(path)]) == 0
    module = path.with_suffix(".py")
    assert "def compute_y(x):" in module.read_text()
    assert capsys.readouterr().err == f"wrote {module}\n"
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".")] == []


def test_output_and_target(write, tmp_path, capsys):
    path = write("%%task small_task\ny = 1")
    assert main([str(path), "-o", str(tmp_path / "out" / "flow.py"), "--target", "latch"]) == 0
    assert "@small_task" in (tmp_path / "out" / "flow.py").read_text()
    assert main([str(path), "-o", "-", "--target", "flyte"]) == 0
    assert "import flyte" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("cells", "message"),
    [
        (["x = 1", "%%task --gpu A100:0.5\ny = 1"], "cell 2 (%%task --gpu A100:0.5): gpu="),
        (["x = (", "y = 2"], "cell 1 (x = (): invalid syntax"),
    ],
    ids=["task-line", "syntax"],
)
def test_errors_leave_the_output_alone(write, tmp_path, capsys, cells, message):
    path = write(*cells)
    output = tmp_path / "kept.py"
    output.write_text("# the previous export\n")
    assert main([str(path), "-o", str(output)]) == 1
    assert output.read_text() == "# the previous export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, "kept.py"])
    err = capsys.readouterr().err
    assert err.startswith("taskcell export: error: ") and message in err


def test_malformed_notebook_file(tmp_path, capsys):
    path = tmp_path / "broken.ipynb"
    path.write_text('{"cells": [')
    assert main([str(path)]) == 1
    assert "is not a notebook: not valid JSON" in capsys.readouterr().err
    assert not path.with_suffix(".py").exists()


def test_usage_errors(write, capsys):
    assert main([]) == 2
    assert main([str(write("x = 1")), "--target", "airflow"]) == 2
    assert "invalid choice: 'airflow'" in capsys.readouterr().err


def test_refuses_to_overwrite_the_notebook(write):
    path = write("x = 1")
    with pytest.raises(ExportError, match="is the notebook itself"):
        export_file(path, path)


def test_warnings_name_the_cell(write, capsys):
    path = write("x = 1", "!ls")
    assert main([str(path)]) == 0
    assert "# !ls" in path.with_suffix(".py").read_text()
    assert capsys.readouterr().err == (
        "taskcell export: warning: cell 2 (!ls): shell escapes cannot run outside IPython; "
        f"'!ls' kept as a comment\nwrote {path.with_suffix('.py')}\n"
    )


def test_nbconvert_exporter_class(write):
    path = write("md:# Doc", "x = 1", "%%task small_task\ny = x")
    source, resources = TaskcellExporter().from_filename(str(path))
    assert resources["output_extension"] == ".py"
    assert source.startswith('"""# Doc"""') and "@small_task" in source
    flyte, _ = TaskcellExporter(target="flyte").from_notebook_node(notebook("%%task\ny = 1"))
    assert "import flyte" in flyte


def _registered() -> bool:
    entry_points = importlib.metadata.entry_points(group="nbconvert.exporters")
    return any(ep.name == "taskcell" for ep in entry_points)


def test_jupyter_nbconvert(write):
    """``--to taskcell`` once the entry point is installed; the class path works regardless."""
    path = write("x = 1", "%%task\ny = x", "!ls")
    to = "taskcell" if _registered() else "taskcell.export.nbconvert_exporter.TaskcellExporter"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "jupyter",
            "nbconvert",
            "--to",
            to,
            "--TaskcellExporter.target=flyte",
            str(path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "import flyte" in path.with_suffix(".py").read_text()
    assert "[NbConvertApp] WARNING | taskcell: cell 3 (!ls): shell escapes" in done.stderr
