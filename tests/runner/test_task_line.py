"""The ``%%task`` line: its grammar and the request it stands for."""

from __future__ import annotations

import pytest

from taskcell.errors import SpecError
from taskcell.runner.task_line import TaskLine, build_request, parse_task_line
from taskcell.spec import BUILTIN_PRESETS, Environment, Resources

ENVS = {"train": Environment("train", Resources(cpu=4, memory="16Gi", gpu="A100:1"))}


def request(line: str, **namespace) -> Resources:
    return build_request(parse_task_line(line), lambda: BUILTIN_PRESETS, ENVS, namespace)


def test_line_fields_as_typed():
    assert parse_task_line('small_task --gpu "A100 80G:1" --bg --retries 2 --name fit') == TaskLine(
        preset="small_task",
        fields={"gpu": "A100 80G:1"},
        background=True,
        retries=2,
        name="fit",
    )


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("--gpu A100:2 --shm auto", Resources(gpu="A100:2", shm="auto")),
        ("small_gpu_task --memory 48Gi", Resources(cpu=8, memory="48Gi", gpu=1)),
        ("--preset small_task", Resources(cpu=2, memory="4Gi")),
        ("--env train --memory 32Gi", Resources(cpu=4, memory="32Gi", gpu="A100:1")),
        ("--env train small_task", Resources(cpu=2, memory="4Gi", gpu="A100:1")),
        ("--cpu 1,4 --memory=1Gi,2Gi", Resources(cpu=(1, 4), memory=("1Gi", "2Gi"))),
        ("--resources process=1", Resources(extra={"process": 1})),
        ('--resources "GPU=2 MEMORY=100e9"', Resources(extra={"GPU": 2, "MEMORY": 100e9})),
        ("--memory 70e9", Resources(memory=70e9)),
    ],
    ids=["typed-gpu", "preset-overridden", "preset-option", "env", "env-then-preset",
         "ranges", "abstract", "dask-pairs", "e-notation"],
)  # fmt: skip
def test_request_layers_env_then_preset_then_fields(line, expected):
    assert request(line) == expected


def test_expressions_are_evaluated_in_the_namespace():
    line = '--cpu "min(8, len(files))" --disk "f\'{10 * len(files)}Gi\'"'
    assert request(line, files=["a", "b"]) == Resources(cpu=2, disk="20Gi")


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("--gpu A100:x", ["gpu=", "'A100:x'"]),
        ("--memory lots", ["--memory 'lots'", "name 'lots' is not defined", "4Gi"]),
        ("smal_task", ["unknown preset 'smal_task'", "did you mean 'small_task'?"]),
        ("small_task --preset large_task", ["two presets"]),
        ("--retries -1", ["--retries must be 0 or more"]),
        ("--env nope", ["--env 'nope' is not a defined environment (train)"]),
        ("--resources process", ["--resources must be NAME=NUMBER pairs"]),
        ("--memroy 4Gi", ["unrecognized arguments: --memroy", 'did you mean "--memory"?']),
    ],
    ids=["gpu", "memory", "preset", "two-presets", "retries", "env", "pairs", "typo"],
)
def test_bad_lines_name_the_option_and_the_accepted_forms(line, words):
    with pytest.raises(SpecError) as info:
        request(line)
    for word in words:
        assert word in str(info.value)
