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


def test_taskcells_own_magics_are_dropped_without_a_note():
    nb = read("%load_ext taskcell\n%task_cluster tcp://127.0.0.1:8786\nx = 1\n%tasks")
    assert nb.cells[0].code == "x = 1\n"
    assert nb.cells[0].notes == ()


@pytest.mark.parametrize(
    ("source", "code"),
    [
        ("!ls -l\nx = 1", "_shell('ls -l')\nx = 1\n"),
        ("files = !ls {x}", "files = _shell('ls {x}', lines=True)\n"),
        ("files = %sx ls", "files = _shell('ls', lines=True)\n"),
        ("%time y = 2", "y = 2\n"),
        ("%timeit -n 3 -r2 f(x)", "_time_it('f(x)', number=3, repeat=2)\n"),
        ("%env A=b c", "_os.environ['A'] = 'b c'\nprint('env: A=b c')\n"),
        ("%set_env A 1", "_os.environ['A'] = '1'\n"),
        ("v = %env A", "v = _os.environ['A']\n"),
        ("%cd /tmp", "_os.chdir(_os.path.expanduser('/tmp'))\nprint(_os.getcwd())\n"),
        ("if True:\n    !ls\n", "if True:\n    _shell('ls')\n"),
        ("get_ipython().system('ls')", "_shell('ls')\n"),
        ("%matplotlib inline\nx = 1", "# %matplotlib inline\nx = 1\n"),
        ("len?", "# %pinfo len\n"),
        (
            "for i in []:\n    %load_ext autoreload",
            "for i in []:\n    pass\n    # %load_ext autoreload\n",
        ),
    ],
    ids=[
        "shell",
        "shell-lines",
        "sx",
        "time",
        "timeit",
        "env-set",
        "set-env",
        "env-get",
        "cd",
        "nested",
        "explicit",
        "set-up",
        "help",
        "nested-set-up",
    ],
)
def test_ipython_syntax_becomes_the_python_it_runs(source, code):
    cell = read(source).cells[0]
    assert cell.code == code
    assert cell.notes == () and cell.problems == ()


def test_the_names_a_magic_reads_are_the_cells_inputs():
    timed, shelled = read("%timeit f(x)", "!echo {name} $other").cells
    assert {"f", "x"} <= set(timed.analysis.inputs)
    assert set(shelled.analysis.inputs) >= {"name", "other"}


def test_helpers_take_private_names_the_notebook_does_not_use():
    assert read("shell = 'bash'\n!ls").cells[0].code == "shell = 'bash'\n_shell('ls')\n"
    cell = read("_shell = 'bash'\n!ls").cells[0]
    assert cell.code == "_shell = 'bash'\n_shell_2('ls')\n"


@pytest.mark.parametrize(
    ("source", "note"),
    [
        ("%pip install pandas", "'%pip install pandas' left as a comment: install that"),
        ("!pip install -q tqdm", "'!pip install -q tqdm' left as a comment: install that"),
    ],
    ids=["%pip", "!pip"],
)
def test_installing_packages_is_left_as_a_comment_with_a_note(source, note):
    cell = read(source).cells[0]
    assert cell.code == f"# {source}\n"
    assert len(cell.notes) == 1 and note in cell.notes[0]


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("%run setup.py", "'%run setup.py': %run has no meaning outside IPython"),
        ("x = 1\n%store x", "'%store x': %store has no meaning"),
        ("ip = get_ipython()", "line 1 ('ip = get_ipython()') uses get_ipython()"),
        ("%%sql\nSELECT 1", "'%%sql': %%sql has no meaning outside IPython"),
        ("%timeit -o f()", "'%timeit -o f()': the module has no timing result"),
    ],
    ids=["run", "store", "getter", "sql", "timeit-o"],
)
def test_what_a_module_cannot_run_is_a_problem_of_the_cell(source, problem):
    nb = read_notebook(notebook("x = 0", source), BUILTIN_PRESETS, strict=False)
    assert nb.cells[0].problems == ()
    (found,) = nb.cells[1].problems
    assert found.startswith("cell 2 (") and problem in found


def test_cell_magics():
    nb = read(
        "%%bash\necho hi",
        "%%time\nz = 3",
        "%%capture out --no-stderr\nw = 4\nw",
        "%%writefile -a notes.txt\nline",
        "%%html\n<b>x</b>",
        "%%timeit -n 2 setup()\nrun()",
    )
    bash, timed, captured, written, html, timeit = nb.cells
    assert bash.code == "_script('bash', 'echo hi\\n')\n"
    assert (timed.code, timed.analysis.outputs) == ("z = 3\n", ("z",))
    assert captured.code == "with _capture(stderr=False) as out:\n    w = 4\n    w\n"
    assert captured.analysis.outputs == ("out", "w")
    assert written.code == "_write_file('notes.txt', 'line\\n', append=True)\n"
    assert html.code == "_display(_HTML('<b>x</b>\\n'))\n"
    assert timeit.code == "_time_it('run()\\n', setup='setup()', number=2)\n"
    assert all(c.notes == () and c.problems == () for c in nb.cells)


@pytest.mark.parametrize(
    "source",
    ["%%time\n%%task --cpu 1\nx = 1\nx", "%%task --cpu 1\n%%time\nx = 1\nx"],
    ids=["time-first", "task-first"],
)
def test_a_cell_magic_stacked_with_task_keeps_the_body(source):
    cell = read(source).cells[0]
    assert cell.kind == "task" and cell.task == TaskLine(fields={"cpu": "1"})
    assert cell.code == "x = 1\nx\n"


def test_capture_inside_a_task_cell():
    cell = read("%%task\n%%capture out\nprint(1)").cells[0]
    assert cell.kind == "task"
    assert cell.code == "with _capture() as out:\n    print(1)\n"


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


@pytest.mark.parametrize(
    ("cells", "code"),
    [
        (("%%file notes.txt\nline",), "_write_file('notes.txt', 'line\\n')\n"),
        (("%%HTML\n<b>x</b>",), "_display(_HTML('<b>x</b>\\n'))\n"),
        (("ls -l",), "_shell('ls -F --color -l')\n"),
        (("cat notes.txt",), "_shell('cat notes.txt')\n"),
        (("%ll",), "_shell('ls -F -o --color')\n"),
        (("pwd",), "_os.getcwd()\n"),
        (("  cd /tmp",), "_os.chdir(_os.path.expanduser('/tmp'))\nprint(_os.getcwd())\n"),
        (("%%task\nls",), "_shell('ls -F --color')\n"),
        (("%%task?",), "# %pinfo %%task\n"),
        (("%%task?\nx = 1",), "# %pinfo %%task\nx = 1\n"),
        (("%magic?",), "# %pinfo %magic\n"),
        (("??len",), "# %pinfo2 len\n"),
        (("len?",), "# %pinfo len\n"),
    ],
    ids=[
        "file-is-writefile",
        "HTML-is-html",
        "ls-automagic",
        "cat-automagic",
        "shell-alias",
        "pwd-automagic",
        "indented-automagic",
        "automagic-in-a-task",
        "cell-magic-help",
        "cell-magic-help-then-code",
        "magic-help",
        "help2",
        "help",
    ],
)
def test_ipythons_aliases_automagics_and_help_as_ipython_runs_them(cells, code):
    assert read(*cells).cells[-1].code == code


@pytest.mark.parametrize(
    "cells",
    [
        ("ls = ['a']", "ls"),  # a bound name shadows the magic
        ("pwd = 1\nls = 2", "pwd"),
        ("x = 1\npwd",),  # automagic is for one-line cells
        ("ls = 1",),  # an assignment
        ("cat, dog = 1, 2",),
        ("list",),  # a builtin
    ],
    ids=["bound", "bound-earlier", "two-lines", "assigned", "tuple", "builtin"],
)
def test_no_automagic_where_ipython_runs_python(cells):
    cell = read_notebook(notebook(*cells), BUILTIN_PRESETS, strict=False).cells[-1]
    assert "get_ipython" not in cell.code and "_shell" not in cell.code


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("x = %ls", r"'x = %ls' binds None, as IPython runs it"),
        ("%ed f.py", r"'%ed f.py': %edit has no meaning"),
        ("hist", r"'%hist': %history has no meaning"),
    ],
    ids=["alias-bound", "magic-alias", "automagic-alias"],
)
def test_aliases_a_module_cannot_run_are_refused_by_name(source, message):
    with pytest.raises(ExportError, match=message):
        read(source)
