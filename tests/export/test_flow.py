"""The workflow plan: parameters, returns, futures to wait for, imports, and refusals."""

from __future__ import annotations

import dask.config
import pytest

from taskcell.export.flow import DriverStep, TaskStep, TextStep, Workflow, plan_workflow
from taskcell.export.notebook import ExportError, read_notebook
from taskcell.spec import BUILTIN_PRESETS

from .conftest import notebook


def plan(*cells: str) -> Workflow:
    return plan_workflow(read_notebook(notebook(*cells), BUILTIN_PRESETS), BUILTIN_PRESETS)


def tasks(workflow: Workflow) -> list[tuple]:
    return [(t.function, t.params, t.returns, t.gather, t.after) for t in workflow.tasks]


def drivers(workflow: Workflow) -> list[tuple]:
    return [(s.code, s.gather) for s in workflow.steps if isinstance(s, DriverStep)]


def test_rebinding_reading_and_a_diamond():
    wf = plan(
        "x = 1",
        "%%task\ny = x + 1",
        "x = 10",  # rebound after y's task was called: y saw 1
        "%%task\ny = y + x",  # reads and rebinds y
        "%%task --name left\na = y + 1",
        "%%task --name right\nb = y + 2",
        "%%task\nd = a + b",
        "print(d)",
    )
    assert tasks(wf) == [
        ("compute_y", ("x",), ("y",), (), ()),
        ("compute_y_task", ("y", "x"), ("y",), (), (1,)),
        ("left", ("y",), ("a",), (), (3,)),
        ("right", ("y",), ("b",), (), (3,)),
        ("compute_d", ("a", "b"), ("d",), (), (4, 5)),
    ]
    assert drivers(wf)[-1] == ("print(d)\n", ("d",))


def test_functions_carry_the_futures_they_read():
    wf = plan(
        "%%task\nscale = 3",
        "def helper(v):\n    return v * scale",  # reads scale: the driver waits for it
        "%%task\nscale = 4",
        "%%task\nout = helper(2)",  # helper's closure must hold a value, not a future
    )
    assert drivers(wf)[0][1] == ("scale",)
    assert tasks(wf)[2] == ("compute_out", ("helper",), ("out",), ("scale",), (2,))


def test_unused_outputs_are_returned_and_loop_targets_only_when_read():
    wf = plan(
        "%%task\ntotal = 0\nunused = 'x'\nfor i in range(3):\n    total += i\n"
        "for j in []:\n    pass",
        "print(j)",
    )
    assert tasks(wf)[0][2] == ("total", "unused", "j")


def test_imports():
    wf = plan(
        "%load_ext taskcell",
        "import math\nimport numpy as np",
        "x = 2",
        "import json",  # after other code: stays where it is
        "%%task\nimport statistics\ny = np.sqrt(x) + math.pi\ns = json.dumps(x)",
        "%%task\nz = statistics.mean([1, 2])",
        "print(statistics.mean([y, z]))",
    )
    assert wf.imports == ("import math", "import numpy as np")
    first, second = wf.tasks
    assert (first.params, first.local_imports, first.returns) == (
        ("x",),
        ("import json",),
        ("y", "s"),
    )
    assert second.local_imports == ("import statistics",)
    last = [s for s in wf.steps if isinstance(s, DriverStep)][-1]
    assert last.imports == ("import statistics",) and last.gather == ("y", "z")


def test_an_import_rebound_otherwise_is_not_hoisted():
    wf = plan("import numpy as np", "np = 3", "%%task\nx = np")
    assert wf.imports == () and tasks(wf)[0][1] == ("np",)


def test_star_and_future_imports_move_to_the_top():
    wf = plan("x = 1", "from __future__ import annotations\nfrom math import *", "%%task\ny = pi")
    assert wf.imports == ("from __future__ import annotations", "from math import *")
    assert tasks(wf)[0][1] == ()


def test_deletes_and_side_effect_tasks():
    wf = plan("a = 1\nb = 2", "%%task\ndel a\nprint(b)")
    step = wf.tasks[0]
    assert (step.function, step.params, step.returns, step.deletes) == (
        "cell_2",
        ("a", "b"),
        (),
        ("a",),
    )


def test_dynamic_resources_read_values():
    wf = plan(
        "%%task\nfiles = ['a', 'b']",
        '%%task --cpu "min(8, len(files))" --memory 1Gi\ncount = 3',
    )
    step = wf.tasks[1]
    assert (step.params, step.gather) == (("files",), ("files",))
    assert dict(step.request.dynamic) == {"cpu": "min(8, len(files))"}


def test_expression_names_come_in_the_order_they_are_read():
    wf = plan(
        "a = [1]\nb = 2",
        '%%task --cpu "max(len(a), 1) + b"\nc = 3',
    )
    assert wf.tasks[0].params == ("a", "b")


@pytest.mark.parametrize(
    "definition",
    [
        "def g(v):\n    return v * scale",
        "f = g = lambda v: v * scale",
        "g: object = lambda v: scale",
    ],
    ids=["def", "chained lambda", "annotated lambda"],
)
def test_every_way_of_defining_a_function_carries_the_futures_it_reads(definition):
    wf = plan(
        "%%task\nscale = 3",
        definition,
        "%%task\nscale = 4",  # a future again: g needs its value
        "%%task\nout = g(2)",
    )
    assert tasks(wf)[2] == ("compute_out", ("g",), ("out",), ("scale",), (2,))


def test_trailing_values():
    wf = plan("x = 1\nx", "x;", "len([x])", "a, b = 1, 2\na, b", "%%task\ny = x\ny")
    assert [code for code, _ in drivers(wf)] == [
        "x = 1\nprint(x)\n",  # x; printed nothing: it leaves no step at all
        "len([x])\n",
        "a, b = 1, 2\nprint((a, b))\n",
    ]
    assert wf.tasks[0].body == "y = x\n"


def test_docstring_and_markdown():
    wf = plan("md:# Title\n\nText.", "x = 1", "md:More.", "y = 2")
    assert wf.docstring == "# Title\n\nText."
    assert [s.text for s in wf.steps if isinstance(s, TextStep)] == ["More."]
    assert plan("x = 1").docstring == "Workflow exported from the notebook by taskcell."


def test_names_do_not_clash():
    wf = plan("compute_y = 1", "%%task\ny = compute_y", "%%task --name for\nz = 1")
    assert [t.function for t in wf.tasks] == ["compute_y_task", "for_task"]


def test_history_reads_are_noted():
    wf = plan("x = 1", "x", "y = _ + Out[2]")
    assert wf.notes == (
        "cell 3 (y = _ + Out[2]): reads '_', IPython's output history, which the module does "
        "not have",
        "cell 3 (y = _ + Out[2]): reads 'Out', IPython's output history, which the module does "
        "not have",
    )


@pytest.mark.parametrize(
    ("cells", "message"),
    [
        (
            ['%%task --cpu "len(files)"\nx = 1'],
            r"cell 1 .*--cpu 'len\(files\)' reads 'files', "
            r"which no cell before it binds",
        ),
        (
            ["n = 0\ndef bump():\n    global n\n    n += 1"],
            r"cell 1 .*bump\(\) declares `global n`",
        ),
        (["import asyncio", "await asyncio.sleep(0)"], r"cell 2 .*top-level `await` \(line 1\)"),
        (["%%task --env nope\nx = 1"], r"cell 1 .*--env 'nope' is not a defined environment"),
        (["%%task tiny_task\nx = 1"], r"cell 1 .*preset= 'tiny_task' is not a known preset"),
    ],
    ids=["expression-name", "global", "await", "env", "preset"],
)
def test_refusals_name_the_cell(cells, message):
    with pytest.raises(ExportError, match=message):
        plan(*cells)


def test_platform_limits_are_checked_before_export():
    with (
        dask.config.set({"taskcell.platform": "latch"}),
        pytest.raises(
            ExportError, match=r"cell 1 \(%%task --cpu 200\): cpu=200 exceeds latch's maximum"
        ),
    ):
        plan("%%task --cpu 200\nx = 1")


def test_steps_keep_notebook_order():
    wf = plan("md:# T", "x = 1", "md:Then", "%%task\ny = x", "print(y)")
    kinds = [type(s) for s in wf.steps]
    assert kinds == [DriverStep, TextStep, TaskStep, DriverStep]
