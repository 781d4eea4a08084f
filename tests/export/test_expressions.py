"""One evaluator of resource expressions: the magic, the Python API and the exported module agree.

``%%task --cpu "EXPR"`` (:func:`~taskcell.runner.task_line.build_request`, what the magic runs
with the notebook's namespace), ``@task(resources=ResourceTemplate(cpu=Expression("EXPR")))`` and
the ``dask`` target's module all evaluate with :meth:`taskcell.spec.Expression.evaluate`; the
same expression gives the same request, or the same error, through each.
"""

from __future__ import annotations

import inspect
import math
import runpy
import shlex

import pytest

from taskcell.errors import SpecError
from taskcell.export import export_notebook
from taskcell.runner.task_line import build_request, parse_task_line
from taskcell.spec import BUILTIN_PRESETS, Expression, Resources, ResourceTemplate
from taskcell.tasks import Task

from .conftest import notebook

#: The notebook's first cell; its names are what the expressions read.
SETUP = "import math\nfiles = ['a', 'bb', 'cccc']\nn = 3"
NAMESPACE = {"math": math, "files": ["a", "bb", "cccc"], "n": 3}

CASES = [
    ("cpu", "min(8, len(files))"),
    ("cpu", "max(len(f) for f in files)"),
    ("cpu", "sum([len(f) for f in files if len(f) < n])"),
    ("cpu", "len({f: n for f in files}) * n"),
    ("cpu", "(lambda k: k * n)(2)"),
    ("cpu", "max(map(lambda f: len(f) + n, files))"),
    ("cpu", "math.ceil(len(files) / 2)"),
    ("memory", "f'{sum(len(f) for f in files)}Gi'"),
    ("gpu", "'A100:2' if n > 2 else 1"),
    ("disk", "len(files) * 2**30  # a GiB a file"),
]
IDS = ["call", "generator", "list-comp-reading-n", "dict-comp", "lambda", "map-lambda",
       "module", "f-string", "conditional", "comment"]  # fmt: skip


def through_magic(field: str, source: str, namespace: dict) -> Resources:
    """What ``%%task --FIELD SOURCE`` asks for in a notebook holding ``namespace``."""
    line = parse_task_line(f"--{field} {shlex.quote(source)}")
    return build_request(line, lambda: BUILTIN_PRESETS, {}, namespace)


def work(files: list[str], n: int) -> int:
    """A task of the Python API; its module (this one) imports ``math``."""
    return len(files) * n


def through_api(field: str, source: str, namespace: dict) -> Resources:
    """What ``@task(resources=ResourceTemplate(FIELD=Expression(SOURCE)))`` asks for a call."""
    template = ResourceTemplate(**{field: Expression(source)})
    return Task(work, template).request(namespace["files"], namespace["n"])


def through_export(field: str, source: str, namespace: dict, tmp_path) -> Resources:
    """What the exported ``dask`` workflow's task asks for, called with the notebook's values."""
    cell = f"%%task --{field} {shlex.quote(source)}\nout = 1"
    path = tmp_path / "workflow.py"
    path.write_text(export_notebook(notebook(SETUP, cell)))
    task = runpy.run_path(str(path))["compute_out"]
    params = inspect.signature(task.fn).parameters
    return task.request(**{name: namespace[name] for name in params})


@pytest.mark.parametrize(("field", "source"), CASES, ids=IDS)
def test_the_same_expression_gives_the_same_request_through_each_path(field, source, tmp_path):
    expected = Resources(**{field: eval(source, dict(NAMESPACE))})
    assert through_magic(field, source, dict(NAMESPACE)) == expected
    assert through_api(field, source, NAMESPACE) == expected
    assert through_export(field, source, NAMESPACE, tmp_path) == expected


def test_a_result_that_is_not_a_value_reads_the_same_through_the_magic_and_the_api():
    source = "f'{n} cores'"
    messages = []
    for path in (through_magic, through_api):
        with pytest.raises(SpecError) as info:
            path("cpu", source, dict(NAMESPACE))
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert messages[0].startswith("cpu= expression \"f'{n} cores'\" returned '3 cores'")


def test_an_expression_reading_a_name_neither_argument_nor_global_is_refused_at_definition():
    with pytest.raises(SpecError, match="reads 'nmae', which task 'work' does not take"):
        Task(work, ResourceTemplate(cpu=Expression("len(files) * nmae")))
