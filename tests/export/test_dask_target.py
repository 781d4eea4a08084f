"""The dask target's module: decorators carry the notebook's requests; names never clash."""

from __future__ import annotations

import runpy

import dask.config
import pytest

from taskcell.export import export_file, export_notebook
from taskcell.export.codegen import _ruff, format_source
from taskcell.runner.task_line import build_request, parse_task_line
from taskcell.spec import BUILTIN_PRESETS, Environment, Resources
from taskcell.tasks import Task, TaskEnvironment

from .conftest import notebook, run_module, write_notebook
from .test_flow import NOTEBOOK_FUNCTION_CHANGES


def load(source: str, tmp_path) -> dict:
    """Define the module's tasks without running its workflow."""
    path = tmp_path / "workflow.py"
    path.write_text(source)
    return runpy.run_path(str(path))


LINES = {
    "plain": "",
    "fields": "--cpu 2 --memory 4Gi,8Gi --gpu A100:2 --shm auto --disk 50Gi",
    "preset": "small_task",
    "retried": "small_task --retries 2",
    "preset_override": "small_task --memory 8Gi",
    "extra": "--resources process=1,MEMORY=70e9",
    "gpu_slice": '--gpu "A100 80G/1g.10gb:1"',
}


def test_each_task_carries_the_request_the_magic_builds(tmp_path):
    cells = [f"%%task {line} --name {name}\n{name}_out = 1" for name, line in LINES.items()]
    source = export_notebook(notebook(*cells))
    assert "@_small_task\ndef preset(" in source
    assert "@_small_task(retries=2)\ndef retried(" in source
    assert "@_task\ndef plain(" in source
    namespace = load(source, tmp_path)
    for name, line in LINES.items():
        expected = build_request(parse_task_line(line), lambda: BUILTIN_PRESETS, {}, {})
        task = namespace[name]
        assert isinstance(task, Task)
        assert task.resources == expected, name
    assert namespace["retried"].retries == 2


def test_environments_override_field_by_field(tmp_path):
    source = export_notebook(
        notebook(
            "%task_env etl --cpu 1 --memory 2Gi",
            "%%task --env etl\na = 1",
            "%%task --env etl --memory 3Gi\nb = 1",
        )
    )
    assert 'etl_env = _TaskEnvironment("etl", resources=_Resources(cpu=1, memory="2Gi"))' in source
    assert "@etl_env.task\ndef compute_a(" in source
    assert '@etl_env.task(resources=_Resources(memory="3Gi"))\ndef compute_b(' in source
    namespace = load(source, tmp_path)
    assert namespace["etl_env"] == TaskEnvironment("etl", Resources(cpu=1, memory="2Gi"))
    env = Environment("etl", Resources(cpu=1, memory="2Gi"))
    assert namespace["compute_a"].resources == env.resources
    assert namespace["compute_b"].resources == env.override(memory="3Gi").resources


def test_dynamic_resources_become_resource_functions(tmp_path):
    source = export_notebook(
        notebook(
            "files = ['a', 'b', 'c']",
            '%%task --cpu "min(8, len(files))" --memory 1Gi\nn = len(files)',
        )
    )
    assert (
        '@_task(resources=_ResourceTemplate(memory="1Gi", cpu=_Expression("min(8, len(files))")))'
        in source
    )
    assert "    files = files" not in source  # a value, not a future: nothing to wait for
    task = load(source, tmp_path)["compute_n"]
    assert task.request(["a", "b", "c"]) == Resources(cpu=3, memory="1Gi")


def test_user_presets_are_written_out(tmp_path):
    with dask.config.set({"taskcell.presets": {"gpu_box": {"cpu": 8, "memory": "32Gi"}}}):
        source = export_notebook(notebook("%%task gpu_box\nx = 1"))
    assert "@_task(resources=_Resources(cpu=8, memory=\"32Gi\"))  # the 'gpu_box' preset" in source
    assert load(source, tmp_path)["compute_x"].resources == Resources(cpu=8, memory="32Gi")


def test_notebook_names_never_shadow_the_module_helpers(tmp_path):
    source = export_notebook(
        notebook(
            "from taskcell import Resources\nresults = []\nsubmit = 1\nmain = 'm'\ntask = 't'",
            "%%task --cpu 1\na, b = results, submit\na",
            "show = 2\n_show = 3",
        )
    )
    for line in [
        "from taskcell import Resources\n",
        "from taskcell import task as _task\n",
        "from taskcell.export.runtime import results as _results\n",
        "from taskcell.export.runtime import submit as _submit\n",
        "from taskcell.export.standalone import show as _show_2\n",
        "@_task(resources=_Resources(cpu=1))\ndef compute_a(results, submit):",
        "def workflow():",
        "compute_a_call = _submit(compute_a, results, submit, returns=2)",
        "a, b = compute_a_call.result()",
        "return _results(\n        globals(),",
        "_run(workflow, parser.parse_args().scheduler)",
    ]:
        assert line in source
    namespace = load(source, tmp_path)
    assert namespace["compute_a"].resources == Resources(cpu=1)


def test_module_docstring_and_cli(tmp_path):
    source = export_notebook(notebook('md:# Title\n\nSays """hi""" \\ there.', "x = 1"))
    namespace = load(source, tmp_path)
    assert namespace["__doc__"] == '# Title\n\nSays """hi""" \\ there.\n'
    assert 'parser.add_argument(\n        "--scheduler",' in source


@pytest.mark.skipif(_ruff() is None, reason="ruff is not installed")
def test_output_is_formatted():
    source = export_notebook(notebook("import os\nx=1", "%%task\ny   =  x+1"))
    assert format_source(source) == source
    assert "y = x + 1" in source


def test_unformatted_output_compiles():
    source = export_notebook(notebook("x = 1", "%%task\ny = x"), format=False)
    compile(source, "workflow.py", "exec")


def test_multiline_strings_keep_their_text(tmp_path):
    source = export_notebook(notebook('%%task\ntext = """a\n  b\nc"""'))
    assert 'text = """a\n  b\nc"""' in source


def test_a_notebook_function_a_task_calls_changes_the_notebooks_values(tmp_path):
    path = write_notebook(tmp_path / "helpers.ipynb", *NOTEBOOK_FUNCTION_CHANGES)
    values = run_module(export_file(path, tmp_path / "helpers.py"), tmp_path)["values"]
    assert (values["stats"], values["results"], values["total"]) == ({"calls": 1}, [1], 1)
