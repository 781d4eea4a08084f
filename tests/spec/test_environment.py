"""Environments: seed 002's TaskEnvironment, overridden field by field."""

from __future__ import annotations

import pytest

from taskcell.errors import SpecError
from taskcell.spec import Environment, Expression, Resources, ResourceTemplate

# seed 002, "Usage in TaskEnvironment"
ML_TRAINING = Environment(
    name="ml-training",
    resources=Resources(
        cpu=("2", "8"), memory=("8Gi", "32Gi"), gpu="A100:2", disk="50Gi", shm="8Gi"
    ),
)


def test_override_keeps_fields_it_does_not_set() -> None:
    env = Environment("etl", Resources(cpu=2, memory="8Gi"))
    overridden = env.override(memory="16Gi")
    assert overridden.resources == Resources(cpu=2, memory="16Gi")
    assert overridden.name == "etl"
    assert env.resources == Resources(cpu=2, memory="8Gi")  # unchanged


def test_flyte_task_override_of_the_environment() -> None:
    # seed 002, "Usage in a task-specific override"
    task = Resources(cpu="16", memory="64Gi", gpu="H100:2", disk="50Gi", shm="8Gi")
    assert ML_TRAINING.override(resources=task).resources == task


def test_a_set_field_is_replaced_whole() -> None:
    overridden = ML_TRAINING.override(resources=Resources(cpu=4))
    assert overridden.resources == Resources(
        cpu=4, memory=("8Gi", "32Gi"), gpu="A100:2", disk="50Gi", shm="8Gi"
    )


def test_override_with_nothing_is_the_same_environment() -> None:
    assert ML_TRAINING.override() is ML_TRAINING


def test_override_of_an_environment_without_resources() -> None:
    assert Environment("bare").override(cpu=1).resources == Resources(cpu=1)


def test_dynamic_override_gives_a_template() -> None:
    def cores(files: list) -> int:
        return len(files)

    overridden = ML_TRAINING.override(cpu=cores)
    assert isinstance(overridden.resources, ResourceTemplate)
    assert overridden.resources.resolve({"files": [1, 2, 3]}) == Resources(
        cpu=3, memory=("8Gi", "32Gi"), gpu="A100:2", disk="50Gi", shm="8Gi"
    )


def test_fixed_override_of_a_dynamic_environment() -> None:
    env = Environment("dyn", ResourceTemplate(cpu=Expression("len(files)"), memory="4Gi"))
    overridden = env.override(memory="8Gi")
    assert overridden.resources.resolve({"files": [1]}) == Resources(cpu=1, memory="8Gi")


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: ML_TRAINING.override(memroy="1Gi"), ["'memroy'", 'did you mean "memory"?']),
        (lambda: ML_TRAINING.override(Resources(cpu=1), cpu=2), ["not both"]),
        (lambda: ML_TRAINING.override(resources={"cpu": 1}), ["Resources or a ResourceTemplate"]),
        (lambda: ML_TRAINING.override(memory="lots"), ["memory=", "'lots'"]),
        (lambda: Environment(""), ["non-empty name"]),
        (lambda: Environment("x", {"cpu": 1}), ["resources=", "'x'"]),
    ],
    ids=["typo", "both", "mapping", "bad-value", "no-name", "bad-resources"],
)
def test_refused(call: object, words: list[str]) -> None:
    with pytest.raises(SpecError) as info:
        call()
    for word in words:
        assert word in str(info.value)


def test_environment_is_frozen() -> None:
    with pytest.raises(AttributeError):
        ML_TRAINING.name = "other"  # type: ignore[misc]
