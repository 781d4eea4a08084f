"""Run by the Latch SDK's own venv: load an exported module, check its workflow, run it locally.

``python latch_harness.py MODULE OUT PATHS`` writes to OUT (pickle) the pod limits each task
object carries, as Latch built them (for a task with resource functions, the pod Latch builds
from them for the inputs the task got); whether the workflow compiled and serialized as
``latch register`` serializes it; and the workflow's outputs, run on this machine with the
notebook's files (PATHS: JSON, parameter -> path). Imports neither taskcell nor pytest.
"""

from __future__ import annotations

import importlib
import json
import pickle
import sys
from collections import OrderedDict

import latch.resources.dynamic as dynamic
from flytekit.configuration import Image, ImageConfig, SerializationSettings
from flytekit.core.base_task import PythonTask
from flytekit.core.workflow import WorkflowBase
from flytekit.tools.translator import get_serializable
from latch.types.directory import LatchDir
from latch.types.file import LatchFile


def limits(pod) -> dict:
    return dict(pod.pod_spec.containers[0].resources.limits)


def local(value, kind):
    """A LatchFile or LatchDir for a local path (with it as remote path: local runs need one)."""
    import pathlib

    full = str(pathlib.Path(value).resolve())
    return kind(full, full)


def inputs(workflow, paths: dict) -> dict:
    """The workflow's inputs that have no default: the notebook's paths, as Latch types."""
    given = {}
    for name, kind in workflow.python_interface.inputs.items():
        if name not in paths:
            continue
        if kind in (LatchFile, LatchDir):
            given[name] = local(paths[name], kind)
        else:
            item = kind.__args__[0]
            given[name] = [local(p, item) for p in paths[name]]
    return given


def main(module_path: str, out: str, paths_json: str) -> None:
    folder, _, name = module_path.rpartition("/")
    sys.path.insert(0, folder or ".")  # Latch finds a task by its module's import name
    module = importlib.import_module(name.removesuffix(".py"))
    values = vars(module).values()
    tasks = {t.name.rpartition(".")[2]: t for t in values if isinstance(t, PythonTask)}
    (workflow,) = [w for w in values if isinstance(w, WorkflowBase)]
    calls = {}
    original = dynamic.DynamicPythonFunctionTask.execute

    def execute(self, **kwargs):
        calls[self.name.rpartition(".")[2]] = kwargs
        return original(self, **kwargs)

    dynamic.DynamicPythonFunctionTask.execute = execute
    outputs = workflow(**inputs(workflow, json.loads(paths_json)))
    dynamic.DynamicPythonFunctionTask.execute = original
    pods = {}
    dynamic._override_task_resources = lambda pod: pods.setdefault("last", pod)
    found = {}
    for name, task in tasks.items():
        if isinstance(task, dynamic.DynamicPythonFunctionTask):
            pods.clear()
            task._pre_task_function(**calls[name])
            found[name] = limits(pods["last"])
        else:
            found[name] = limits(task.task_config)
    settings = SerializationSettings(
        image_config=ImageConfig(default_image=Image(name="default", fqn="workflow", tag="1")),
        project="taskcell",
        domain="development",
        version="1",
    )
    entities = OrderedDict()
    get_serializable(entities, settings, workflow)
    result = {
        "limits": found,
        "workflow": workflow.name,
        "serialized": len(entities),
        "outputs": outputs._asdict() if hasattr(outputs, "_asdict") else outputs,
        "docstring": workflow._workflow_function.__doc__,  # Latch's metadata goes here
    }
    with open(out, "wb") as f:
        pickle.dump(result, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
