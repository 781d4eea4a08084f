"""Run by the Flyte SDK's own venv: load an exported module, read its tasks, run it locally.

``python flyte_harness.py MODULE OUT CHECKS`` writes to OUT (JSON) the resources each task
object carries, as Flyte holds them; the requests ``task.override(resources=...)`` made while
``flyte.run`` ran the workflow on this machine; and the answers to CHECKS (JSON): whether
Flyte's accelerator strings are the exporter's table, and what ``get_device()`` gives for each
``gpu=`` the exporter wrote beside the string Flyte documents for it. Imports neither taskcell
nor pytest: they are not installed here.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
import typing

import flyte
import flyte._resources as flyte_resources
import flyte._task as flyte_task


def spelled(resources: flyte.Resources | None) -> dict | None:
    """A Resources as JSON: tuples as lists, a Device as its fields."""
    if resources is None:
        return None
    out = {}
    for field in dataclasses.fields(resources):
        value = getattr(resources, field.name)
        if isinstance(value, flyte_resources.Device):
            value = {"device": dataclasses.asdict(value)}
        out[field.name] = list(value) if isinstance(value, tuple) else value
    return out


def device(gpu: object) -> dict | None:
    found = flyte.Resources(gpu=gpu).get_device()
    return None if found is None else dataclasses.asdict(found)


def main(module_path: str, out: str, checks_path: str) -> None:
    spec = importlib.util.spec_from_file_location("exported_workflow", module_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tasks = {
        name: value
        for name, value in vars(module).items()
        if isinstance(value, flyte_task.TaskTemplate)
    }
    overrides = []
    original = flyte_task.TaskTemplate.override

    def override(self, **options):
        overrides.append([self.short_name, spelled(options.get("resources"))])
        return original(self, **options)

    flyte_task.TaskTemplate.override = override
    flyte.init()
    flyte.run(module.main)
    flyte_task.TaskTemplate.override = original
    memory = flyte.Resources(memory="3Gi")
    probe = next(iter(tasks.values())).override(resources=memory)
    with open(checks_path) as f:
        checks = json.load(f)
    table = {}
    for text in typing.get_args(flyte_resources.Accelerators):
        name, _, count = text.partition(":")
        table.setdefault(name, []).append(int(count or 1))
    answers = {
        "table_agrees": {k: sorted(set(v)) for k, v in table.items()} == checks["table"],
        "devices": [
            [device(eval(documented, {"flyte": flyte})), device(eval(written, {"flyte": flyte}))]
            for documented, written in checks["gpus"]
        ],
        "override_replaces_whole": spelled(probe.resources)
        == spelled(flyte.Resources(memory="3Gi")),
    }
    result = {
        "resources": {t.short_name: spelled(t.resources) for t in tasks.values()},
        "overrides": overrides,
        "checks": answers,
    }
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
