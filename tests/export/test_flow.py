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
    return [(t.function, t.params, t.returns, t.needs, t.after) for t in workflow.tasks]


def drivers(workflow: Workflow) -> list[str]:
    return [s.code for s in workflow.steps if isinstance(s, DriverStep)]


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
    assert drivers(wf)[-1] == "print(d)\n"


def test_functions_carry_the_futures_they_read():
    wf = plan(
        "%%task\nscale = 3",
        "def helper(v):\n    return v * scale",
        "%%task\nscale = 4",
        "%%task\nout = helper(2)",  # helper's closure must hold a value, not a future
    )
    assert tasks(wf)[2] == ("compute_out", ("helper",), ("out",), ("scale",), (2,))


def test_unused_outputs_are_returned_and_loop_targets_only_when_read():
    wf = plan(
        "%%task\ntotal = 0\nunused = 'x'\nfor i in range(3):\n    total += i\n"
        "for j in []:\n    pass",
        "print(j)",
    )
    assert tasks(wf)[0][2] == ("total", "unused", "j")


def test_unread_outputs_are_returned_only_where_every_path_binds_them():
    wf = plan(
        "c = True",
        "%%task\nif c:\n    a = 1\nelse:\n    a = 2\nif c:\n    b = 1\nd = 1\ndel d\ne = 1",
        "print(c)",
    )
    assert tasks(wf)[0][2] == ("a", "e")


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
    assert last.imports == ("import statistics",)


def test_an_import_rebound_otherwise_is_not_hoisted():
    wf = plan("import numpy as np", "np = 3", "%%task\nx = np")
    assert wf.imports == () and tasks(wf)[0][1] == ("np",)


def test_future_imports_move_to_the_top_and_star_imports_run_where_their_cell_ran():
    wf = plan("x = 1", "from __future__ import annotations\nfrom math import *", "%%task\ny = pi")
    assert wf.imports == ("from __future__ import annotations",)
    assert wf.steps[1].code == "exec('from math import *', globals())\n"
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
    assert (step.params, step.needs) == (("files",), ("files",))
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


def test_trailing_values_are_shown_as_the_notebook_showed_them():
    wf = plan(
        "x = 1\nx",
        "x;",
        "len([x])",
        "a, b = 1, 2\na, b",
        "print(x)",
        "%%task\ny = x\ny",
        "%%task\nz = x\nz;",
    )
    assert drivers(wf) == [
        "x = 1\n_show(x)\n",
        "x;\n",  # silenced: a statement, as in the notebook
        "_show(len([x]))\n",
        "a, b = 1, 2\n_show((a, b))\n",
        "print(x)\n",  # a print shows nothing more
    ]
    assert [t.body for t in wf.tasks] == ["y = x\n_show(y)\n", "z = x\nz;\n"]


def test_in_place_changes_come_back_and_immutable_values_do_not():
    wf = plan(
        "results = []\ntext = 'a b'\nmodel = object()",
        "%%task\nresults.append(1)\nwords = text.split()\nmodel.fit = 1",
        "print(results, words, model)",
    )
    (step,) = wf.tasks
    assert step.updates == ("results", "model")
    assert step.returns == ("results", "model", "words")


NOTEBOOK_FUNCTION_CHANGES = (
    "stats = {'calls': 0}\nresults = []\ndef bump(x):\n    stats['calls'] += 1\n"
    "    results.append(x)",
    "%%task\nbump(1)\ntotal = len(results)",
    "print(stats, results, total)",
)


def test_what_a_notebook_function_changes_travels_with_a_dask_task():
    (step,) = plan(*NOTEBOOK_FUNCTION_CHANGES).tasks
    assert set(step.params) == {"bump", "results", "stats"}
    assert set(step.updates) == {"results", "stats"}


def test_flyte_refuses_a_task_whose_function_changes_the_notebooks_values():
    cells = read_notebook(notebook(*NOTEBOOK_FUNCTION_CHANGES), BUILTIN_PRESETS)
    message = r"cell 2 .*calls bump\(\), which changes stats, results in place"
    with pytest.raises(ExportError, match=message):
        plan_workflow(cells, BUILTIN_PRESETS, target="flyte")


def test_process_state_travels_where_the_notebook_uses_a_module_that_holds_some():
    wf = plan("import numpy as np", "%%task\nx = np.random.rand()", "%%task\ny = 2")
    assert wf.carries_state
    assert [t.changes_state for t in wf.tasks] == [True, False]
    assert not plan("import json", "%%task\nx = json.dumps(1)").carries_state


def test_figures_are_closed_after_a_cell_that_draws():
    wf = plan("import matplotlib.pyplot as plt", "%%task\nplt.plot([1])", "%%task\nx = 1")
    assert [t.body for t in wf.tasks] == [
        "_show(plt.plot([1]))\n_close_figures()\n",
        "x = 1\n",
    ]


@pytest.mark.parametrize("target", ["dask", "flyte", "latch"])
def test_a_generator_a_later_task_reads_is_refused(target):
    with pytest.raises(ExportError, match=r"cell 1 .*binds 'g' to a generator"):
        plan_workflow(
            read_notebook(
                notebook("%%task\ng = (i for i in range(3))", "print(list(g))"), BUILTIN_PRESETS
            ),
            BUILTIN_PRESETS,
            target,
        )


def test_a_generator_no_later_cell_reads_is_no_problem():
    wf = plan("%%task\ng = (i for i in range(3))\nn = 1", "print(n)")
    assert wf.tasks[0].returns == ("n",)


@pytest.mark.parametrize("target", ["dask", "flyte", "latch"])
def test_a_later_cell_that_rebinds_a_name_before_reading_it_reads_its_own(target):
    cells = ("%%task\ng = (i for i in range(3))\nn = 1", "g = [n]\nprint(g)", "print(g)")
    wf = plan_workflow(read_notebook(notebook(*cells), BUILTIN_PRESETS), BUILTIN_PRESETS, target)
    assert "g" not in wf.tasks[0].returns


def test_a_cell_that_binds_a_name_on_some_paths_may_read_the_earlier_value():
    with pytest.raises(ExportError, match=r"cell 1 .*binds 'g' to a generator"):
        plan("%%task\ng = (i for i in range(3))", "if len('a') > 1:\n    g = []", "print(g)")


def test_the_notebooks_dask_cluster_per_target():
    cells = (
        "from dask.distributed import Client\nclient = Client()",
        "%%task\nf = client.submit(abs, -1)",
        "print(f.result())",
    )
    nb = read_notebook(notebook(*cells), BUILTIN_PRESETS)
    dask = plan_workflow(nb, BUILTIN_PRESETS, "dask")
    assert dask.tasks == [] and "runs there" in dask.notes[0]
    flyte = plan_workflow(nb, BUILTIN_PRESETS, "flyte")
    assert drivers(flyte)[0] == (
        "# client = Client()\nclient = _local_dask('Client')  # taskcell: the task's own cluster\n"
    )
    assert flyte.tasks[0].params == ("client",)
    assert flyte.notes == (
        "cell 1 (from dask.distributed import Client): the notebook's Dask cluster ('client') "
        "becomes a local cluster of the task's own on 127.0.0.1, made with the same arguments",
    )


def test_the_notebooks_cluster_is_made_with_its_arguments_in_each_task():
    cells = (
        "from dask.distributed import Client, LocalCluster\n"
        "cluster = LocalCluster(\n    n_workers=2,  # two\n    processes=False,\n)\n"
        "client = Client(cluster)",
    )
    nb = read_notebook(notebook(*cells), BUILTIN_PRESETS)
    assert drivers(plan_workflow(nb, BUILTIN_PRESETS, "flyte")) == [
        "# cluster = LocalCluster(\n#     n_workers=2,  # two\n#     processes=False,\n# )\n"
        "cluster = _local_dask('LocalCluster', n_workers=2, processes=False)  "
        "# taskcell: the task's own cluster\n"
        "# client = Client(cluster)\n"
        "client = _local_dask('Client', cluster)  # taskcell: the task's own cluster\n"
    ]


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
        (["x = 1\nvs = [v async for v in agen()]"], r"cell 1 .*top-level `await` \(line 2\)"),
        (["%%task --env nope\nx = 1"], r"cell 1 .*--env 'nope' is not a defined environment"),
        (["%%task tiny_task\nx = 1"], r"cell 1 .*preset= 'tiny_task' is not a known preset"),
    ],
    ids=["expression-name", "global", "await", "async-comprehension", "env", "preset"],
)
def test_refusals_name_the_cell(cells, message):
    with pytest.raises(ExportError, match=message):
        plan(*cells)


def test_every_refusal_is_named_at_once():
    with pytest.raises(ExportError) as caught:
        plan("import asyncio", "await asyncio.sleep(0)", "x = 1", '%%task --cpu "n"\ny = 1')
    message = str(caught.value)
    assert message.startswith("2 cells cannot be exported as they are:")
    assert "- cell 2 (await asyncio.sleep(0)): top-level `await`" in message
    assert "- cell 4 (%%task --cpu \"n\"): --cpu 'n' reads 'n'" in message


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


def test_a_loop_over_a_notebook_name_may_change_its_items():
    wf = plan(
        "models = [object()]\nlookup = {'a': object()}",
        "%%task\nfor model in models:\n    model.fit = 1\nfor key, item in lookup.items():\n"
        "    item.x = key",
        "print(models, lookup)",
    )
    assert wf.tasks[0].updates == ("lookup", "models")


def test_distributeds_functions_of_futures_stay_distributeds_own():
    cells = ("from dask.distributed import Client, wait\nclient = Client()", "wait([])")
    nb = read_notebook(notebook(*cells), BUILTIN_PRESETS)
    for target in ("latch", "dask"):
        workflow = plan_workflow(nb, BUILTIN_PRESETS, target)
        assert workflow.imports == ("from dask.distributed import Client, wait",)


def test_a_top_level_global_statement_does_nothing_as_in_the_notebook():
    wf = plan("global x\nx = 1", "%%task\nglobal y\ny = x")
    assert drivers(wf) == ["pass  # global x\nx = 1\n"]
    assert wf.tasks[0].body == "pass  # global y\ny = x\n"
