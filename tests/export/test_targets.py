"""The targets table: every named target has one row, and the plan follows a row's traits."""

from __future__ import annotations

import dataclasses
import importlib

import pytest

from taskcell.export import EXPORT_TARGETS, TARGETS
from taskcell.export.flow import TaskStep, plan_workflow
from taskcell.export.notebook import ExportError, read_notebook
from taskcell.spec import BUILTIN_PRESETS

from .conftest import notebook

CLUSTER = (
    "from dask.distributed import Client\nclient = Client()",
    "%%task\nf = client.submit(abs, -1)",
    "print(f.result())",
)
FUNCTION_CHANGES = (
    "results = []\ndef bump(x):\n    results.append(x)",
    "%%task\nbump(1)",
    "print(results)",
)


def test_every_target_has_one_row_and_a_renderer():
    assert TARGETS == tuple(EXPORT_TARGETS) == tuple(row.name for row in EXPORT_TARGETS.values())
    for row in EXPORT_TARGETS.values():
        module, _, function = row.renderer.partition(":")
        assert callable(getattr(importlib.import_module(module), function))


def test_a_new_row_plans_by_its_traits_not_its_name():
    nb = read_notebook(notebook(*CLUSTER), BUILTIN_PRESETS)
    keeps = plan_workflow(nb, BUILTIN_PRESETS, "dask")
    assert keeps.tasks == []  # the task cell runs in the driver, beside the notebook's cluster
    own = dataclasses.replace(EXPORT_TARGETS["dask"], keeps_cluster=False)
    (step,) = plan_workflow(nb, BUILTIN_PRESETS, own).tasks
    assert isinstance(step, TaskStep) and step.params == ("client",)


def test_a_row_that_copies_functions_refuses_one_changing_the_notebooks_data():
    nb = read_notebook(notebook(*FUNCTION_CHANGES), BUILTIN_PRESETS)
    assert plan_workflow(nb, BUILTIN_PRESETS, "dask").tasks[0].updates == ("results",)
    copies = dataclasses.replace(EXPORT_TARGETS["dask"], ships_functions="copy")
    with pytest.raises(ExportError, match=r"calls bump\(\), which changes results in place"):
        plan_workflow(nb, BUILTIN_PRESETS, copies)
