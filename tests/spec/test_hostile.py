"""Every bad input refused cleanly (issue 10): a value or a SpecError, for anything.

The findings of fuzzing, one test each, then properties that drive the Python API and the
``%%task`` line with random and hostile text and fail on any other exception. A number too big
for any machine is refused without being built: the refusals are held to a memory bound, which
load cannot change. How long they take is measured in ``benchmarks/bench_hostile.py``.
"""

from __future__ import annotations

import math
import shlex
import tracemalloc
from collections.abc import Callable
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taskcell.cluster import names
from taskcell.cluster.mapping import wanted
from taskcell.errors import SpecError
from taskcell.runner.task_line import build_request, parse_task_line
from taskcell.spec import BUILTIN_PRESETS, Resources, latch_custom, parse_cpu, parse_quantity
from taskcell.spec.resources import DASK_NAMES

GI = 1024**3
FIELDS = ("cpu", "memory", "gpu", "disk", "shm")
# The accepted forms each field's message names.
FORMS = {
    "cpu": 'a positive number of cores such as 2, 0.5, "1.5" or "500m"',
    "memory": 'a positive quantity such as "4Gi", "512Mi", "500M" or 100e9 bytes',
    "disk": 'a positive quantity such as "4Gi", "512Mi", "500M" or 100e9 bytes',
    "shm": 'a positive quantity such as "4Gi", "512Mi", "500M" or 100e9 bytes',
    "gpu": 'a GPU count such as 1, or an accelerator such as "A100:2"',
    "extra": "a positive number such as 1 or 70e9",
}


#: Far more memory than any refusal needs (a few kB), far less than a number such as 1e99999999
#: takes once built (41 MB as an int).
MOST_MEMORY = 4 * 2**20


def refusal(call: Callable[[], object]) -> str:
    """The message of the SpecError ``call`` raises, which it must raise without building the
    number it refuses."""
    tracemalloc.start()
    try:
        with pytest.raises(SpecError) as info:
            call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MOST_MEMORY, f"{peak} bytes to refuse it"
    return str(info.value)


def api(field: str, value: object) -> Callable[[], Resources]:
    if field == "extra":
        return lambda: Resources(extra={"x": value})
    return lambda: Resources(**{field: value})


def line(text: str) -> Callable[[], Resources]:
    return lambda: build_request(parse_task_line(text), lambda: BUILTIN_PRESETS, {}, {})


HUGE = [
    ("memory", "1e9999999", "far more than any machine has"),
    ("memory", "1e99999999", "far more than any machine has"),
    ("memory", "1e99999999Gi", "far more than any machine has"),
    ("disk", "1e400", "far more than any machine has"),
    ("cpu", "1e99999999", "far more than any machine has"),
    ("cpu", "1e99999999m", "far more than any machine has"),
    ("cpu", "1e-99999999", "finer than any resource"),
    ("memory", "-1e99999999", "a negative amount"),
    ("cpu", "-1e400", "a negative amount"),
    ("extra", "1e99999999", "far more than any machine has"),
    ("memory", "5Ei", "more than 4Ei; no machine has that much"),
    ("cpu", "2e6", "more than 1000000 cores"),
    ("cpu", 10**7, "more than 1000000 cores"),
    ("extra", "1e20", "more than 2**62"),
    ("gpu", 1000, "at most 128 devices"),
    ("gpu", "A100:99999999999999999999", "at most 128 devices"),
]


@pytest.mark.parametrize(
    ("field", "value", "why"), HUGE, ids=[f"{f}={v!r}"[:40] for f, v, _ in HUGE]
)
def test_huge_exponents_are_refused_at_once_as_beyond_any_machine(
    field: str, value: object, why: str
) -> None:
    message = refusal(api(field, value))
    assert repr(value) in message
    assert why in message
    if field != "gpu":
        assert FORMS[field] in message


OVERFLOW = ["--cpu 1e400", "--memory 1e400", "--disk 1e400", "--shm 1e400", "--resources x=1e400"]


@pytest.mark.parametrize("text", OVERFLOW, ids=OVERFLOW)
def test_amounts_past_a_float_are_refused_when_parsed_not_at_submission(text: str) -> None:
    # Dask's resources are floats: float(10**400) raised OverflowError when the task was mapped.
    message = refusal(line(text))
    assert "'1e400'" in message
    assert "far more than any machine has" in message


NON_ASCII = [
    ("gpu", "²"),
    ("gpu", "A100:²"),
    ("gpu", "２"),
    ("memory", "２Gi"),
    ("memory", "٣Gi"),
    ("cpu", "２"),
    ("cpu", "½"),
    ("shm", "８Gi"),
    ("extra", "２"),
]


@pytest.mark.parametrize(("field", "value"), NON_ASCII, ids=[f"{f}={v}" for f, v in NON_ASCII])
def test_non_ascii_digits_are_refused_saying_so(field: str, value: str) -> None:
    message = refusal(api(field, value))
    assert repr(value) in message
    assert "is not an ASCII digit; write numbers with 0-9" in message
    assert FORMS[field] in message


def test_full_width_digits_on_the_line_are_refused() -> None:
    assert "not an ASCII digit" in refusal(line("--memory ２Gi"))
    assert "not an ASCII digit" in refusal(line("--gpu ²"))
    assert "digits 0-9" in refusal(line("--retries ２"))


LONG = [
    ("memory", "9" * 5000),
    ("cpu", "1" * 4301),
    ("gpu", "9" * 5000),
    ("gpu", "A100:" + "9" * 5000),
    ("extra", "7" * 5000),
    ("memory", 10**5000),
    ("cpu", 10**5000),
    ("gpu", 10**5000),
    ("cpu", Fraction(1, 10**5000)),
]


@pytest.mark.parametrize(
    ("field", "value"), LONG, ids=[f"{f}-{type(v).__name__}-{i}" for i, (f, v) in enumerate(LONG)]
)
def test_numbers_past_4300_digits_are_refused_not_a_value_error(field: str, value: object) -> None:
    # int() and str() refuse more than 4300 digits with a ValueError of their own.
    message = refusal(api(field, value))
    assert message.startswith(f"{field}=")
    assert "characters)" in message or " bits" in message or "cannot be shown" in message


NEGATIVE = [
    ("memory", "-1Gi"),
    ("disk", "-5G"),
    ("shm", "-8Gi"),
    ("cpu", "-1"),
    ("cpu", "-500m"),
    ("gpu", "-1"),
    ("memory", "-1e400"),
]


@pytest.mark.parametrize(("field", "value"), NEGATIVE, ids=[f"{f}={v}" for f, v in NEGATIVE])
@pytest.mark.parametrize("spelling", ["--{} {}", "--{}={}"], ids=["space", "equals"])
def test_a_negative_value_on_the_line_gets_the_apis_message(
    field: str, value: str, spelling: str
) -> None:
    message = refusal(line(spelling.format(field, value)))
    assert message == refusal(api(field, value))
    assert repr(value) in message
    assert "expected one argument" not in message


CONTRADICTIONS = [
    ("--gpu 2 --resources GPU=1", ["gpu=2", "GPU=1", "'GPU'"]),
    ("--gpu A100:2 --resources gpu=1", ["gpu='A100:2'", "gpu=1"]),
    ("--memory 4Gi --resources MEMORY=1", ["memory='4Gi'", "MEMORY=1"]),
    ("--cpu 8 --resources cpu=1", ["cpu=8", "cpu=1", "'CPU'"]),
    ("--disk 50Gi --resources Disk=1e9", ["disk='50Gi'", "Disk=1000000000"]),
    ("--shm 8Gi --resources SHM=1", ["shm='8Gi'", "SHM=1"]),
    ("small_gpu_task --resources GPU=2", ["gpu=1", "GPU=2"]),
    ("--cpu 2 --cpu 3", ["--cpu is given twice", "'2'", "'3'"]),
    ("--memory=1Gi --memory 2Gi", ["--memory is given twice", "'1Gi'", "'2Gi'"]),
    ("--resources a=1 --resources b=2", ["--resources is given twice", "'a=1'", "'b=2'"]),
    ("--resources GPU=1,gpu=2", ["'GPU' twice", "GPU=1", "gpu=2"]),
    ("--resources x=1,x=2", ["'x' twice", "x=1", "x=2"]),
]


@pytest.mark.parametrize(("text", "words"), CONTRADICTIONS, ids=[t for t, _ in CONTRADICTIONS])
def test_contradictions_on_the_line_are_refused_naming_both(text: str, words: list[str]) -> None:
    message = refusal(line(text))
    for word in words:
        assert word in message


API_CONTRADICTIONS = [
    (dict(gpu=2, extra={"GPU": 1}), ["gpu=2", "GPU=1"]),
    (dict(memory="1Gi", extra={"memory": 1}), ["memory='1Gi'", "memory=1"]),
    (dict(cpu=8, extra={"cpu": 1}), ["cpu=8", "cpu=1"]),
    (dict(extra={"gpu": 1, "GPU": 2}), ["'gpu'", "'GPU'", "differ only in case"]),
]


@pytest.mark.parametrize(
    ("kwargs", "words"), API_CONTRADICTIONS, ids=[repr(k) for k, _ in API_CONTRADICTIONS]
)
def test_contradictions_in_the_api_are_refused_naming_both(kwargs: dict, words: list[str]) -> None:
    message = refusal(lambda: Resources(**kwargs))
    for word in words:
        assert word in message


def test_extra_is_free_where_no_field_asks_for_the_same() -> None:
    assert Resources(extra={"GPU": 2, "MEMORY": 100e9}).extra == {"GPU": 2, "MEMORY": 10**11}
    # A TPU or other device is not requested as GPU, so a GPU beside it asks for more.
    assert Resources(gpu="device:fpga:1", extra={"GPU": 1}).extra == {"GPU": 1}
    assert Resources(cpu=2, memory="8Gi").override(Resources(extra={"process": 1})).extra


def test_the_spec_names_the_dask_resources_the_mapping_uses() -> None:
    assert dict(DASK_NAMES) == {
        "cpu": names.CPU,
        "memory": names.MEMORY,
        "gpu": names.GPU,
        "disk": names.DISK,
        "shm": names.SHM,
    }


UNIT_SLIPS = [
    ("memory", 8, '"8Gi"'),
    ("memory", 8.0, '"8Gi"'),
    ("memory", "8", '"8Gi"'),
    ("disk", 100, '"100Gi"'),
    ("shm", " 64 ", '"64Gi"'),
    ("memory", "1e3", '"1000Gi"'),
    ("memory", (1, "2Gi"), '"1Gi"'),
    ("memory", 1.5, '"1.5Gi"'),
    ("disk", "0.5", '"0.5Gi"'),
]


@pytest.mark.parametrize(
    ("field", "value", "hint"), UNIT_SLIPS, ids=[f"{f}={v!r}" for f, v, _ in UNIT_SLIPS]
)
def test_a_bare_number_under_1mi_is_refused_as_a_unit_slip(
    field: str, value: object, hint: str
) -> None:
    message = refusal(api(field, value))
    assert "a number without a unit counts bytes" in message
    assert f"did you mean {hint}" in message
    assert FORMS[field] in message


def test_a_small_size_with_a_unit_is_refused_too_and_1mi_is_the_least() -> None:
    assert "under 1Mi" in refusal(api("memory", "512Ki"))
    assert Resources(memory=2**20, disk="1Mi", shm=1048576.0).memory.request == 2**20
    assert Resources(memory=100e9).memory.request == 100 * 10**9
    # Sizes of data (the planner's) are not requests: bytes are bytes there.
    assert parse_quantity(8, "size") == 8


def test_numpy_floats_are_read_as_the_floats_they_are() -> None:
    numpy = pytest.importorskip("numpy")
    assert Resources(cpu=numpy.float64(0.5), memory=numpy.float64(70e9)) == Resources(
        cpu=0.5, memory=70e9
    )


def test_latch_custom_task_memory_keeps_meaning_gib() -> None:
    assert latch_custom(cpu=2, memory=8).resolve({}) == Resources(cpu=2, memory="8Gi")
    assert latch_custom(cpu=2, memory=lambda: 1).resolve({}) == Resources(cpu=2, memory="1Gi")


# -- properties ------------------------------------------------------------------------------

PROPERTY = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.large_base_example],
)

NASTY = [
    "", " ", "-", "nan", "inf", "-inf", "1_000", "0x10", "1e", ".", "e9", "0", "-0", "auto", "²",
    "A100:0", "A100:-1", "A100:²", "device:", "device::", "/", ":", "1,2,3", "2,1", "1Gi,", "\x00",
    "-" * 100_000 + "1", "(" * 300, "9**9**9", "A100/" + "x" * 10_000, "1e999999999",
    "1e-999999999", "1" + "0" * 5000, "0." + "0" * 5000 + "1", "1." + "0" * 5000 + "1",
    "0e99999999999", "1e9" * 3,
]  # fmt: skip

units = st.sampled_from(
    ["", "m", "M", "k", "Ki", "Mi", "Gi", "Ei", "E", " GiB", "gb", "Gb", "B", "x", ":2", "/1g.5gb"]
)
mantissas = (
    st.from_regex(r"[0-9]{1,6}(\.[0-9]{0,6})?", fullmatch=True)
    | st.integers(0, 10**60).map(str)
    | st.integers(4290, 4310).map(lambda n: "9" * n)
)
big_exponents = st.sampled_from([31, 400, 4300, 99_999_999, 999_999_999, 10**10, -31, -99_999_999])
exponents = st.one_of(
    st.just(""),
    st.builds("{}{}".format, st.sampled_from("eE"), big_exponents),
    st.builds("{}{}".format, st.sampled_from("eE"), st.integers(-(10**12), 10**12)),
)
numbers_text = st.builds(
    "{}{}{}{}".format, st.sampled_from(["", "-", "+", "--", " -", "−"]), mantissas, exponents, units
)
other_digits = st.builds(
    "{}{}".format,
    st.text(st.characters(categories=["Nd", "No", "Nl"]), min_size=1, max_size=4),
    units,
)
hostile_text = st.text() | numbers_text | other_digits | st.sampled_from(NASTY)
hostile_values = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(0, 20_000).map(lambda n: 10**n)
    | st.floats()
    | st.fractions()
    | st.lists(hostile_text | st.integers(), max_size=3)
    | st.tuples(hostile_text | st.integers(), hostile_text | st.integers())
)
extra_names = st.text(max_size=8) | st.sampled_from(["GPU", "gpu", "CPU", "Memory", "x", "-x"])


def answers(call: Callable[[], object]) -> object:
    """Run one case and return what it made, or None when it raised SpecError.

    Anything else raised fails, as does a request that would not map to Dask's float amounts
    (``float(10**400)`` raises OverflowError at submission).
    """
    try:
        made = call()
    except SpecError:
        made = None
    if isinstance(made, Resources):
        assert all(math.isfinite(amount) for amount in wanted(made).values())
    return made


def has_other_digits(value: object) -> bool:
    return isinstance(value, str) and any(c.isnumeric() and not "0" <= c <= "9" for c in value)


@pytest.mark.parametrize("text", NASTY, ids=[shlex.quote(t)[:24] for t in NASTY])
@pytest.mark.parametrize("field", [*FIELDS, "extra"])
def test_each_field_and_its_option_answer_the_nastiest_text(field: str, text: str) -> None:
    answers(api(field, text))
    option = "resources" if field == "extra" else field
    value = f"x={text}" if field == "extra" else text
    answers(line(f"--{option} {shlex.quote(value)}"))
    answers(line(f"--{option}={shlex.quote(value)}"))


@PROPERTY
@given(st.sampled_from([*FIELDS, "extra"]), hostile_text)
def test_each_field_answers_any_text_with_a_value_or_a_spec_error(field: str, text: str):
    made = answers(api(field, text))
    assert made is None or not has_other_digits(text)


@PROPERTY
@given(st.sampled_from([*FIELDS, "extra"]), hostile_values)
def test_each_field_answers_any_value_with_a_value_or_a_spec_error(field: str, value: object):
    answers(api(field, value))


@PROPERTY
@given(
    st.dictionaries(st.sampled_from(FIELDS), hostile_text | hostile_values, max_size=3),
    st.dictionaries(extra_names, hostile_text | hostile_values, max_size=3) | hostile_values,
)
def test_whole_requests_answer_anything_with_a_value_or_a_spec_error(fields: dict, extra):
    answers(lambda: Resources(**fields, extra=extra))


@PROPERTY
@given(hostile_text | hostile_values, st.sampled_from(["memory", "disk", "size"]))
def test_the_parsers_answer_anything_with_a_value_or_a_spec_error(value: object, field: str):
    answers(lambda: parse_quantity(value, field))
    answers(lambda: parse_cpu(value))  # type: ignore[arg-type]
    answers(lambda: latch_custom(cpu=value, memory=value, storage_gib=value).resolve({}))


options = st.sampled_from(
    ["--cpu", "--memory", "--gpu", "--disk", "--shm", "--resources", "--retries", "--preset",
     "--env", "--name", "--bg", "small_task", "-", "--", "--memroy"]
)  # fmt: skip
words = st.tuples(options, hostile_text, st.sampled_from([" ", "="])).map(
    lambda o: f"{o[0]}{o[2]}{shlex.quote(o[1])}"
)


@PROPERTY
@given(st.lists(words, max_size=4).map(" ".join) | hostile_text)
def test_the_task_line_answers_anything_with_a_request_or_a_spec_error(text: str):
    answers(line(text))
