"""The functions exported modules carry as source agree with taskcell's own parsers."""

from __future__ import annotations

import builtins
import collections
import math
import pickle

import cloudpickle
import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskcell.export.carriers import local_dask
from taskcell.export.standalone import (
    capture,
    cores,
    gib,
    on_this_machine,
    portable,
    rebound,
    shell,
    show,
    source,
)
from taskcell.spec import parse_cpu, parse_quantity

SIZES = [
    "8Gi",
    "500M",
    "64 GiB",
    "2GB",
    "100e9",
    8e9,
    "1.5Gi",
    "1Ti",
    "1k",
    "1Ki",
    "1Mi",
    2**30 + 1,
]


@pytest.mark.parametrize("size", SIZES, ids=[repr(s) for s in SIZES])
def test_gib_rounds_up_as_taskcell_reads_the_size(size):
    assert gib(size) == math.ceil(parse_quantity(size, "memory") / 2**30)


@given(
    st.integers(1, 10**6),
    st.sampled_from(["", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti", " GiB", "GB", " MB"]),
)
def test_gib_agrees_with_parse_quantity(number, unit):
    text = f"{number}{unit}"
    try:
        expected = math.ceil(parse_quantity(text, "memory") / 2**30)
    except ValueError:  # under taskcell's 1Mi floor: not a size a request can hold
        return
    assert gib(text) == expected


@pytest.mark.parametrize("cpu", [2, 0.5, "1.5", "500m", "2500m", 1.25, "3"])
def test_cores_rounds_up_as_taskcell_reads_the_cpu(cpu):
    assert cores(cpu) == math.ceil(parse_cpu(cpu, "cpu"))


@pytest.mark.parametrize("bad", ["lots", "2Gb", "Gi", ""])
def test_gib_names_what_it_refuses(bad):
    with pytest.raises(ValueError, match=f"got {bad!r}"):
        gib(bad)


def test_cores_names_what_it_refuses():
    with pytest.raises(ValueError, match="got 'many'"):
        cores("many")


Point = collections.namedtuple("Point", "x y")


@pytest.mark.parametrize("value", [(1, "a"), (), Point(1, 2), [1], {"a": 1}, 3])
def test_portable_values_unpickle_as_themselves(value):
    carried = pickle.loads(pickle.dumps(portable(value)))
    assert carried == value and type(carried) is type(value)
    assert not isinstance(portable(value), tuple)


def test_sources_run_alone_under_their_new_names(tmp_path):
    namespace = {"__builtins__": builtins}
    for function in (cores, gib, portable, on_this_machine, show, local_dask):
        exec(source(function, f"my_{function.__name__}"), namespace)
    assert namespace["my_gib"]("3Gi") == 3
    assert namespace["my_cores"]("250m") == 1
    (tmp_path / "f.txt").write_text("x")
    assert namespace["my_on_this_machine"](str(tmp_path / "f.txt"), lambda a, b: (a, b)) == (
        str(tmp_path / "f.txt"),
        str(tmp_path / "f.txt"),
    )


# -- what a module carries of the notebook's meaning ---------------------------------------


def test_show_writes_a_value_as_ipython_does(capsys):
    from IPython.core.formatters import PlainTextFormatter

    value = {"key": list(range(40))}  # long enough for IPython to break it over lines
    show(value)
    show(None)
    assert capsys.readouterr().out == PlainTextFormatter()(value) + "\n"


def test_shell_expands_names_all_or_none_as_ipython_does(capsys):
    name = "world"  # noqa: F841 - read by the command
    shell("echo hello {name}")
    shell("echo $NOT_A_NAME {name}")  # one name missing: the command runs as typed
    lines = shell("printf 'a\\nb\\n'", lines=True)
    assert capsys.readouterr().out == "hello world\n{name}\n"
    assert lines == ["a", "b"] and lines.n == "a\nb"  # IPython's SList


def test_capture_keeps_what_it_caught_readable_after_pickling():
    from IPython.display import display

    from taskcell.export.standalone import ipython

    ipython()
    with capture() as caught:
        print("inside")
        display(3)
    again = pickle.loads(cloudpickle.dumps(caught))  # as every target carries it
    assert again.stdout == "inside\n" and len(again.outputs) == 1


@pytest.mark.parametrize("value", [None, (1, 2), ("a",)], ids=["none", "pair", "one"])
def test_portable_hands_flyte_what_it_refuses_or_splits(value):
    carried = portable(value)
    assert carried is not None and not isinstance(carried, tuple)
    assert pickle.loads(pickle.dumps(carried)) == value


def test_rebound_reads_names_as_they_are_now():
    def defining_task(rate):
        def apply(x, *, times=1):
            return x * rate * times

        return apply

    apply = rebound(defining_task(0.1), rate=0.2)
    assert apply(10, times=2) == 4.0 and apply.__name__ == "apply"
    assert rebound(len, rate=1) is len  # no closure to bind
