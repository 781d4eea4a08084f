"""Platform limits: seed 001's Latch maxima (126 cpus, 975 GiB memory, 4949 GiB storage)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from taskcell.errors import LimitError, SpecError
from taskcell.spec import BUILTIN_PRESETS, LATCH, PROFILES, PlatformLimits, Resources, check_limits

GI = 1024**3


def test_latch_profile() -> None:
    assert PlatformLimits("latch", cpu=126, memory=975 * GI, disk=4949 * GI) == LATCH
    assert (LATCH.cpu, LATCH.memory, LATCH.disk, LATCH.gpus) == (
        Fraction(126),
        975 * GI,
        4949 * GI,
        None,
    )
    assert PROFILES["latch"] is LATCH


WITHIN = [
    Resources(cpu=126, memory="975Gi", disk="4949Gi"),
    Resources(cpu=("2", "126"), memory=("1Gi", "975Gi")),
    Resources(cpu="500m", gpu="A100:8", shm="auto"),
    Resources(),
]


@pytest.mark.parametrize("resources", WITHIN, ids=repr)
def test_within_limits(resources: Resources) -> None:
    check_limits(resources, LATCH)
    check_limits(resources, "latch")


OVER = [
    (Resources(cpu=128), "cpu=128 exceeds latch's maximum of 126 cpus"),
    (Resources(cpu="126.5"), "cpu=126.5 exceeds latch's maximum of 126 cpus"),
    (
        Resources(cpu=(2, 200)),
        "cpu=200 (the limit of the range) exceeds latch's maximum of 126 cpus",
    ),
    (Resources(memory="976Gi"), "memory=976Gi exceeds latch's maximum of 975Gi memory"),
    (Resources(memory="1Ti"), "memory=1Ti exceeds latch's maximum of 975Gi memory"),
    (Resources(shm="1000Gi"), "shm=1000Gi exceeds latch's maximum of 975Gi memory"),
    (Resources(disk="5000Gi"), "disk=5000Gi exceeds latch's maximum of 4949Gi disk"),
]


@pytest.mark.parametrize(("resources", "message"), OVER, ids=[m.split(" ")[0] for _, m in OVER])
def test_over_limits(resources: Resources, message: str) -> None:
    with pytest.raises(LimitError) as info:
        check_limits(resources, "latch")
    assert str(info.value) == message


def test_every_field_over_is_named_at_once() -> None:
    with pytest.raises(LimitError) as info:
        check_limits(Resources(cpu=128, memory="1Ti", disk="5Ti"), LATCH)
    assert str(info.value).count("exceeds latch's maximum") == 3


def test_latchs_own_largest_preset_is_not_a_custom_task() -> None:
    # v100_x8_task has 128 cpus: Latch's fixed machines are not held to custom_task's maxima.
    with pytest.raises(LimitError, match="cpu=128"):
        check_limits(BUILTIN_PRESETS["v100_x8_task"], LATCH)


def test_gpu_limit() -> None:
    profile = PlatformLimits("lab", cpu="64", memory="512Gi", disk="2Ti", gpus=4)
    check_limits(Resources(gpu="A100:4"), profile)
    with pytest.raises(LimitError, match="gpu=8 exceeds lab's maximum of 4 gpus"):
        check_limits(Resources(gpu="A100:8"), profile)


def test_limit_error_is_a_spec_error() -> None:
    assert issubclass(LimitError, SpecError)


def test_unknown_profile() -> None:
    with pytest.raises(SpecError, match='did you mean "latch"'):
        check_limits(Resources(cpu=1), "lacth")


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        (dict(name="", cpu=1, memory="1Gi", disk="1Gi"), "name"),
        (dict(name="x", cpu=0, memory="1Gi", disk="1Gi"), "cpu="),
        (dict(name="x", cpu=1, memory="lots", disk="1Gi"), "memory="),
        (dict(name="x", cpu=1, memory="1Gi", disk="1Gi", gpus=1.5), "gpus="),
    ],
    ids=["name", "cpu", "memory", "gpus"],
)
def test_profile_validates_itself(kwargs: dict, words: str) -> None:
    with pytest.raises(SpecError, match=words):
        PlatformLimits(**kwargs)
