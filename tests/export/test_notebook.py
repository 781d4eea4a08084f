"""Reading notebooks: cell kinds, IPython syntax, %task_env, and malformed input."""

from __future__ import annotations

import json

import pytest

from taskcell.export import export_notebook
from taskcell.export.notebook import (
    Cell,
    EnvironmentDef,
    ExportError,
    read_notebook,
)
from taskcell.runner.task_line import TaskLine
from taskcell.spec import BUILTIN_PRESETS, Resources

from .conftest import notebook


def read(*cells: str):
    return read_notebook(notebook(*cells), BUILTIN_PRESETS)


def test_kinds_and_task_line():
    nb = read("md:# Title", "x = 1", "%%task small_task --retries 2\ny = x + 1")
    assert [(c.number, c.kind) for c in nb.cells] == [(1, "markdown"), (2, "code"), (3, "task")]
    task = nb.cells[2]
    assert task.task == TaskLine(preset="small_task", retries=2)
    assert task.code == "y = x + 1\n"
    assert (task.analysis.inputs, task.analysis.outputs) == (("x",), ("y",))
    assert task.label == "cell 3 (%%task small_task --retries 2)"


def test_plumbing_is_dropped_without_a_note():
    nb = read("%load_ext taskcell\n%task_cluster tcp://127.0.0.1:8786\nx = 1\n%tasks")
    assert nb.cells[0].code == "x = 1\n"
    assert nb.cells[0].notes == ()


@pytest.mark.parametrize(
    ("source", "code", "note"),
    [
        (
            "!ls -l\nx = 1",
            "# !ls -l\nx = 1\n",
            "shell escapes cannot run outside IPython; '!ls -l'",
        ),
        ("files = !ls", "# files = !ls\n", "'files = !ls' kept as a comment"),
        ("%matplotlib inline\nx = 1", "# %matplotlib inline\nx = 1\n", "%matplotlib cannot run"),
        ("%time y = 2", "y = 2\n", "%time dropped; its statement is kept"),
        ("len?", "# %pinfo len\n", "%pinfo cannot run"),
        ("if True:\n    !ls\n", "if True:\n    pass\n    # !ls\n", "'!ls' kept as a comment"),
        ("get_ipython().system('ls')", "# !ls\n", "'!ls' kept as a comment"),
        ("x = get_ipython()", "# x = get_ipython()\n", "get_ipython() has no shell"),
    ],
    ids=["shell", "shell-assign", "line-magic", "time", "help", "nested", "explicit", "getter"],
)
def test_ipython_syntax_is_kept_as_comments_with_a_note(source, code, note):
    cell = read(source).cells[0]
    assert cell.code == code
    assert len(cell.notes) == 1 and note in cell.notes[0]
    assert cell.notes[0].startswith("cell 1 (")


def test_cell_magics():
    nb = read("%%bash\necho hi", "%%time\nz = 3", "%%capture out\nw = 4")
    bash, timed, captured = nb.cells
    assert bash.code == "# %%bash\n# echo hi\n"
    assert "cannot run outside IPython" in bash.notes[0]
    assert (timed.code, timed.analysis.outputs) == ("z = 3\n", ("z",))
    assert "%%time dropped" in timed.notes[0]
    assert captured.analysis.outputs == ("w",)


def test_task_env_lines_define_environments_in_order():
    nb = read(
        "%task_env etl --cpu 1 --memory 2Gi\n%task_env big small_task --env etl",
        "%task_env\n%task_env etl --cpu 4",
    )
    first, second = nb.cells
    assert first.environments == (
        EnvironmentDef("etl", Resources(cpu=1, memory="2Gi"), 1),
        EnvironmentDef("big", Resources(cpu=2, memory="4Gi"), 1),
    )
    assert first.code.strip() == "" and second.environments[0].resources == Resources(cpu=4)
    assert nb.environments["etl"].resources == Resources(cpu=4)


def test_leading_blank_lines_before_task_magic():
    cell = read("\n\n%%task --cpu 1\nx = 1").cells[0]
    assert cell.kind == "task" and cell.task == TaskLine(fields={"cpu": "1"})


@pytest.mark.parametrize(
    ("cells", "message"),
    [
        (["x = 1", "%%task --cpu lots\ny = 1"], "cell 2 (%%task --cpu lots): --cpu"),
        (["%%task --frobnicate\ny = 1"], "cell 1 (%%task --frobnicate): %%task: unrecognized"),
        (["def f(:\n    pass"], "cell 1 (def f(:): invalid syntax at line 1"),
        (["md:hi", "return 3"], "cell 2 (return 3): 'return' outside function"),
        (["%task_env etl --memory lots"], "cell 1 (%task_env etl --memory lots): %task_env etl"),
        (["%%task\n%task_env x --cpu 1\ny = 1"], "%task_env belongs in a cell of its own"),
    ],
    ids=["bad-value", "bad-option", "syntax", "return", "bad-env", "env-in-task"],
)
def test_errors_name_the_cell(cells, message):
    with pytest.raises(ExportError, match=message.replace("(", r"\(").replace(")", r"\)")):
        export_notebook(notebook(*cells))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not a notebook: not valid JSON"),
        ('{"nbformat": 4}', "it has no list of 'cells'"),
        ('{"cells": [{"cell_type": "code", "source": 3}]}', "cell 1: its 'source' must be text"),
        ('{"cells": [{"cell_type": "sql", "source": ""}]}', "cell 1: unknown cell_type 'sql'"),
        ('{"cells": ["x = 1"]}', "cell 1 is not a notebook cell"),
        ("[1, 2]", "it has no list of 'cells'"),
    ],
    ids=["not-json", "no-cells", "source", "cell-type", "not-a-cell", "a-list"],
)
def test_malformed_notebooks(tmp_path, content, message):
    path = tmp_path / "bad.ipynb"
    path.write_text(content)
    with pytest.raises(ExportError, match=message):
        read_notebook(path, BUILTIN_PRESETS)


def test_source_as_list_of_lines(tmp_path):
    path = tmp_path / "lines.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": "code", "source": ["x = 1\n", "y = x"]}]}))
    cell: Cell = read_notebook(path, BUILTIN_PRESETS).cells[0]
    assert cell.analysis.outputs == ("x", "y")


def test_missing_file(tmp_path):
    with pytest.raises(ExportError, match="cannot read the notebook"):
        read_notebook(tmp_path / "nope.ipynb", BUILTIN_PRESETS)
