"""Every public entry point of the resource language answers any input with a value or a
SpecError naming the bad value (issue 21), and a value it accepts it also reads back.

The findings first, one test each, then hypothesis properties (derandomized) for the ``%%task``
line's values, the device helpers, ranges, limits, presets (from Python and from
``pyproject.toml``) and retries.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskcell.errors import SpecError
from taskcell.runner.task_line import build_request, parse_task_line
from taskcell.spec import (
    AMD_GPU,
    APPLE_SILICON,
    BUILTIN_PRESETS,
    DEVICE_CLASSES,
    GPU,
    HABANA_GAUDI,
    LATCH,
    MAX_RETRIES,
    TPU,
    Device,
    Neuron,
    Range,
    Resources,
    catalogue,
    check_limits,
    format_cpu,
    format_gpu,
    format_quantity,
    get_preset,
    load_user_presets,
    parse_retries,
    presets_frame,
)
from taskcell.spec.resources import parse_resource_pairs

from .test_hostile import PROPERTY, answers, api, hostile_text, hostile_values, refusal


def line(text: str) -> Callable[[], Resources]:
    return lambda: build_request(parse_task_line(text), lambda: BUILTIN_PRESETS, {}, {})


DASHES = [
    ("--cpu --", "cpu= must be"),
    ("--memory --", "memory= must be"),
    ("--gpu --", "gpu= accelerator '--'"),
    ("--disk --", "disk= must be"),
    ("--shm --", "shm= must be"),
    ("--cpu=--", "cpu= must be"),
    ("--env -- x", "--env '--' is not a defined environment"),
    ("--resources --", "--resources: expected NAME=NUMBER pairs"),
    ("--retries --", "--retries must be 0 or more"),
    ("--preset --", "preset= '--' is not a known preset"),
]


@pytest.mark.parametrize(("text", "words"), DASHES, ids=[t for t, _ in DASHES])
def test_a_value_of_two_dashes_is_refused_naming_it(text: str, words: str) -> None:
    # argparse before Python 3.12 turned the value "--" into [], and the parser crashed on it.
    message = refusal(line(text))
    assert words in message
    assert "'--'" in message


def test_a_name_of_two_dashes_is_a_name() -> None:
    assert parse_task_line("--name --").name == "--"
    assert parse_task_line("--cpu -- --memory 1Gi").fields == {"cpu": "--", "memory": "1Gi"}


TINY = [1e-300, 5e-324, 9.99e-32, -1e-300]


@pytest.mark.parametrize("amount", TINY, ids=repr)
def test_an_amount_finer_than_its_text_is_refused_as_a_number_too(amount: float) -> None:
    message = refusal(lambda: Resources(extra={"process": amount}))
    assert repr(amount) in message
    assert "finer than any resource" in message or "negative" in message
    assert Resources(extra={"process": 1e-31}).to_options() == "--resources process=1e-31"


PYPROJECTS = [
    ("tool = 1", "tool in {file} must be a table ([tool]), got 1"),
    ('tool = "x"', "tool in {file} must be a table ([tool]), got 'x'"),
    ("[tool]\ntaskcell = [1, 2]", "tool.taskcell in {file} must be a table ([tool.taskcell])"),
    ("[tool]\ntaskcell = 3", "tool.taskcell in {file} must be a table ([tool.taskcell]), got 3"),
    (
        "[tool.taskcell]\npresets = true",
        "tool.taskcell.presets in {file} must be a table ([tool.taskcell.presets]), got True",
    ),
    (
        "[tool.taskcell.presets]\nbig = 4",
        "preset 'big' in {file} [tool.taskcell.presets] must be a table of resource fields",
    ),
    (
        '[tool.taskcell.presets]\nbig = { memory = "lots" }',
        "preset 'big' in {file} [tool.taskcell.presets]: memory= must be",
    ),
]


@pytest.mark.parametrize(("body", "expected"), PYPROJECTS, ids=[b for b, _ in PYPROJECTS])
def test_a_pyproject_of_another_shape_names_the_file_and_the_field(
    tmp_path: Path, body: str, expected: str
) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(body + "\n")
    assert expected.format(file=path) in refusal(lambda: load_user_presets(tmp_path))


def test_a_pyproject_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_bytes(b"\xff\xfe")
    assert str(path) in refusal(lambda: load_user_presets(tmp_path))


RETRIES = [-1, 10**9, "x", True, 2.0, None, "", " ", "1e2", "٣", MAX_RETRIES + 1, 10**5000]


@pytest.mark.parametrize("value", RETRIES, ids=[str(i) for i in range(len(RETRIES))])
def test_retries_outside_0_to_100_are_refused_naming_the_value(value: object) -> None:
    message = refusal(lambda: parse_retries(value, "custom_task() retries="))
    assert message.startswith("custom_task() retries= must be 0 or more, at most 100")


def test_retries_in_range_are_read() -> None:
    assert [parse_retries(v) for v in (0, "0", " 7 ", 100, "100")] == [0, 0, 7, 100, 100]


OTHERS = [
    (lambda: get_preset(["small_task"]), "preset= ['small_task'] is not a known preset"),
    (lambda: get_preset("small_task", {"small_task": 1}), "catalogue= must map preset names"),
    (lambda: presets_frame([1]), "catalogue= must map preset names"),
    (lambda: catalogue("x"), "configuration must be a mapping of preset names"),
    (lambda: catalogue(["x"], origin="taskcell.presets in f.yaml"), "taskcell.presets in f.yaml"),
    (lambda: check_limits(Resources(cpu=1), 3), "profile= 3 is not a known platform"),
    (lambda: check_limits({"cpu": 1}, LATCH), "check_limits() takes a Resources"),
    (lambda: Range("1", 2), "a range's request and limit are ints or Fractions, got '1'"),
    (lambda: format_cpu("2"), "format_cpu() takes a positive whole number of millicores"),
    (lambda: format_cpu(10**7), "format_cpu() takes a positive whole number of millicores"),
    (lambda: format_quantity(10**5000), "an int of 16610 bits"),
    (lambda: format_gpu(10**5000), "format_gpu() takes a GPU, TPU or Device, got an int"),
    (lambda: parse_resource_pairs(5), "expected NAME=NUMBER pairs"),
]


@pytest.mark.parametrize(("call", "words"), OTHERS, ids=[w[:40] for _, w in OTHERS])
def test_other_entry_points_refuse_other_types_by_name(call, words: str) -> None:
    assert words in refusal(call)


# -- properties ------------------------------------------------------------------------------

dashes = st.sampled_from(["--", "-", "---", "--x", "-- ", "=--", "--=", "--cpu"])
fields = st.sampled_from(["cpu", "memory", "gpu", "disk", "shm", "resources", "env", "name"])
options_line = st.lists(
    st.tuples(fields, dashes | hostile_text, st.sampled_from([" ", "="])).map(
        lambda o: f"--{o[0]}{o[2]}{json.dumps(o[1])}"
    ),
    max_size=3,
).map(" ".join)


@PROPERTY
@given(options_line)
def test_the_line_answers_dashes_anywhere_with_a_request_or_a_spec_error(text: str):
    answers(line(text))


def reads_back(made: object) -> None:
    """An accepted request reads back the same through every spelling it has."""
    if isinstance(made, Resources):
        assert line(made.to_options())() == made
        assert Resources.from_dict(json.loads(json.dumps(made.to_dict()))) == made


@PROPERTY
@given(
    st.sampled_from(["cpu", "memory", "gpu", "disk", "shm", "extra"]),
    hostile_values | hostile_text,
)
def test_whatever_a_field_accepts_reads_back_the_same(field: str, value: object):
    reads_back(answers(api(field, value)))


devices = st.sampled_from(["A100", "a100 80gb", "H100", "V5P", "Trn1", "MI300X", "Gaudi1", "x"])
device_args = hostile_values | hostile_text | devices | st.sampled_from(DEVICE_CLASSES)
partitions = st.none() | st.sampled_from(["1g.5gb", "2x2x1", "7g.80gb", "big"]) | hostile_text


@PROPERTY
@given(device_args, device_args, partitions, device_args)
def test_the_device_helpers_answer_anything_and_what_they_make_reads_back(a, b, c, d):
    for make in (
        lambda: GPU(a, b, c),
        lambda: TPU(a, c),
        lambda: Device(a, b, d, c),
        lambda: Neuron(a),
        lambda: AMD_GPU(a),
        lambda: HABANA_GAUDI(a),
    ):
        try:
            accelerator = make()
        except SpecError:
            continue
        format_gpu(accelerator)
        reads_back(answers(lambda acc=accelerator: Resources(gpu=acc)))
    reads_back(Resources(gpu=APPLE_SILICON()))


@PROPERTY
@given(hostile_values | hostile_text, hostile_values | hostile_text)
def test_ranges_limits_and_lookups_answer_anything(a, b):
    answers(lambda: Range(a, b))
    answers(lambda: check_limits(Resources(cpu=1), a))
    answers(lambda: get_preset(a))
    answers(lambda: get_preset("small_task", a))
    answers(lambda: catalogue(a))
    answers(lambda: catalogue({"mine": a}))
    answers(lambda: parse_resource_pairs(a))
    answers(lambda: parse_retries(a))
    for spell in (format_cpu, format_quantity, format_gpu):
        answers(lambda spell=spell: spell(a))


def toml(value: object) -> str:
    """``value`` as a TOML value (inline tables for mappings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)  # TOML reads inf, -inf and nan as Python writes them
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(map(toml, value)) + "]"
    assert isinstance(value, dict)
    return "{" + ", ".join(f"{json.dumps(k)} = {toml(v)}" for k, v in value.items()) + "}"


scalars = (
    st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats()
    | st.text(max_size=10)
    | st.sampled_from(["4Gi", "A100:1", "auto", "500m", "--"])
)
tables = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["cpu", "memory", "gpu", "disk", "shm", "extra", "x", "big", "mine"]),
            inner,
            max_size=3,
        )
    ),
    max_leaves=8,
)
documents = (
    st.builds(lambda t: f"tool = {toml(t)}", tables)
    | st.builds(lambda t: f"[tool]\ntaskcell = {toml(t)}", tables)
    | st.builds(lambda t: f"[tool.taskcell]\npresets = {toml(t)}", tables)
    | st.builds(
        lambda name, t: f"[tool.taskcell.presets]\n{json.dumps(name)} = {toml(t)}",
        st.text(max_size=8),
        tables,
    )
)


@PROPERTY
@given(documents)
def test_presets_from_any_pyproject_are_read_or_refused_naming_the_file(document: str):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "pyproject.toml"
        path.write_text(document + "\n")
        try:
            presets = load_user_presets(Path(folder))
        except SpecError as error:
            assert str(path) in str(error)
            return
        for request in presets.values():
            reads_back(request)
