"""Accelerators: seed 002's GPU, TPU and Device examples, names, MIG and TPU validation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskcell.errors import SpecError
from taskcell.spec import (
    ACCELERATORS,
    AMD_GPU,
    APPLE_SILICON,
    GPU,
    HABANA_GAUDI,
    KNOWN_GPUS,
    MIG_PROFILES,
    TPU,
    TPU_TOPOLOGIES,
    Device,
    Neuron,
    format_gpu,
    parse_gpu,
)

PARSED = [
    # seed 002 (Flyte) "Simple GPU allocation"
    (1, GPU(None, 1)),
    (4, GPU(None, 4)),
    ("T4:1", GPU("T4", 1)),
    ("A100:2", GPU("A100", 2)),
    ("H100:8", GPU("H100", 8)),
    # seed 002: TaskEnvironment and the supported types
    ("A100 80G:1", GPU("A100 80G", 1)),
    ("H100:2", GPU("H100", 2)),
    ("L40s", GPU("L40s", 1)),
    ("L4", GPU("L4", 1)),
    # seed 001 (Latch): V100 and L40s presets
    ("V100:8", GPU("V100", 8)),
    ("L40s:4", GPU("L40s", 4)),
    # the canonical string form
    ("A100/1g.5gb:1", GPU("A100", 1, "1g.5gb")),
    ("A100 80G/7g.80gb:1", GPU("A100 80G", 1, "7g.80gb")),
    ("V5P/2x2x1", TPU("V5P", "2x2x1")),
    ("V6E/4x4", TPU("V6E", "4x4")),
    ("V5E", TPU("V5E")),
    ("device:custom_accelerator/large:2", Device(2, "GPU", "custom_accelerator", "large")),
    ("2", GPU(None, 2)),
    # Flyte 2's accelerator strings (flyte 2.12.1 ``Accelerators``), in Flyte's spellings
    ("B200:8", GPU("B200", 8)),
    ("A10:1", GPU("A10", 1)),
    ("A2:1", GPU("A2", 1)),
    ("GB10:1", GPU("GB10", 1)),
    ("RTX_PRO_6000:2", GPU("RTX_PRO_6000", 2)),
    ("RTX PRO 6000:1", GPU("RTX_PRO_6000", 1)),
    ("RTX_PRO_4500:1", GPU("RTX_PRO_4500", 1)),
    ("A100_80G:1", GPU("A100 80G", 1)),
    ("T4 shared:1", GPU("T4 shared", 1)),
    ("L40S shared:1", GPU("L40S shared", 1)),
    ("Trn1:16", Device(16, "NEURON", "Trn1")),
    ("Trn2u:4", Device(4, "NEURON", "Trn2u")),
    ("Inf1:9", Device(9, "NEURON", "Inf1")),
    ("MI355X:1", Device(1, "AMD_GPU", "MI355X")),
    ("Gaudi1:1", Device(1, "HABANA_GAUDI", "Gaudi1")),
    ("AppleSilicon", Device(1, "APPLE_SILICON", "AppleSilicon")),
    # Flyte's MIG partitions of the RTX PRO 6000
    ("RTX_PRO_6000/4g.96gb:1", GPU("RTX_PRO_6000", 1, "4g.96gb")),
    # other devices of a class, written CLASS:NAME
    ("neuron:Trn3:16", Device(16, "NEURON", "Trn3")),
    ("amd_gpu:MI400/half:1", Device(1, "AMD_GPU", "MI400", "half")),
    ("gpu:2", GPU(None, 2)),
    ("tpu:v5p/2x2x1", TPU("V5P", "2x2x1")),
    # no accelerator
    (0, None),
    ("0", None),
    (None, None),
]


@pytest.mark.parametrize(("value", "expected"), PARSED, ids=[repr(v) for v, _ in PARSED])
def test_parse_gpu(value: object, expected: object) -> None:
    assert parse_gpu(value) == expected


RECORDS = [
    # seed 002's helper-class examples, verbatim
    GPU(device="A100", quantity=2),
    GPU(device="A100", quantity=1, partition="1g.5gb"),
    GPU(device="A100 80G", quantity=1, partition="7g.80gb"),
    TPU(device="V5P", partition="2x2x1"),
    TPU(device="V6E", partition="4x4"),
    Device(device="custom_accelerator", quantity=2, partition="large"),
    # flyte 2.12.1's own signatures
    Device(2, "GPU", "custom_accelerator", "large"),
    Device(quantity=16, device_class="NEURON", device="Trn1"),
    Device(1, "AMD_GPU", "MI300X"),
    Device(2, "NEURON", "Trn3"),
]


@pytest.mark.parametrize("record", RECORDS, ids=[format_gpu(r) for r in RECORDS])
def test_records_pass_through_and_round_trip(record: object) -> None:
    assert parse_gpu(record) is record
    assert parse_gpu(format_gpu(record)) == record


SPELLINGS = [
    ("a100-80g", "A100 80G"),
    ("A100 80GB", "A100 80G"),
    ("a10080g", "A100 80G"),
    ("A100_80G", "A100 80G"),
    ("NVIDIA A100-80GB", "A100 80G"),
    ("A100 40GB", "A100"),
    ("a100", "A100"),
    ("L40S", "L40s"),
    ("l40s", "L40s"),
    ("Tesla T4", "T4"),
    ("a10g", "A10G"),
    ("v100", "V100"),
    ("h200", "H200"),
]


@pytest.mark.parametrize(("spelling", "canonical"), SPELLINGS, ids=[s for s, _ in SPELLINGS])
def test_gpu_names_are_matched_loosely_and_stored_canonically(
    spelling: str, canonical: str
) -> None:
    assert GPU(spelling).device == canonical
    assert parse_gpu(f"{spelling}:3") == GPU(canonical, 3)


def test_known_gpus() -> None:
    assert KNOWN_GPUS[:9] == (
        "T4",
        "L4",
        "L40s",
        "A10G",
        "V100",
        "A100",
        "A100 80G",
        "H100",
        "H200",
    )
    for name in KNOWN_GPUS:
        assert GPU(name).device == name
        assert parse_gpu(format_gpu(GPU(name, 2))) == GPU(name, 2)


def test_every_known_accelerator_reads_back() -> None:
    for name, kind in ACCELERATORS.items():
        record = parse_gpu(name)
        assert record.device == name and record.device_class == kind
        assert parse_gpu(format_gpu(record)) == record


FORMATTED = [
    (GPU(None, 2), "2"),
    (GPU(None, 1), "1"),
    (GPU("A100", 2), "A100:2"),
    (GPU("a100 80gb"), "A100 80G:1"),
    (GPU("L40S"), "L40s:1"),
    (GPU("A100", 1, "1G.5GB"), "A100/1g.5gb:1"),
    (TPU("v5p", "2x2x1"), "V5P/2x2x1"),
    (TPU("V6E"), "V6E"),
    (Device(2, "GPU", "custom_accelerator", "large"), "device:custom_accelerator/large:2"),
    (Device(1, device="my npu"), "device:my npu:1"),
    (Device(1, "GPU", "A100", "1g.5gb"), "A100/1g.5gb:1"),
    (Device(4, "neuron", "trn1"), "Trn1:4"),
    (Device(16, "NEURON", "Trn3"), "neuron:Trn3:16"),
    (GPU("rtx pro 6000"), "RTX_PRO_6000:1"),
    (GPU("l40s shared"), "L40S shared:1"),
]


@pytest.mark.parametrize(("record", "text"), FORMATTED, ids=[t for _, t in FORMATTED])
def test_format_gpu(record: object, text: str) -> None:
    assert format_gpu(record) == text


@pytest.mark.parametrize(
    ("device", "profile"),
    [(device, profile) for device, profiles in MIG_PROFILES.items() for profile in profiles],
    ids=lambda v: v,
)
def test_every_documented_mig_profile_is_accepted(device: str, profile: str) -> None:
    assert GPU(device, 1, profile).partition == profile
    assert parse_gpu(f"{device}/{profile}:2") == GPU(device, 2, profile)


def test_mig_table_matches_nvidia() -> None:
    assert MIG_PROFILES["A100"] == ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")
    assert MIG_PROFILES["A100 80G"] == MIG_PROFILES["H100"]
    assert MIG_PROFILES["H100"] == (
        "1g.10gb",
        "1g.20gb",
        "2g.20gb",
        "3g.40gb",
        "4g.40gb",
        "7g.80gb",
    )
    assert MIG_PROFILES["H200"][-1] == "7g.141gb"


@pytest.mark.parametrize(
    ("device", "topology"),
    [
        (device, topology)
        for device, topologies in TPU_TOPOLOGIES.items()
        for topology in topologies
    ],
    ids=lambda v: v,
)
def test_every_tpu_topology_is_accepted(device: str, topology: str) -> None:
    assert parse_gpu(f"{device}/{topology}") == TPU(device, topology)


REFUSED = [
    ("A1000:2", ["gpu=", "'A1000'", 'did you mean "A100"?', "T4, L4, L40s", "device:NAME"]),
    ("H10", ['did you mean "H100"?']),
    ("B100:1", ['did you mean "B200"?']),
    ("MI300:1", ['did you mean "MI300A"?']),
    ("Trn3:1", ['did you mean "Trn1"?', "'CLASS:NAME' (CLASS: gpu, tpu, neuron"]),
    ("RTX4090", ["'RTX4090'", "not a known GPU, TPU or other device"]),
    ("T4 shared/1g.5gb:1", ["shared GPU takes no partition", "'T4'"]),
    ("tpu:V5P:2", ["chosen by its topology"]),
    ("npu:x:1", ["'npu'", "not a device class", 'did you mean "GPU"?']),
    ("A100:0", ["'A100:0'", ">= 1"]),
    ("A100:-1", [">= 1"]),
    ("A100:two", ["'two'"]),
    ("H100/1g.5gb:1", ["'1g.5gb'", "1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb"]),
    ("A100/7g.80gb:1", ["A100 MIG partition", "7g.40gb"]),
    ("A100 80G/1g.5gb:1", ["1g.10gb"]),
    ("T4/1g.5gb:1", ["not available on 'T4'", "A100, A100 80G, H100, H200, RTX_PRO_6000"]),
    ("/1g.5gb:1", ["'/1g.5gb:1'"]),
    ("V5P:2", ["takes no count"]),
    ("V5P/3x3", ["V5P topology '3x3'", "2x2x1"]),
    ("V6E/2x2x1", ["V6E topology", "16x16"]),
    ("V5P/2x2", ['did you mean "2x2x2"?']),
    ("device:", ["'device:'"]),
    ("device:bad/name/x:1", ["device partition"]),
    (-1, ["negative"]),
    (1.5, ["1.5", '"A100:2"']),
    (True, ["True"]),
    ("", ["''"]),
    ([1], ["[1]"]),
]


@pytest.mark.parametrize(("value", "words"), REFUSED, ids=[repr(v) for v, _ in REFUSED])
def test_parse_gpu_refuses(value: object, words: list[str]) -> None:
    with pytest.raises(SpecError) as info:
        parse_gpu(value)
    message = str(info.value)
    assert message.startswith("gpu= ")
    for word in words:
        assert word in message


CONSTRUCTIONS = [
    (lambda: GPU("A100", 0), "quantity"),
    (lambda: GPU("A100", True), "quantity"),
    (lambda: GPU(None, 1, "1g.5gb"), "without a GPU device"),
    (lambda: GPU("A100 80G", 1, "7g.40gb"), "7g.80gb"),
    (lambda: GPU("V5P"), "is a TPU"),
    (lambda: TPU("V7"), "TPU device 'V7' is not known"),
    (lambda: TPU("V5P", "4x4"), "V5P topology"),
    (lambda: Device(1, "GPU", ""), "device name"),
    (lambda: Device(0, "GPU", "x"), "quantity"),
    (lambda: Device(1, "GPU", "a:b"), "device name"),
    (lambda: Device("custom_accelerator", 2), "Flyte's signature Device\\(quantity, device_class"),
    (lambda: Device(1, "NPU", "x"), 'device_class must be one of GPU, TPU, NEURON.*"GPU"'),
    (lambda: Device(2, "NEURON"), "needs a device name"),
    (lambda: Device(1, "GPU", "Trn1"), "'Trn1' is a NEURON device"),
    (lambda: Device(2, "APPLE_SILICON", "AppleSilicon"), "quantity must be 1"),
    (lambda: GPU("Trn1"), "NEURON device, not a GPU"),
    (lambda: Neuron("Trn3"), 'NEURON device .Trn3. is not known; did you mean "Trn1"'),
    (lambda: AMD_GPU("MI999X"), "AMD_GPU device"),
    (lambda: HABANA_GAUDI("Gaudi3"), 'did you mean "Gaudi1"'),
]


@pytest.mark.parametrize(("build", "words"), CONSTRUCTIONS, ids=[w for _, w in CONSTRUCTIONS])
def test_records_validate_themselves(build: object, words: str) -> None:
    with pytest.raises(SpecError, match=words):
        build()


def test_records_are_frozen_and_hashable() -> None:
    gpu = GPU("a100", 2)
    with pytest.raises(AttributeError):
        gpu.quantity = 3  # type: ignore[misc]
    assert {gpu, GPU("A100", 2)} == {GPU("A100", 2)}


def test_format_gpu_refuses_other_objects() -> None:
    with pytest.raises(SpecError, match="format_gpu"):
        format_gpu("A100:2")  # type: ignore[arg-type]


names = (
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_. -]{0,12}", fullmatch=True)
    .map(str.strip)
    .filter(lambda name: parse_gpu(f"neuron:{name}:1").device == name)  # not a known name
)
accelerators = st.one_of(
    st.builds(GPU, st.none() | st.sampled_from(KNOWN_GPUS), st.integers(1, 64)),
    st.sampled_from(sorted(MIG_PROFILES)).flatmap(
        lambda d: st.builds(GPU, st.just(d), st.integers(1, 7), st.sampled_from(MIG_PROFILES[d]))
    ),
    st.sampled_from(sorted(TPU_TOPOLOGIES)).flatmap(
        lambda d: st.builds(TPU, st.just(d), st.none() | st.sampled_from(TPU_TOPOLOGIES[d]))
    ),
    st.builds(
        Device, st.integers(1, 64), st.sampled_from(["GPU", "NEURON"]), names, st.none() | names
    ),
    st.sampled_from(
        [n for n, c in ACCELERATORS.items() if c not in ("GPU", "TPU", "APPLE_SILICON")]
    ).map(lambda name: parse_gpu(f"{name}:3")),
)


@given(accelerators)
def test_format_then_parse_round_trips(accelerator: object) -> None:
    assert parse_gpu(format_gpu(accelerator)) == accelerator


def test_flyte_helpers_make_devices() -> None:
    assert Neuron("trn1") == Device(1, "NEURON", "Trn1")
    assert AMD_GPU("MI300X") == Device(1, "AMD_GPU", "MI300X")
    assert HABANA_GAUDI("gaudi1") == Device(1, "HABANA_GAUDI", "Gaudi1")
    assert APPLE_SILICON() == parse_gpu("AppleSilicon")
    assert GPU("A100").device_class == "GPU"
    assert (TPU("V5P").device_class, TPU("V5P").quantity) == ("TPU", 1)


def test_a_device_naming_a_known_gpu_or_tpu_is_that_gpu_or_tpu() -> None:
    assert parse_gpu(Device(1, "GPU", "A100", "1g.5gb")) == GPU("A100", 1, "1g.5gb")
    assert parse_gpu(Device(2, "GPU")) == GPU(None, 2)
    assert parse_gpu(Device(1, "TPU", "V5P", "2x2x1")) == TPU("V5P", "2x2x1")
    other = Device(2, "GPU", "custom_accelerator", "large")
    assert parse_gpu(other) is other
