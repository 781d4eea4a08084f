"""`Resources`: every example of seeds 002 and 003, the three spellings, override, refusals."""

from __future__ import annotations

import json
import pickle
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskcell.errors import SpecError
from taskcell.runner.task_line import build_request, parse_task_line
from taskcell.spec import GPU, TPU, Device, Range, Resources

GI = 1024**3

# seed 002 (Flyte): each example, and the numbers it stands for.
FLYTE_EXAMPLES = [
    (dict(cpu="500m"), "cpu", Range(Fraction(1, 2), Fraction(1, 2))),
    (dict(cpu="2"), "cpu", Range(Fraction(2), Fraction(2))),
    (dict(cpu="1.5"), "cpu", Range(Fraction(3, 2), Fraction(3, 2))),
    (dict(cpu=1), "cpu", Range(Fraction(1), Fraction(1))),
    (dict(cpu=0.5), "cpu", Range(Fraction(1, 2), Fraction(1, 2))),
    (dict(cpu=("1", "2")), "cpu", Range(Fraction(1), Fraction(2))),
    (dict(cpu=(1, 4)), "cpu", Range(Fraction(1), Fraction(4))),
    (dict(cpu=("2", "8")), "cpu", Range(Fraction(2), Fraction(8))),
    (dict(memory="512Mi"), "memory", Range(512 * 1024**2, 512 * 1024**2)),
    (dict(memory="1Gi"), "memory", Range(GI, GI)),
    (dict(memory="2Gi"), "memory", Range(2 * GI, 2 * GI)),
    (dict(memory="500M"), "memory", Range(500_000_000, 500_000_000)),
    (dict(memory="1G"), "memory", Range(10**9, 10**9)),
    (dict(memory=("1Gi", "4Gi")), "memory", Range(GI, 4 * GI)),
    (dict(memory=("8Gi", "32Gi")), "memory", Range(8 * GI, 32 * GI)),
    (dict(memory="64Gi"), "memory", Range(64 * GI, 64 * GI)),
    (dict(gpu=1), "gpu", GPU(None, 1)),
    (dict(gpu=4), "gpu", GPU(None, 4)),
    (dict(gpu="T4:1"), "gpu", GPU("T4", 1)),
    (dict(gpu="A100:2"), "gpu", GPU("A100", 2)),
    (dict(gpu="H100:8"), "gpu", GPU("H100", 8)),
    (dict(gpu=GPU(device="A100", quantity=2)), "gpu", GPU("A100", 2)),
    (dict(gpu=GPU("A100", 1, "1g.5gb")), "gpu", GPU("A100", 1, "1g.5gb")),
    (dict(gpu=TPU(device="V5P", partition="2x2x1")), "gpu", TPU("V5P", "2x2x1")),
    (dict(gpu=TPU(device="V6E", partition="4x4")), "gpu", TPU("V6E", "4x4")),
    (
        dict(gpu=Device(2, "GPU", "custom_accelerator", "large")),
        "gpu",
        Device(2, "GPU", "custom_accelerator", "large"),
    ),
    (dict(disk="10Gi"), "disk", Range(10 * GI, 10 * GI)),
    (dict(disk="100Gi"), "disk", Range(100 * GI, 100 * GI)),
    (dict(disk="1Ti"), "disk", Range(1024 * GI, 1024 * GI)),
    (dict(disk="50Gi"), "disk", Range(50 * GI, 50 * GI)),
    (dict(disk="200Gi"), "disk", Range(200 * GI, 200 * GI)),
    (dict(disk="500Gi"), "disk", Range(500 * GI, 500 * GI)),
    (dict(shm="1Gi"), "shm", GI),
    (dict(shm="auto"), "shm", "auto"),
    (dict(shm="16Gi"), "shm", 16 * GI),
    (dict(shm="8Gi"), "shm", 8 * GI),
]


@pytest.mark.parametrize(
    ("kwargs", "field", "expected"), FLYTE_EXAMPLES, ids=[repr(k) for k, _, _ in FLYTE_EXAMPLES]
)
def test_flyte_examples(kwargs: dict, field: str, expected: object) -> None:
    assert getattr(Resources(**kwargs), field) == expected


def test_flyte_task_environment_example() -> None:
    resources = Resources(
        cpu=("2", "8"), memory=("8Gi", "32Gi"), gpu="A100:2", disk="50Gi", shm="8Gi"
    )
    assert resources.cpu == Range(Fraction(2), Fraction(8))
    assert resources.memory == Range(8 * GI, 32 * GI)
    assert resources.gpu == GPU("A100", 2)
    assert resources.disk == Range(50 * GI, 50 * GI)
    assert resources.shm == 8 * GI
    assert repr(resources) == (
        "Resources(cpu=(2, 8), memory=('8Gi', '32Gi'), gpu='A100:2', disk='50Gi', shm='8Gi')"
    )


def test_flyte_task_override_example() -> None:
    resources = Resources(cpu="16", memory="64Gi", gpu="H100:2", disk="50Gi", shm="8Gi")
    assert resources.to_dict() == {
        "cpu": "16",
        "memory": "64Gi",
        "gpu": "H100:2",
        "disk": "50Gi",
        "shm": "8Gi",
    }


# seed 003 (Dask): abstract resources, taken as written.
DASK_EXAMPLES = [
    ({"GPU": 2}, {"GPU": 2}),
    ({"GPU": 1}, {"GPU": 1}),
    ({"MEMORY": 100e9}, {"MEMORY": 100_000_000_000}),
    ({"MEMORY": "100e9"}, {"MEMORY": 100_000_000_000}),
    ({"MEMORY": 70e9}, {"MEMORY": 70_000_000_000}),
    ({"process": 1}, {"process": 1}),
    ({"GPU-A100": 0.5}, {"GPU-A100": 0.5}),
]


@pytest.mark.parametrize(
    ("extra", "expected"), DASK_EXAMPLES, ids=[repr(e) for e, _ in DASK_EXAMPLES]
)
def test_dask_abstract_resources(extra: dict, expected: dict) -> None:
    resources = Resources(extra=extra)
    assert resources.extra == expected
    with pytest.raises(TypeError):
        resources.extra["GPU"] = 3  # type: ignore[index]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ('--resources "GPU=2"', {"GPU": 2}),
        ('--resources "MEMORY=100e9"', {"MEMORY": 100_000_000_000}),
        ("--resources process=1", {"process": 1}),
        ('--resources "GPU=2 MEMORY=100e9"', {"GPU": 2, "MEMORY": 100_000_000_000}),
    ],
    ids=["GPU=2", "MEMORY=100e9", "process=1", "two"],
)
def test_dask_command_line_forms(options: str, expected: dict) -> None:
    assert read_options(options).extra == expected


def test_unset_and_empty() -> None:
    empty = Resources()
    assert empty.is_empty()
    assert (empty.cpu, empty.memory, empty.gpu, empty.disk, empty.shm) == (None,) * 5
    assert empty.extra == {}
    assert repr(empty) == "Resources()"
    assert empty.to_dict() == {}
    assert empty.to_options() == ""
    assert Resources(gpu=0).is_empty()
    assert not Resources(extra={"process": 1}).is_empty()


REPRS = [
    (Resources(cpu=2, memory="4Gi", gpu="A100:2"), "Resources(cpu=2, memory='4Gi', gpu='A100:2')"),
    (Resources(cpu="500m"), "Resources(cpu=0.5)"),
    (Resources(memory=4 * GI), "Resources(memory='4Gi')"),
    (Resources(gpu=2), "Resources(gpu=2)"),
    (Resources(gpu="a100 80gb"), "Resources(gpu='A100 80G:1')"),
    (Resources(gpu=TPU("V5P", "2x2x1")), "Resources(gpu='V5P/2x2x1')"),
    (Resources(shm="AUTO"), "Resources(shm='auto')"),
    (Resources(extra={"process": 1}), "Resources(extra={'process': 1})"),
    (Resources(cpu=(1, 4)), "Resources(cpu=(1, 4))"),
]


@pytest.mark.parametrize(("resources", "text"), REPRS, ids=[t for _, t in REPRS])
def test_repr_reads_like_what_a_person_types(resources: Resources, text: str) -> None:
    assert repr(resources) == text
    namespace = {"Resources": Resources}
    assert eval(text, namespace) == resources


def test_equal_requests_are_equal_and_hash_alike() -> None:
    a = Resources(cpu="2", memory="4096Mi", gpu="a100:2", extra={"b": 1, "a": 2})
    b = Resources(cpu=2.0, memory=4 * GI, gpu=GPU("A100", 2), extra={"a": 2, "b": 1.0})
    assert a == b
    assert hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a != Resources(cpu=2)
    with pytest.raises(AttributeError):
        a.cpu = None  # type: ignore[misc]


def test_to_dict_is_json_safe_and_canonical() -> None:
    resources = Resources(
        cpu=("500m", 2), memory="1.5Gi", gpu="A100/1g.5gb:1", shm="auto", extra={"process": 1}
    )
    data = resources.to_dict()
    assert data == {
        "cpu": ["0.5", "2"],
        "memory": "1536Mi",
        "gpu": "A100/1g.5gb:1",
        "shm": "auto",
        "extra": {"process": 1},
    }
    assert Resources.from_dict(json.loads(json.dumps(data))) == resources


def test_from_dict_names_unknown_keys() -> None:
    with pytest.raises(SpecError) as info:
        Resources.from_dict({"cpus": 2, "memory": "4Gi", "vram": 1})
    message = str(info.value)
    assert "'cpus'" in message
    assert "'vram'" in message
    assert 'did you mean "cpu"?' in message
    assert "cpu, memory, gpu, disk, shm, extra" in message


def test_from_dict_refuses_non_mappings() -> None:
    with pytest.raises(SpecError, match="mapping"):
        Resources.from_dict(["cpu", 2])  # type: ignore[arg-type]


OPTIONS = [
    (Resources(cpu=2, memory="4Gi", gpu="A100:2", shm="auto", extra={"process": 1}),
     "--cpu 2 --memory 4Gi --gpu A100:2 --shm auto --resources process=1"),
    (Resources(gpu="A100 80G:1"), '--gpu "A100 80G:1"'),
    (Resources(cpu=("2", "8"), memory=("8Gi", "32Gi"), disk="50Gi"),
     "--cpu 2,8 --memory 8Gi,32Gi --disk 50Gi"),
    (Resources(extra={"GPU": 2, "MEMORY": 70e9}), "--resources GPU=2,MEMORY=70000000000"),
    (Resources(gpu=Device(2, "GPU", "custom_accelerator", "large")),
     "--gpu device:custom_accelerator/large:2"),
]  # fmt: skip


def read_options(text: str) -> Resources:
    """Options read back by the one ``%%task`` grammar, as the magic and the exporter read them."""
    return build_request(parse_task_line(text), dict, {}, {})


@pytest.mark.parametrize(("resources", "text"), OPTIONS, ids=[t for _, t in OPTIONS])
def test_to_options(resources: Resources, text: str) -> None:
    assert resources.to_options() == text
    assert read_options(text) == resources


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ("--cpus 2", ["unrecognized arguments: --cpus", 'did you mean "--cpu"?']),
        ("cpu 2", ["unrecognized arguments: 2"]),
        ("--cpu", ["--cpu: expected one argument"]),
        ("--resources process", ["NAME=NUMBER"]),
        ('--gpu "A100', ["cannot split"]),
        ("--memory=lots", ["--memory 'lots'", "memory=", "4Gi"]),
    ],
    ids=["typo", "no-dashes", "no-value", "pair", "quote", "bad-value"],
)
def test_bad_options_are_refused(options: str, words: list[str]) -> None:
    with pytest.raises(SpecError) as info:
        read_options(options)
    for word in words:
        assert word in str(info.value)


def test_override_is_field_by_field() -> None:
    base = Resources(cpu=2, memory=("8Gi", "16Gi"), gpu="A100:1", extra={"process": 1})
    assert base.override(Resources(memory="32Gi")) == Resources(
        cpu=2, memory="32Gi", gpu="A100:1", extra={"process": 1}
    )
    assert base.override(Resources(extra={"FPGA": 1})).extra == {"FPGA": 1}
    assert base.override(Resources()) == base
    assert Resources().override(base) == base


def test_override_refuses_other_types() -> None:
    with pytest.raises(SpecError, match="override"):
        Resources().override({"cpu": 2})  # type: ignore[arg-type]


REFUSED = [
    (dict(memory=("4Gi", "1Gi")), ["memory= limit '1Gi' is below request '4Gi'"]),
    (dict(cpu=(4, 2)), ["cpu= limit '2' is below request '4'"]),
    (dict(disk=("1Ti", "1Gi")), ["disk= limit"]),
    (dict(cpu=(1, 2, 3)), ["cpu= a range must be a (request, limit) pair"]),
    (dict(memory="lots"), ["memory=", "'lots'", '"4Gi"']),
    (dict(memory="4Gb"), ['did you mean "4G" or "4Gi"?']),
    (dict(disk="-1Gi"), ["disk=", "negative"]),
    (dict(shm="atuo"), ["shm=", '"auto"', 'did you mean "auto"?']),
    (dict(shm="0"), ["shm=", "zero"]),
    (dict(cpu="lots"), ["cpu=", "'lots'"]),
    (dict(gpu="A1000"), ["gpu=", 'did you mean "A100"?']),
    (dict(extra={"process": 0}), ["extra=", "'process'", "positive"]),
    (dict(extra={"process": True}), ["extra=", "positive"]),
    (dict(extra={"bad name": 1}), ["extra=", "'bad name'"]),
    (dict(extra={"MEMORY": "lots"}), ["extra=", "'lots'"]),
    (dict(extra=["process"]), ["extra=", "mapping"]),
]


@pytest.mark.parametrize(("kwargs", "words"), REFUSED, ids=[repr(k) for k, _ in REFUSED])
def test_refused(kwargs: dict, words: list[str]) -> None:
    with pytest.raises(SpecError) as info:
        Resources(**kwargs)
    for word in words:
        assert word in str(info.value)


def test_range_checks_itself() -> None:
    assert Range(1, 2).limit == 2
    assert Range(2, 2).is_fixed
    with pytest.raises(SpecError, match="below request"):
        Range(2, 1)


millicores = st.integers(1, 10**6).map(lambda m: Fraction(m, 1000))
sizes = st.integers(2**20, 2**62)  # a request asks for at least 1Mi, at most 4Ei


def ranges(amounts: st.SearchStrategy) -> st.SearchStrategy:
    pairs = st.tuples(amounts, amounts).map(lambda p: tuple(sorted(p)))
    return st.none() | amounts | pairs


requests = st.builds(
    Resources,
    cpu=ranges(millicores),
    memory=ranges(sizes),
    gpu=st.none()
    | st.integers(0, 16)
    | st.sampled_from(["A100:2", "L40s", "H100/1g.10gb:3", "V5P/2x2x1", "device:npu:2"]),
    disk=ranges(sizes),
    shm=st.none() | st.just("auto") | sizes,
    extra=st.lists(
        st.tuples(
            # Not a field's own Dask name (CPU, GPU, ...), and no two names alike but for case.
            st.from_regex(r"[A-Za-z0-9_.:/+-]{1,8}", fullmatch=True).filter(
                lambda name: name.casefold() not in {"cpu", "memory", "gpu", "disk", "shm"}
            ),
            st.integers(1, 10**12) | st.floats(1e-6, 1e12),
        ),
        max_size=3,
        unique_by=lambda pair: pair[0].casefold(),
    ).map(dict),
)


@given(requests)
def test_dict_round_trip(resources: Resources) -> None:
    assert Resources.from_dict(json.loads(json.dumps(resources.to_dict()))) == resources


@given(requests)
def test_options_and_repr_round_trip(resources: Resources) -> None:
    assert read_options(resources.to_options()) == resources
    assert eval(repr(resources), {"Resources": Resources}) == resources
    assert hash(Resources.from_dict(resources.to_dict())) == hash(resources)


@given(requests)
def test_requests_pickle(resources: Resources) -> None:
    # Requests travel to Dask's scheduler and workers.
    assert pickle.loads(pickle.dumps(resources)) == resources
