"""Flyte 2's own resource tests (flyte 2.12.1, ``tests/flyte/test_resources.py``) replayed on
taskcell: every form Flyte accepts is accepted, read as the same device, quantity, class and
partition, and every form it refuses is refused.

taskcell accepts a little more than Flyte (``"A100"`` without a count, any spelling of a name),
never less. ``FLYTE_ACCELERATORS`` is Flyte's list of accelerator strings, checked against the
SDK itself in ``tests/export/test_sdk_modules.py``.
"""

from __future__ import annotations

import pytest

from taskcell.errors import SpecError
from taskcell.export.flyte_target import FLYTE_ACCELERATORS, FLYTE_MIG, FLYTE_NAMES
from taskcell.spec import (
    AMD_GPU,
    GPU,
    HABANA_GAUDI,
    TPU,
    TPU_TOPOLOGIES,
    Device,
    Neuron,
    Resources,
)

_FROM_FLYTE = {flyte: ours for ours, flyte in FLYTE_NAMES.items()}
CLASSES = {
    **dict.fromkeys(("Inf1", "Inf2", "Trn1", "Trn1n", "Trn2", "Trn2u"), "NEURON"),
    **dict.fromkeys(
        ("MI100", "MI210", "MI250", "MI250X", "MI300A", "MI300X", "MI325X", "MI350X", "MI355X"),
        "AMD_GPU",
    ),
    "Gaudi1": "HABANA_GAUDI",
    "AppleSilicon": "APPLE_SILICON",
}
STRINGS = [f"{name}:{n}" for name, counts in FLYTE_ACCELERATORS.items() for n in counts]


def device_of(resources: Resources) -> tuple:
    """(device, quantity, class, partition), as Flyte's ``Resources.get_device()`` gives them."""
    gpu = resources.gpu
    return (gpu.device, gpu.quantity, gpu.device_class, gpu.partition)


@pytest.mark.parametrize("text", STRINGS)
def test_every_flyte_accelerator_string(text: str) -> None:
    name, _, count = text.partition(":")
    expected = (_FROM_FLYTE.get(name, name), int(count), CLASSES.get(name, "GPU"), None)
    assert device_of(Resources(gpu=text)) == expected


def test_gpu_with_int_and_string() -> None:
    assert device_of(Resources(gpu=1)) == (None, 1, "GPU", None)
    assert device_of(Resources(gpu="A100:2")) == ("A100", 2, "GPU", None)
    assert Resources(gpu=None).gpu is None


@pytest.mark.parametrize(
    ("gpu_type", "quantity"),
    [
        ("A10", 1),
        ("A10G", 2),
        ("A100", 4),
        ("A100 80G", 8),
        ("B200", 1),
        ("H100", 2),
        ("L4", 1),
        ("L40s", 2),
        ("T4", 4),
        ("V100", 1),
        ("RTX PRO 6000", 1),
    ],
)
def test_gpu_all_types(gpu_type: str, quantity: int) -> None:
    gpu = GPU(device=gpu_type, quantity=quantity)
    assert (gpu.quantity, gpu.device_class) == (quantity, "GPU")
    assert device_of(Resources(gpu=gpu))[1:] == (quantity, "GPU", None)


@pytest.mark.parametrize(
    ("device", "partition"),
    [(d, p) for d, parts in FLYTE_MIG.items() for p in parts],
)
def test_gpu_partitions(device: str, partition: str) -> None:
    gpu = GPU(device=device, quantity=1, partition=partition)
    assert (gpu.device, gpu.partition, gpu.device_class) == (device, partition, "GPU")


@pytest.mark.parametrize(
    ("tpu", "partition"), [(t, p) for t, parts in TPU_TOPOLOGIES.items() for p in parts]
)
def test_tpu_all_types_with_partitions(tpu: str, partition: str) -> None:
    found = TPU(device=tpu, partition=partition)
    assert (found.device, found.partition, found.device_class, found.quantity) == (
        tpu,
        partition,
        "TPU",
        1,
    )
    assert device_of(Resources(gpu=found)) == (tpu, 1, "TPU", partition)


@pytest.mark.parametrize(
    ("helper", "names", "kind"),
    [
        (Neuron, ["Inf1", "Inf2", "Trn1", "Trn1n", "Trn2", "Trn2u"], "NEURON"),
        (AMD_GPU, [n for n, c in CLASSES.items() if c == "AMD_GPU"], "AMD_GPU"),
        (HABANA_GAUDI, ["Gaudi1"], "HABANA_GAUDI"),
    ],
    ids=["neuron", "amd", "habana"],
)
def test_other_device_helpers(helper, names: list[str], kind: str) -> None:
    for name in names:
        assert device_of(Resources(gpu=helper(device=name))) == (name, 1, kind, None)


def test_raw_device() -> None:
    raw = Device(device="A100", device_class="GPU", quantity=1, partition="1g.5gb")
    assert device_of(Resources(gpu=raw)) == ("A100", 1, "GPU", "1g.5gb")


def test_cpu_memory_and_shm() -> None:
    for cpu in ("1", 1, ("1", "2"), (1, 2), 0.5):
        Resources(cpu=cpu)
    for memory in ("1Gi", ("1Gi", "2Gi")):
        Resources(memory=memory)
    assert Resources(shm="auto").shm == "auto"
    assert Resources(shm="1Gi").shm == 2**30


REFUSED = [
    (lambda: Resources(gpu="InvalidGPU:1"), "not a known GPU"),
    (lambda: GPU(device="A100", quantity=1, partition="invalid_partition"), "A100 MIG partition"),
    (lambda: Resources(gpu=-1), "negative"),
    (lambda: Resources(gpu="A100:invalid_quantity"), "whole number"),
    (lambda: GPU(device="H100", quantity=1, partition="invalid"), "H100 MIG partition"),
    (lambda: GPU(device="InvalidGPU", quantity=1), "not a known GPU"),
    (lambda: GPU(device="A100", quantity=0), "quantity"),
    (lambda: TPU(device="InvalidTPU"), "TPU device 'InvalidTPU' is not known"),
    (lambda: TPU(device="V5P", partition="invalid"), "V5P topology"),
    (lambda: TPU(device="V6E", partition="invalid"), "V6E topology"),
    (lambda: Neuron(device="InvalidNeuron"), "NEURON device 'InvalidNeuron' is not known"),
    (lambda: AMD_GPU(device="InvalidAMD"), "AMD_GPU device 'InvalidAMD' is not known"),
    (lambda: HABANA_GAUDI(device="InvalidGaudi"), "HABANA_GAUDI device 'InvalidGaudi'"),
    (lambda: GPU("T4 shared", 1, "1g.5gb"), "shared GPU takes no partition"),
    (lambda: Resources(cpu=("1", "2", "3")), "a range must be a \\(request, limit\\) pair"),
    (lambda: Resources(memory=("1Gi", "2Gi", "3Gi")), "a range must be a \\(request, limit\\)"),
]


@pytest.mark.parametrize(("build", "words"), REFUSED, ids=[w for _, w in REFUSED])
def test_what_flyte_refuses_is_refused(build, words: str) -> None:
    with pytest.raises(SpecError, match=words):
        build()
