"""Bad input to the planner's Python API and config (issue 28): a result or taskcell's error.

Every public entry point of ``taskcell``, ``taskcell.spec`` and ``taskcell.planner`` that takes
a user's value, and every ``taskcell.*`` option read through Dask's config, is fed values of
every kind (None, bools, huge, negative and non-finite numbers, numpy scalars, bytes, odd and
non-ASCII text, nested and self-holding containers, objects whose ``__len__``, ``__bool__`` or
``__index__`` raise). Each must give a valid result or a :class:`~taskcell.errors.TaskcellError`
whose message names the value (and, for an option, the option); never a raw ``TypeError``,
``ValueError``, ``RecursionError`` ... from inside.

The inputs that crashed when this was written come first, one test each; the properties follow.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import dask
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import taskcell
from taskcell import config
from taskcell.cluster.embedded_serve import _declined
from taskcell.cluster.mapping import WorkerCapacity
from taskcell.cluster.pools import configured_pools
from taskcell.cluster.provision import Provisioner
from taskcell.errors import SpecError, TaskcellError
from taskcell.planner import describe_profile, get_profile, input_size, suggest
from taskcell.runner.cell_task import _threshold
from taskcell.spec import (
    BUILTIN_PRESETS,
    GPU,
    TPU,
    Device,
    Environment,
    Expression,
    PlatformLimits,
    Resources,
    ResourceTemplate,
    catalogue,
    check_limits,
    format_cpu,
    format_gpu,
    format_quantity,
    get_preset,
    latch_custom,
    parse_cpu,
    parse_gpu,
    parse_quantity,
    parse_retries,
    presets_frame,
)
from taskcell.spec._util import shown


class Hostile:
    """A value whose ``__len__``, ``__sizeof__``, ``__bool__`` and ``__index__`` raise."""

    def _raise(self, *args: object) -> Any:
        raise RuntimeError("hostile")

    __len__ = __sizeof__ = __bool__ = __index__ = __float__ = __iter__ = _raise

    def __repr__(self) -> str:
        return "Hostile()"


class Frame:
    """Looks like a pandas DataFrame to ``input_size``; its ``memory_usage`` says ``usage``."""

    dtypes = ("int64",)

    def __init__(self, usage: object) -> None:
        self.usage = usage

    def memory_usage(self, deep: bool = False) -> object:
        return self.usage

    def __repr__(self) -> str:
        return f"Frame({self.usage!r})"


def holds_itself() -> list[object]:
    out: list[object] = [1]
    out.append(out)
    return out


def refused(call: Callable[[], object], *words: str) -> str:
    """The message of the SpecError ``call`` raises; it must hold each of ``words``."""
    with pytest.raises(SpecError) as info:
        call()
    message = str(info.value)
    for word in words:
        assert word in message, message
    return message


def _preset(value: object) -> Callable[[], object]:
    return lambda: suggest("1Gi", workers=[], presets=value)  # type: ignore[arg-type]


def _worker(value: object) -> Callable[[], object]:
    return lambda: suggest("1Gi", workers=value, presets=BUILTIN_PRESETS)


def _set(key: str, value: object, call: Callable[[], object]) -> Callable[[], object]:
    def run() -> object:
        with dask.config.set({f"taskcell.{key}": value}):
            return call()

    return run


def _profile_need(factor: object) -> Callable[[], object]:
    return _set(
        "profiles",
        {"huge": {"memory-per-byte": factor}},
        lambda: suggest("1Gi", "huge", workers=[], presets=BUILTIN_PRESETS),
    )


_SIZE = "a quantity such as"
_WORKERS = "a distributed Client, a snapshot"
_PRESETS = "presets= must map preset names to Resources"

# -- the inputs that crashed --------------------------------------------------------------------

CRASHED: list[tuple[str, Callable[[], object], tuple[str, ...]]] = [
    # RecursionError
    ("input_size-holds-itself", lambda: input_size(holds_itself()), ("holds itself", _SIZE)),
    (
        "suggest-nested-deep",
        lambda: suggest([[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]),
        ("nested more than", _SIZE),
    ),
    # ValueError: cannot convert float NaN to integer
    ("frame-nan", lambda: input_size(Frame(math.nan)), ("nan", "memory_usage", "zero or more")),
    # a negative size was returned as if it were one
    ("frame-negative", lambda: input_size(Frame(-10)), ("-10", "zero or more")),
    # ValueError: Exceeds the limit (4300 digits) for integer string conversion
    ("size-10**5000", lambda: input_size(10**5000), ("16610 bits", "up to 4 EiB")),
    # TypeError: 'bool' object is not iterable
    ("workers-True", _worker(True), ("workers=", "True", _WORKERS)),
    # AttributeError: 'str' object has no attribute 'resources'
    ("workers-text", _worker(["tcp://a:1"]), ("workers=", "'tcp://a:1'", _WORKERS)),
    # KeyError: 'nthreads'
    ("workers-bad-record", _worker([{"address": "a", "name": "a"}]), ("workers=", "'address'")),
    # TypeError: 'bool' object is not iterable
    ("presets-True", _preset(True), (_PRESETS, "True")),
    # ValueError: dictionary update sequence element #0 has length 1; 2 is required
    ("presets-text", _preset("small_task"), (_PRESETS, "'small_task'")),
    # AttributeError: 'int' object has no attribute 'gpu'
    ("presets-int-values", _preset({"mine": 1}), (_PRESETS, "{'mine': 1}")),
    # ValueError: The truth value of an array with more than one element is ambiguous
    (
        "without-array",
        lambda: Resources(cpu=1).without(np.array(["cpu", "gpu"])),  # type: ignore[arg-type]
        ("without() takes field names", "array(['cpu', 'gpu']"),
    ),
    ("without-unknown", lambda: Resources(cpu=1).without("cpus"), ("'cpus'", "memory")),
    # OverflowError: int too large to convert to float (10**400 itself is refused: READERS)
    ("profile-factor-1e300", _profile_need(1e300), ()),
    # ValueError: Exceeds the limit (4300 digits) for integer string conversion
    (
        "n-workers-5000-digits",
        _set(
            "embedded-cluster.n-workers",
            "9" * 5000,
            lambda: config.count("embedded-cluster.n-workers"),
        ),
        ("taskcell.embedded-cluster.n-workers", "(5002 characters)", "from 1 to 10000"),
    ),
    (
        "tls-5000-digits",
        _set("embedded-cluster.tls", 10**5000, lambda: config.flag("embedded-cluster.tls")),
        ("taskcell.embedded-cluster.tls", "16610 bits", "true or false"),
    ),
    # TypeError: 'NoneType' object is not a mapping
    (
        "evaluate-None",
        lambda: Expression("len(x)").evaluate(None),  # type: ignore[arg-type]
        ("evaluate() takes arguments as a mapping", "None"),
    ),
]


@pytest.mark.parametrize(("call", "words"), [c[1:] for c in CRASHED], ids=[c[0] for c in CRASHED])
def test_an_input_that_crashed_is_refused_by_name(call: Callable[[], object], words: tuple[str]):
    if not words:  # a valid result: the need is shown, however large
        suggestion = call()
        assert "over 1.8e+308 B" in suggestion.message  # type: ignore[attr-defined]
        return
    refused(call, *words)


def test_a_bad_platform_is_refused_before_suggesting():
    with dask.config.set({"taskcell.platform": "latchh"}):
        refused(
            lambda: suggest("1Gi", workers=[], presets=BUILTIN_PRESETS),
            "taskcell.platform",
            "'latchh'",
            "latch or null",
        )


def test_good_workers_and_presets_still_plan():
    box = WorkerCapacity(address="tcp://a:1", name="a", nthreads=64, memory_limit=2**40)
    record = {"address": "tcp://a:1", "name": "a", "nthreads": 64, "resources": []}
    record["memory_limit"] = 2**40
    for workers in ([box], (box,), iter([box]), {"a": box}.values(), [record], {"workers": [box]}):
        assert suggest("1Gi", workers=workers, presets=BUILTIN_PRESETS).able == ["tcp://a:1"]
    assert suggest("1Gi", workers=[], presets=dict(BUILTIN_PRESETS)).fits
    assert input_size([np.zeros(4), Frame(np.int64(8)), [Frame(2.0)]]) == 42
    # A numpy scalar is a count of bytes (as memory_usage().sum() gives it), not its 8 bytes.
    assert input_size(np.int64(2**30)) == input_size(np.float32(2**30)) == 2**30


# Crashes in the profiles' and pools' own readers, and options read without config's accessors.
READERS = [
    (
        "profiles-array",
        _set("profiles", np.array([1, 2]), lambda: get_profile("default")),
        ("taskcell.profiles must be a mapping", "array([1, 2])"),
    ),
    (
        "profiles-hostile",
        _set("profiles", Hostile(), lambda: get_profile("default")),
        ("taskcell.profiles must be a mapping", "Hostile()"),
    ),
    (
        "profile-description-array",
        _set("profiles", {"x": {"description": np.array([1, 2])}}, lambda: describe_profile("x")),
        ("taskcell.profiles.x", "description must be text", "array([1, 2])"),
    ),
    (
        "profile-factor-10**400",
        _set("profiles", {"x": {"memory-per-byte": 10**400}}, lambda: describe_profile("x")),
        ("taskcell.profiles.x", "memory-per-byte must be a finite number", "1329 bits"),
    ),
    (
        "profile-name-5000-digits",
        _set("profiles", {10**5000: {}}, lambda: get_profile("default")),
        ("taskcell.profiles", "name must be text", "16610 bits"),
    ),
    (
        "profile-5000-digits",
        lambda: get_profile(10**5000),  # type: ignore[arg-type]
        ("profile=", "16610 bits", "not a known profile"),
    ),
    (
        "pool-idle-timeout-list",
        _set("pools", {"p": {"shape": "small_task", "idle-timeout": []}}, configured_pools),
        ("taskcell.pools.p.idle-timeout", "must be a duration", "10s", "got []"),
    ),
    (
        "pool-start-timeout-10**400",
        _set("pools", {"p": {"shape": "small_task", "start-timeout": 10**400}}, configured_pools),
        ("taskcell.pools.p.start-timeout", "must be a duration", "1329 bits"),
    ),
    (
        "pool-start-timeout-1e400s",
        _set("pools", {"p": {"shape": "small_task", "start-timeout": "1e400s"}}, configured_pools),
        ("taskcell.pools.p.start-timeout", "must be a duration", "'1e400s'"),
    ),
    (
        "pool-backend-array",
        _set(
            "pools", {"p": {"shape": "small_task", "backend": np.array([1, 2])}}, configured_pools
        ),
        ("taskcell.pools.p.backend must be one of local", "array([1, 2])"),
    ),
    (
        "pool-options-array",
        _set(
            "pools", {"p": {"shape": "small_task", "options": np.array([1, 2])}}, configured_pools
        ),
        ("taskcell.pools.p.options must be a mapping", "array([1, 2])"),
    ),
    (
        "pools-5000-digits",
        _set("pools", 10**5000, configured_pools),
        ("taskcell.pools must be a mapping", "16610 bits"),
    ),
    (
        "provisioning-idle-timeout-list",
        _set(
            "provisioning.idle-timeout",
            [],
            _set("pools", {"p": {"shape": "small_task"}}, configured_pools),
        ),
        ("taskcell.provisioning.idle-timeout must be a duration", "got []"),
    ),
    (
        "provisioning-interval-list",
        _set("provisioning.interval", [], lambda: Provisioner("tcp://127.0.0.1:1", None)),
        ("taskcell.provisioning.interval must be a positive duration", "got []"),
    ),
]


@pytest.mark.parametrize(("call", "words"), [r[1:] for r in READERS], ids=[r[0] for r in READERS])
def test_a_bad_profile_pool_or_option_is_refused_by_its_reader(call, words):
    refused(call, *words)


def test_a_profile_or_pool_that_reads_well_still_does():
    pool = _set("pools", {"p": {"shape": "small_task", "idle-timeout": 0}}, configured_pools)()
    assert pool[0].idle_timeout == 0  # type: ignore[index]
    with dask.config.set({"taskcell.profiles": {2024: {"description": "by year"}}}):
        assert describe_profile("2024") == "by year"
    with dask.config.set({"taskcell.profiles": None}):
        assert get_profile("default").name == "default"


@pytest.mark.parametrize(
    ("value", "declined"),
    [
        ("false", "is off"),
        ("no", "is off"),
        (False, "is off"),
        ("true", None),
        (True, None),
        ("maybe", "taskcell.embedded-cluster.start-early must be true or false, got 'maybe'"),
    ],
)
def test_start_early_is_read_as_a_flag(value, declined):
    with dask.config.set(
        {"taskcell.embedded-cluster.start-early": value, "scheduler-address": None}
    ):
        said = _declined()
    assert said is None if declined is None else declined in str(said)


def test_a_bad_start_early_starts_nothing_and_says_why(monkeypatch):
    from taskcell.cluster import connect
    from taskcell.kernel_magics import _EarlyStart

    monkeypatch.setattr(connect, "on_wait", connect.on_wait)
    monkeypatch.setattr(connect, "start_early", lambda cluster: pytest.fail("started"))
    early = _EarlyStart(shell=None, magics=None)
    with dask.config.set({"taskcell.embedded-cluster.start-early": "maybe"}):
        with pytest.warns(UserWarning, match="taskcell: taskcell.embedded-cluster.start-early"):
            assert early._start() is None
        with dask.config.set({"taskcell.embedded-cluster.start-early": "false"}):
            assert early._start() is None  # "false" is off, not a true string


# -- properties ---------------------------------------------------------------------------------

FUZZ = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

ODD_TEXT = [
    "",
    " ",
    "\x00",
    "nan",
    "inf",
    "-inf",
    "-1",
    "0",
    "-0",
    "5 parsecs",
    "1e400Gi",
    "1e400",
    "1e99999999",
    "A100:-2",
    "A100:0",
    "A100:1.5",
    "A100:",
    ":2",
    "mig-9g.99gb",
    "A100:mig-9g.99gb",
    "H100:1g.10gb",
    "H100:1:mig-9g.99gb",
    "２Gi",
    "½",
    "💥",
    "Gi",
    "1Gi,2Gi",
    "(1, 2)",
    "0x10",
    "1_000",
    "∞",
    "9" * 5000,
    "small_taskk",
    "latchh",
    "yes please",
]
#: Made when drawn: hypothesis shows its choices, and ``repr()`` refuses an int of 4300 digits.
HUGE = [(1, 10, 400), (-1, 10, 400), (1, 10, 5000), (-1, 10, 5000), (1, 2, 64), (-1, 2, 63)]
NUMPY = [
    np.int64(-1),
    np.int8(3),
    np.uint64(2**64 - 1),
    np.float64("nan"),
    np.float32(1.5),
    np.float64("inf"),
    np.bool_(True),
    np.array(5),
    np.array([1, 2]),
    np.array([], dtype=float),
]
OTHERS = [
    Fraction(-1, 3),
    Fraction(1, 10**50),
    Decimal("NaN"),
    Decimal("sNaN"),
    Decimal("1e400"),
    1j,
    object(),
    Hostile(),
    Frame(math.nan),
    Frame("lots"),
    Frame(Decimal("sNaN")),
    Frame(Fraction(10**400)),
    Frame(np.float32("inf")),
    holds_itself(),
    Resources(cpu=1),
    GPU("A100", 2),
    int,
    print,
    Ellipsis,
    range(3),
    slice(1),
]

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(HUGE).map(lambda h: h[0] * h[1] ** h[2])
    | st.text(st.characters(blacklist_characters="/~\\*?[", codec="utf-8"), max_size=12)
    | st.sampled_from(ODD_TEXT)
    | st.binary(max_size=6)
    | st.sampled_from(NUMPY)
    | st.sampled_from(OTHERS)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=6) | st.integers(), inner, max_size=2)
    ),
    max_leaves=4,
)


def outcome(call: Callable[[], object]) -> TaskcellError | None:
    """None for a result, the TaskcellError for a refusal; any other exception fails the test."""
    try:
        call()
    except TaskcellError as e:
        assert str(e).strip(), f"{type(e).__name__} with no message"
        return e
    return None


def names_it(message: str, value: object) -> bool:
    """Whether ``message`` names ``value``: as :func:`shown` writes it, or a part of it."""
    if isinstance(value, str | bytes | int | float) and not isinstance(value, bool):
        text = shown(value)
        return text[:20] in message or str(value)[:20] in message or "bits" in message
    return True  # a container or object: the message names the part that is wrong


def _field(field: str) -> Callable[[Any], object]:
    return lambda v: Resources(**{field: v})


API: dict[str, Callable[[Any], object]] = {
    **{f"Resources({f}=)": _field(f) for f in ("cpu", "memory", "gpu", "disk", "shm")},
    "Resources(extra=)": lambda v: Resources(extra=v),
    "Resources(extra={x: v})": lambda v: Resources(extra={"x": v}),
    "Resources.from_dict": lambda v: Resources.from_dict(v),
    "Resources.from_dict({cpu: v})": lambda v: Resources.from_dict({"cpu": v}),
    "Resources.override": lambda v: Resources(cpu=1).override(v),
    "Resources.without": lambda v: Resources(cpu=1).without(v),
    "GPU(v)": lambda v: GPU(v),
    "GPU(A100, v)": lambda v: GPU("A100", v),
    "GPU(A100, 1, v)": lambda v: GPU("A100", 1, v),
    "TPU(v)": lambda v: TPU(v),
    "TPU(v5e, v)": lambda v: TPU("v5e", v),
    "Device(v)": lambda v: Device(v),
    "Device(quantity=)": lambda v: Device(v, "GPU", "x"),
    "Device(device=)": lambda v: Device(1, "GPU", v),
    "ResourceTemplate(memory=)": lambda v: ResourceTemplate(memory=v),
    "parse_cpu": parse_cpu,
    "parse_quantity": lambda v: parse_quantity(v, "memory"),
    "parse_gpu": parse_gpu,
    "parse_retries": parse_retries,
    "format_quantity": format_quantity,
    "format_cpu": format_cpu,
    "format_gpu": format_gpu,
    "get_preset": get_preset,
    "get_preset(catalogue=)": lambda v: get_preset("small_task", v),
    "catalogue": catalogue,
    "catalogue({mine: v})": lambda v: catalogue({"mine": v}),
    "presets_frame": presets_frame,
    "check_limits(profile=)": lambda v: check_limits(Resources(cpu=1), v),
    "check_limits(resources=)": lambda v: check_limits(v, "latch"),
    "PlatformLimits": lambda v: PlatformLimits("x", v, v, v),
    "latch_custom": lambda v: latch_custom(v, v, v),
    "Environment(name=)": lambda v: Environment(v),
    "Environment(resources=)": lambda v: Environment("e", v),
    "Environment.override": lambda v: Environment("e", Resources(cpu=1)).override(memory=v),
    "Expression": lambda v: Expression(v),
    "Expression.evaluate": lambda v: Expression("1").evaluate(v),
    "suggest(size=)": lambda v: suggest(v, workers=[], presets=BUILTIN_PRESETS),
    "suggest(profile=)": lambda v: suggest("1Gi", v, workers=[], presets=BUILTIN_PRESETS),
    "suggest(workers=)": lambda v: suggest("1Gi", workers=v, presets=BUILTIN_PRESETS),
    "suggest(presets=)": lambda v: suggest("1Gi", workers=[], presets=v),
    "input_size": input_size,
    "get_profile": get_profile,
    "describe_profile": describe_profile,
}


@pytest.fixture
def empty_folder(tmp_path, monkeypatch):
    """Sizes given as text are globbed: here they match nothing."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))


@pytest.mark.parametrize("entry", API, ids=list(API))
@FUZZ
@given(value=values)
def test_any_value_to_the_api_is_a_result_or_taskcells_error(empty_folder, entry, value):
    error = outcome(lambda: API[entry](value))
    if error is not None:
        assert names_it(str(error), value), f"{entry}({shown(value)}): {error}"


#: Each option, the call that reads it, and words of what it accepts.
OPTIONS: dict[str, tuple[Callable[[], object], str]] = {
    "presets": (lambda: taskcell.presets(), "must be"),
    "platform": (config.platform, "must be one of latch or null"),
    "result-threshold": (_threshold, "a positive quantity such as"),
    "scheduler-timeout": (lambda: config.seconds("scheduler-timeout"), "a positive duration"),
    "interrupt-grace": (lambda: config.seconds("interrupt-grace"), "a positive duration"),
    "provisioning.interval": (
        lambda: config.seconds("provisioning.interval"),
        "a positive duration",
    ),
    "enforce-memory": (lambda: config.flag("enforce-memory"), "must be true or false"),
    "embedded-cluster.start-early": (
        lambda: config.flag("embedded-cluster.start-early"),
        "must be true or false",
    ),
    "embedded-cluster.tls": (lambda: config.flag("embedded-cluster.tls"), "must be true or false"),
    "embedded-cluster.n-workers": (
        lambda: config.count("embedded-cluster.n-workers"),
        "a whole number from 1 to 10000",
    ),
    "embedded-cluster.threads-per-worker": (
        lambda: config.count("embedded-cluster.threads-per-worker"),
        "a whole number from 1 to 10000",
    ),
    "pools": (configured_pools, "taskcell.pools"),
}


@pytest.mark.parametrize("key", OPTIONS, ids=list(OPTIONS))
@FUZZ
@given(value=values)
def test_any_value_of_an_option_is_used_or_refused_naming_the_option(key, value):
    read, accepted = OPTIONS[key]
    error = outcome(_set(key, value, read))
    if error is None:
        return
    message = str(error)
    assert f"taskcell.{key}" in message, message
    if not isinstance(value, list | tuple | dict):  # an entry of a table names its own part
        assert accepted in message, message
        assert names_it(message, value), message


def _huge(value: object) -> bool:
    return isinstance(value, int) and abs(value) > 2**70


@FUZZ
@given(
    entry=st.dictionaries(
        st.sampled_from(["memory-per-byte", "scratch-per-byte", "base-memory", "min-memory"]),
        scalars.filter(lambda v: not isinstance(v, Hostile | np.ndarray) and not _huge(v)),
        max_size=2,
    )
)
def test_any_profile_plans_or_is_refused_naming_it(entry):
    error = outcome(
        _set("profiles", {"mine": entry}, lambda: suggest("1Gi", "mine", workers=[], presets={}))
    )
    if error is not None:
        assert "taskcell.profiles.mine" in str(error), str(error)


@FUZZ
@given(field=st.sampled_from(["cpu", "memory", "gpu", "disk", "shm"]), value=values)
def test_a_bad_configured_preset_changes_nothing(field, value):
    before = config.presets()
    error = outcome(_set("presets", {"mine": {field: value}}, config.presets))
    if error is not None:
        assert "taskcell.presets" in str(error) and "'mine'" in str(error), str(error)
    assert config.presets() == before
