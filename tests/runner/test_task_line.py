"""The ``%%task`` line: its grammar and the request it stands for."""

from __future__ import annotations

import pytest

from taskcell.errors import SpecError
from taskcell.runner.task_line import TaskLine, build_request, parse_task_line
from taskcell.spec import (
    BUILTIN_PRESETS,
    Environment,
    Expression,
    Resources,
    ResourceTemplate,
    get_preset,
)

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
        ("smal_task", ["preset= 'smal_task' is not a known preset", 'did you mean "small_task"?']),
        ("small_task --preset large_task", ["two presets"]),
        ("--retries -1", ["--retries must be 0 or more"]),
        ("--env nope", ["--env 'nope' is not a defined environment (train)"]),
        ("--resources process", ["--resources: expected NAME=NUMBER pairs"]),
        ("--memroy 4Gi", ["unrecognized arguments: --memroy", 'did you mean "--memory"?']),
    ],
    ids=["gpu", "memory", "preset", "two-presets", "retries", "env", "pairs", "typo"],
)
def test_bad_lines_name_the_option_and_the_accepted_forms(line, words):
    with pytest.raises(SpecError) as info:
        request(line)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("--memory -1Gi", TaskLine(fields={"memory": "-1Gi"})),
        ("--memory=-1Gi", TaskLine(fields={"memory": "-1Gi"})),
        ("--cpu -1,4 --bg", TaskLine(fields={"cpu": "-1,4"}, background=True)),
        ("--name -x small_task", TaskLine(preset="small_task", name="-x")),
        ("--resources -x=1", TaskLine(extra={"-x": 1})),
    ],
    ids=["space", "equals", "range", "name", "resources"],
)
def test_a_value_may_start_with_a_dash(line: str, expected: TaskLine) -> None:
    assert parse_task_line(line) == expected


@pytest.mark.parametrize("line", ["--memory --cpu 2", "--memory --cpu=2", "--name --bg"])
def test_an_option_after_an_option_is_still_a_missing_value(line: str) -> None:
    with pytest.raises(SpecError, match="expected one argument"):
        parse_task_line(line)


@pytest.mark.parametrize(
    ("line", "retries"), [("", 0), ("--retries 3", 3), ("--retries=100", 100)], ids=repr
)
def test_retries(line: str, retries: int) -> None:
    assert parse_task_line(line).retries == retries


@pytest.mark.parametrize("value", ["101", "２", "-1", "1.5", "9" * 5000], ids=lambda v: v[:8])
def test_retries_refused_name_the_value_and_the_range(value: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_task_line(f"--retries {value}")
    message = str(info.value)
    assert "--retries must be 0 or more, at most 100" in message
    assert repr(value)[:40] in message


def test_resources_amounts_are_read_exactly_as_the_api_reads_them() -> None:
    assert parse_task_line('--resources "process=1 MEMORY=70e9 x=0.5"').extra == {
        "process": 1,
        "MEMORY": 70 * 10**9,
        "x": 0.5,
    }
    for amount in ["inf", "nan", "1_000", "0x10", "２", "-1", "1e400"]:
        with pytest.raises(SpecError, match=r"--resources: 'x' must be a positive number"):
            parse_task_line(f"--resources x={amount}")


def test_an_unknown_preset_reads_the_same_on_the_line_as_through_the_api():
    with pytest.raises(SpecError) as on_the_line:
        request("v100x4_task")
    with pytest.raises(SpecError) as through_the_api:
        get_preset("v100x4_task", BUILTIN_PRESETS)
    assert str(on_the_line.value) == str(through_the_api.value)
    assert 'did you mean "v100_x4_task"?' in str(on_the_line.value)


def test_an_environment_made_in_python_computes_its_fields_like_the_line():
    dynamic = {"io": Environment("io", ResourceTemplate(cpu=Expression("len(files)")))}
    line = parse_task_line("--env io --memory 1Gi")
    request = build_request(line, dict, dynamic, {"files": ["a", "b"]})
    assert request == Resources(cpu=2, memory="1Gi")
