"""``taskcell export`` and ``jupyter nbconvert --to taskcell``: files written, or nothing.

A file is replaced only if taskcell wrote it (its first line begins with ``MARKER``) or with
``--force``; anything else in the module's place is left byte for byte as it was.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

from taskcell.export import MARKER, ExportError, OverwriteError, export_file, write_module
from taskcell.export.command import main
from taskcell.export.nbconvert_exporter import TaskcellExporter

from .conftest import notebook


def test_writes_beside_the_notebook(write, capsys):
    path = write("x = 1", "%%task\ny = x + 1", name="analysis.ipynb")
    assert main([str(path)]) == 0
    module = path.with_suffix(".py")
    assert "def compute_y(x):" in module.read_text()
    assert module.read_text().splitlines()[0] == (
        f"{MARKER}analysis.ipynb; edits here are lost when it is exported again."
    )
    assert capsys.readouterr().err == f"wrote {module}\n"
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".")] == []


def test_output_and_target(write, tmp_path, capsys):
    path = write("%%task small_task\ny = 1")
    assert main([str(path), "-o", str(tmp_path / "out" / "flow.py"), "--target", "latch"]) == 0
    assert "@_small_task" in (tmp_path / "out" / "flow.py").read_text()
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
    path = write("x = 1", "!pip install tqdm")
    assert main([str(path)]) == 0
    assert "# !pip install tqdm" in path.with_suffix(".py").read_text()
    assert capsys.readouterr().err == (
        "taskcell export: warning: cell 2 (!pip install tqdm): '!pip install tqdm' left as a "
        f"comment: install that where the module runs\nwrote {path.with_suffix('.py')}\n"
    )


def test_every_cell_a_module_cannot_carry_is_named_and_nothing_is_written(write, capsys):
    path = write("x = 1", "%run setup.py", "y = x", "%%sql\nSELECT 1", "z = (")
    assert main([str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("taskcell export: error: 3 cells cannot be exported as they are:\n")
    assert "- cell 2 (%run setup.py): '%run setup.py': %run has no meaning" in err
    assert "- cell 4 (%%sql): '%%sql': %%sql has no meaning" in err
    assert "- cell 5 (z = (): invalid syntax at line 1" in err
    assert not path.with_suffix(".py").exists()


def test_nbconvert_exporter_class(write):
    path = write("md:# Doc", "x = 1", "%%task small_task\ny = x")
    source, resources = TaskcellExporter().from_filename(str(path))
    assert resources["output_extension"] == ".py"
    first, second = source.splitlines()[:2]
    assert first == f"{MARKER}{path.name}; edits here are lost when it is exported again."
    assert second == '"""# Doc"""' and "@_small_task" in source
    flyte, _ = TaskcellExporter(target="flyte").from_notebook_node(notebook("%%task\ny = 1"))
    assert "import flyte" in flyte


def _registered() -> bool:
    entry_points = importlib.metadata.entry_points(group="nbconvert.exporters")
    return any(ep.name == "taskcell" for ep in entry_points)


def test_jupyter_nbconvert(write):
    """``--to taskcell`` once the entry point is installed; the class path works regardless."""
    path = write("x = 1", "%%task\ny = x", "%pip install tqdm")
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
    assert "[NbConvertApp] WARNING | taskcell: cell 3 (%pip install tqdm): '%pip" in done.stderr


# -- replacing a file, or not ---------------------------------------------------------------

HAND_WRITTEN = b"# my own workflow\r\nimport os\n\xff not even utf-8\n"


def others(folder: Path, *names: str) -> list[str]:
    """Files in ``folder`` other than ``names``: a leftover temporary file shows here."""
    return sorted(p.name for p in folder.iterdir() if p.name not in names)


@pytest.mark.parametrize(
    "output",
    [None, "flow.py"],
    ids=["beside the notebook", "-o"],
)
def test_a_file_taskcell_did_not_write_is_refused_and_left_byte_for_byte(
    write, tmp_path, capsys, output
):
    path = write("x = 1", "%%task\ny = x", name="analysis.ipynb")
    module = tmp_path / (output or "analysis.py")
    module.write_bytes(HAND_WRITTEN)
    args = [str(path)] + (["-o", str(module)] if output else [])

    assert main(args) == 1

    assert module.read_bytes() == HAND_WRITTEN
    assert others(tmp_path, path.name, module.name) == []
    assert capsys.readouterr().err == (
        f"taskcell export: error: {module} exists and was not written by taskcell export; "
        "--force replaces it\n"
    )


def test_force_replaces_it_and_says_so(write, tmp_path, capsys):
    path = write("x = 1", "%%task\ny = x", name="analysis.ipynb")
    module = path.with_suffix(".py")
    module.write_bytes(HAND_WRITTEN)
    module.chmod(0o640)

    assert main([str(path), "--force"]) == 0

    assert module.read_text().startswith(MARKER)
    assert "def compute_y(x):" in module.read_text()
    assert module.stat().st_mode & 0o777 == 0o640
    assert capsys.readouterr().err == f"wrote {module} (replaced the file that was there)\n"
    assert others(tmp_path, path.name, module.name) == []


def test_a_module_taskcell_wrote_is_replaced_without_force(write, capsys):
    path = write("x = 1", "%%task\ny = x", name="analysis.ipynb")
    module = path.with_suffix(".py")
    assert main([str(path)]) == 0
    write("x = 2", "%%task\nz = x", name="analysis.ipynb")

    assert main([str(path)]) == 0

    assert "def compute_z(x):" in module.read_text()
    assert capsys.readouterr().err.splitlines() == [
        f"wrote {module}",
        f"wrote {module} (replaced the file that was there)",
    ]


def test_the_marker_must_begin_the_file(write, tmp_path):
    path = write("x = 1")
    module = path.with_suffix(".py")
    module.write_text(f"import os\n{MARKER}{path.name}\n")
    with pytest.raises(OverwriteError) as info:
        write_module(path)
    assert info.value.path == module
    assert module.read_text() == f"import os\n{MARKER}{path.name}\n"


@pytest.mark.parametrize("force", [False, True], ids=["plain", "--force"])
def test_a_directory_in_the_modules_place_is_refused(write, tmp_path, capsys, force):
    path = write("x = 1", name="analysis.ipynb")
    folder = tmp_path / "analysis.py"
    folder.mkdir()
    (folder / "inside.txt").write_text("kept")

    assert main([str(path), *(["--force"] if force else [])]) == 1

    assert others(folder) == ["inside.txt"]
    assert others(tmp_path, path.name) == ["analysis.py"]
    assert capsys.readouterr().err == (
        f"taskcell export: error: the output {folder} is a directory; name a file for the module\n"
    )


def test_a_fifo_in_the_modules_place_is_refused_without_reading_it(write, tmp_path, capsys):
    path = write("x = 1", name="analysis.ipynb")
    os.mkfifo(tmp_path / "analysis.py")  # reading it would block forever
    assert main([str(path), "--force"]) == 1
    assert "is not a regular file" in capsys.readouterr().err
    assert (tmp_path / "analysis.py").is_fifo()


def test_a_write_that_fails_leaves_the_old_module_whole(write, tmp_path, monkeypatch, capsys):
    path = write("x = 1", name="analysis.ipynb")
    module = path.with_suffix(".py")
    assert main([str(path)]) == 0
    before = module.read_bytes()

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    write("x = 2", name="analysis.ipynb")
    assert main([str(path)]) == 1

    assert module.read_bytes() == before
    assert others(tmp_path, path.name, module.name) == []
    assert "No space left on device" in capsys.readouterr().err


def test_stdout_carries_the_marker_too(write, capsys):
    path = write("x = 1", name="analysis.ipynb")
    assert main([str(path), "-o", "-"]) == 0
    assert capsys.readouterr().out.startswith(f"{MARKER}analysis.ipynb; ")


def test_a_newline_in_the_notebooks_name_cannot_reach_the_code(tmp_path, write):
    path = write("x = 1", name="evil\nimport os; os.remove('x')\n.ipynb")
    module = export_file(path, tmp_path / "out.py")
    first, second = module.read_text().splitlines()[:2]
    assert first.startswith(f"{MARKER}evil?import os; os.remove('x')?.ipynb; edits here")
    assert second.startswith('"""')
    compile(module.read_text(), str(module), "exec")


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ("%%task --gpu ²\ny = 1", "cell 2 (%%task --gpu ²): gpu="),
        ("%%task --memory 1e99999999\ny = 1", "cell 2 (%%task --memory 1e99999999): memory="),
        ("x = " + "-" * 100_000 + "1", "nested too deeply"),
        ("x = a" + ".b" * 100_000, "nested too deeply"),
    ],
    ids=["superscript gpu", "huge exponent", "nested minus", "long attribute chain"],
)
def test_hostile_cells_are_an_error_and_nothing_is_written(write, tmp_path, capsys, cell, message):
    path = write("x = 1", cell, name="analysis.ipynb")
    assert main([str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("taskcell export: error: ") and message in err
    assert others(tmp_path) == ["analysis.ipynb"]
