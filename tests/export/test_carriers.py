"""The process-wide state a standalone module carries, and its changes in place: taskcell's own
(the registry's carriers, :mod:`taskcell.runner.inplace`), shipped as source."""

from __future__ import annotations

import array
import ast
import copy
import inspect
import pickle
import random
import subprocess
import sys

import pytest

from taskcell.errors import ExportError
from taskcell.export.carriers import carriers_source, inplace_source
from taskcell.runner import inplace, process_state


def shipped(modules=(), target="flyte") -> dict:
    namespace: dict = {}
    exec(carriers_source("capture", "apply", modules, target), namespace)
    return namespace


def shipped_code(source: str) -> str:
    """The code a module's source ships in a namespace of its own (what it passes to exec)."""
    calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)]
    return next(c.args[0].value for c in calls if ast.unparse(c.func) == "exec")


def test_every_registered_carrier_that_needs_no_taskcell_is_shipped():
    names = [name for name, *_ in shipped()["_CARRIERS"]]
    expected = [c.name for c in process_state.registered() if c.name != "inline figures"]
    assert names == expected  # inline figures draws through taskcell: its module is not imported


def test_each_shipped_function_is_defined_once():
    """A function two carriers call (a cached one: ``functools.cache``) is shipped once."""
    tree = ast.parse(shipped_code(carriers_source("c", "a", [], "flyte")))
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    assert len(names) == len(set(names))


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


def shipped_updates():
    """The ``update(olds, news, outputs)`` a flyte module defines: taskcell.runner.inplace,
    shipped."""
    namespace: dict = {}
    exec(inplace_source("update"), namespace)
    return namespace["update"]


def shipped_update():
    """The shipped ``update`` of one changed value: the object its name holds after."""
    updates = shipped_updates()
    return lambda old, new: updates((old,), (new,), ())[0]


def test_shipped_updates_take_a_library_object_first_and_outputs_hold_the_notebooks():
    pd = pytest.importorskip("pandas")
    series, holder = pd.Series([1, 2]), {}
    holder["s"] = series
    new_series = pd.Series([100, 2])
    new_holder = {"s": new_series}
    kept_holder, kept_series, pair = shipped_updates()(
        (holder, series), (new_holder, new_series), ((new_series, 1),)
    )
    assert kept_holder is holder and kept_series is series and holder["s"] is series
    assert series.tolist() == [100, 2] and pair[0] is series  # as after a %%task cell


def test_changes_in_place_are_shipped_from_taskcells_own_module():
    shipped = shipped_code(inplace_source("update"))
    own = inspect.getsource(inplace).splitlines(True)
    kept = [line for line in own if not line.startswith("from taskcell.")]
    assert len(kept) == len(own) - 1  # the one import: RemoteValue, which no value here is
    without_it = shipped.replace("class RemoteValue:\n    pass\n", "", 1)
    assert without_it.strip("\n") == "".join(kept).strip("\n")


def test_shipped_update_takes_what_the_kernels_does():
    """A sequence kept in C (``array.array``) takes its new items, as after a ``%%task`` cell."""
    update = shipped_update()
    mine, kernels = array.array("i", [1]), array.array("i", [1])
    theirs = copy.deepcopy(mine)
    theirs.append(2)
    assert inplace.update(kernels, theirs)
    assert update(mine, theirs) is mine and mine == kernels == array.array("i", [1, 2])


def test_shipped_update_keeps_identity_and_the_parts_others_hold():
    class Account:
        def __init__(self):
            self.history = []

    nested = {"scores": [1, 2], "meta": {"n": 2}}
    scores, meta = nested["scores"], nested["meta"]
    changed = copy.deepcopy(nested)  # what a task got, and changed
    changed["scores"].append(3)
    changed["meta"]["n"] = 3
    update = shipped_update()
    assert update(nested, changed) is nested
    assert scores == [1, 2, 3] and nested["scores"] is scores and meta == {"n": 3}
    account = Account()
    theirs = copy.deepcopy(account)
    theirs.history.append("deposit")
    assert update(account, theirs) is account and account.history == ["deposit"]
    assert update(1, 2) == 2 and update([1], "other") == "other"  # nothing to keep: replaced


def test_shipped_update_moves_a_numpy_generator_and_writes_into_an_array():
    import numpy as np

    rng, data = np.random.default_rng(1), np.zeros(3)
    moved, filled = copy.deepcopy((rng, data))
    moved.random()  # the task drew a number from its copy
    filled[:] = 7
    twin = copy.deepcopy(moved)
    update = shipped_update()
    assert update(rng, moved) is rng and update(data, filled) is data
    assert data.tolist() == [7, 7, 7]
    assert rng.random() == twin.random()  # rng goes on from where the task left its copy
