"""The process-wide state a standalone module carries: the registry's, shipped as source."""

from __future__ import annotations

import pickle
import random
import subprocess
import sys

import pytest

from taskcell.errors import ExportError
from taskcell.export.carriers import carriers_source
from taskcell.runner import process_state


def shipped(modules=(), target="flyte") -> dict:
    namespace: dict = {}
    exec(carriers_source("capture", "apply", modules, target), namespace)
    return namespace


def test_every_registered_carrier_that_needs_no_taskcell_is_shipped():
    names = [name for name, *_ in shipped()["_CARRIERS"]]
    expected = [c.name for c in process_state.registered() if c.name != "inline figures"]
    assert names == expected  # inline figures draws through taskcell: its module is not imported


def test_shipped_carriers_take_a_seeded_generator_and_options_to_another_process():
    import numpy as np
    import pandas as pd

    ship = shipped(["numpy", "pandas"])
    random.seed(3)
    np.random.seed(4)
    with pd.option_context("display.precision", 2):
        state = pickle.dumps(ship["capture"]())
    code = (
        "import pickle, random, sys, numpy as np, pandas as pd\n"
        f"exec({carriers_source('capture', 'apply', ['numpy'], 'flyte')!r})\n"
        "apply(pickle.loads(sys.stdin.buffer.read()))\n"
        "print(random.random(), np.random.rand(), pd.get_option('display.precision'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], input=state, capture_output=True, timeout=60, check=True
    )
    assert done.stdout.decode().split() == [str(random.random()), str(np.random.rand()), "2"]


_counter = [0]


def _count_get() -> int:
    return _counter[0]


def _count_set(value: int) -> None:
    _counter[0] = value


@pytest.fixture
def registered():
    """``registered(name, module, get, set)``, undone after the test."""
    added = []

    def register(name, *args):
        added.append(name)
        process_state.register(name, *args)

    yield register
    for name in added:
        process_state._CARRIERS.pop(name)


def test_a_carrier_a_user_registers_is_shipped_too(registered):
    registered("json defaults", "json", _count_get, _count_set)
    ship = shipped()
    assert "json defaults" in [name for name, *_ in ship["_CARRIERS"]]
    ship["apply"]({"json defaults": 7})  # by reference: this test module is importable
    assert ship["capture"]()["json defaults"] == _counter[0] == 7


def test_a_library_function_is_shipped_as_a_reference(registered):
    registered("numpy errors", "numpy", __import__("numpy").geterr, _count_set)
    assert "import_module('numpy')" in carriers_source("c", "a", ["numpy"], "flyte")


def test_a_carrier_that_cannot_travel_is_refused_by_name_where_the_notebook_imports_it(registered):
    lock = __import__("threading").Lock()
    registered("locked", "threading", (lambda: lambda: lock)(), print)
    assert "locked" not in [name for name, *_ in shipped(["numpy"])["_CARRIERS"]]
    with pytest.raises(ExportError, match=r"'locked' .* cannot travel in a latch module"):
        carriers_source("c", "a", ["threading"], "latch")
