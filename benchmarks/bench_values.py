"""What a value costs to cross into a ``%%task`` cell, against raw Dask on the same cluster.

For each kind of value (a 400 MB array, a dict of 50 arrays, a DataFrame with a string column,
in pandas' default string dtype and in ``object``, a fitted model of about 100 MB, a list of
2 million small dicts) three steps are timed:

* first use: a ``%%task`` cell reads the value (``n = len(x)``) the first time, against raw
  ``[f] = client.scatter([x], hash=False)`` then ``client.submit(len, f).result()``;
* second use: the same cell again, the value unchanged (taskcell reuses what it sent, if
  the value pickles the same), against ``client.submit(len, f).result()`` on the same future;
* small change: the notebook changes one element in place, then the cell runs again, against
  the same change, then scatter again + submit.

Then a ``%%task`` cell that makes a 1 GiB array (kept on the worker as a ``RemoteValue``, being
over ``taskcell.result-threshold``) and the next cell that reduces it, against
``client.submit(make)`` and ``client.submit(np.sum, future)``. bench_magic already has the
trivial round trip and a 512 MiB input.

``TASKCELL_BENCH_SCALE`` (default 1) scales every size (``0.1`` for a quick run; the 1 GiB value
is never made smaller than 128 MiB, so it stays over the 64 MiB threshold);
``TASKCELL_BENCH_REPEATS`` (default 3) is how many rounds each row is the median of, fewer
for a kind of value whose rounds passed ``TASKCELL_BENCH_CASE_BUDGET_S`` (default 180): raw
scatter of a long list takes minutes. Run it with ``python -m benchmarks bench_values``.
"""

from __future__ import annotations

import gc
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.bench_magic import MIB, _seconds

MB = 10**6


def _scale() -> float:
    return float(os.environ.get("TASKCELL_BENCH_SCALE", "1"))


def _repeats() -> int:
    return max(1, int(os.environ.get("TASKCELL_BENCH_REPEATS", "3")))


def _budget() -> float:
    """Seconds a kind of value may take before its rounds stop (one round at least)."""
    return float(os.environ.get("TASKCELL_BENCH_CASE_BUDGET_S", "180"))


# --- the values -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A kind of value: how to make it, a word on it, and one small change to it in place."""

    label: str
    make: Callable[[], Any]
    change: Callable[[Any, int], None]
    raw_note: str = ""


def _array(scale: float) -> Case:
    import numpy as np

    n = int(400 * MB * scale) // 8

    def change(x: Any, i: int) -> None:
        x[0] = -i

    return Case(f"{n * 8 / MB:.0f} MB float64 array", lambda: np.arange(n, dtype=float), change)


def _dict_of_arrays(scale: float) -> Case:
    import numpy as np

    n = int(8 * MB * scale) // 8

    def make() -> dict:
        return {f"a{k}": np.full(n, float(k)) for k in range(50)}

    def change(x: Any, i: int) -> None:
        x["a7"][0] = -i

    return Case(f"dict of 50 arrays of {n * 8 / MB:.1f} MB", make, change)


def _dataframe(scale: float, dtype: str | None = None) -> Case:
    """Its string column in pandas' default string dtype (Arrow-backed in pandas 3), or in
    ``dtype`` (``object``: one Python str per row)."""
    import numpy as np
    import pandas as pd

    n = int(2_000_000 * scale)

    def make() -> Any:
        names = pd.Series([f"item-{i}" for i in range(n)], dtype=dtype)
        return pd.DataFrame(
            {"id": np.arange(n), "value": np.random.default_rng(0).random(n), "name": names}
        )

    def change(x: Any, i: int) -> None:
        x.loc[0, "value"] = -i

    kind = pd.Series(["a"], dtype=dtype).dtype
    return Case(f"DataFrame of {n:,} rows (int, float, {kind}-dtype strings)", make, change)


def _dataframe_object(scale: float) -> Case:
    return _dataframe(scale, "object")


def _model(scale: float) -> Case:
    """A fitted scikit-learn ensemble whose pickle is about 100 MB at full scale: fully grown
    extra trees (no bootstrap) hold about 144 bytes per sample per tree."""
    import numpy as np
    from sklearn.ensemble import ExtraTreesRegressor

    n = int(87_000 * scale)
    rng = np.random.default_rng(0)
    features, target = rng.random((n, 4)), rng.random(n)
    fitted = ExtraTreesRegressor(n_estimators=8, n_jobs=2, random_state=0).fit(features, target)

    def make() -> Any:
        import copy

        return copy.deepcopy(fitted)  # a fresh object, with no refit

    def change(x: Any, i: int) -> None:
        x.estimators_[0].tree_.threshold[0] += 1e-9 * i  # a view of the tree's own nodes

    return Case(f"ExtraTreesRegressor fitted on {n:,} rows", make, change)


def _small_objects(scale: float) -> Case:
    n = int(2_000_000 * scale)

    def make() -> list:
        return [{"i": i, "x": float(i)} for i in range(n)]

    def change(x: Any, i: int) -> None:
        x[0]["i"] = -i

    return Case(f"list of {n:,} small dicts", make, change, _RAW_LIST)


#: Why raw scatter of a list is slow: distributed serializes each element on its own.
_RAW_LIST = (
    "raw is slow here because distributed serializes a list element by element (one frame "
    "each, as msgpack would turn a list into a tuple), which taskcell's one opaque value avoids"
)


def _pickled(value: Any) -> str:
    """What taskcell sends for ``value``: its pickle and out-of-band buffers, and how many of
    those are too small to reach the cell process as shared memory."""
    from taskcell.runner.crossing import seal
    from taskcell.runner.wire import SHARE_MIN

    sealed = seal({"x": value}, {})
    small = sum(memoryview(b).nbytes < SHARE_MIN for b in sealed.buffers)
    text = f"{sealed.nbytes / MB:.1f} MB pickled ({len(sealed.payload) / MB:.1f} MB in band"
    if small:
        text += f"; {small} of {len(sealed.buffers)} buffers under {SHARE_MIN // MIB} MiB"
    return text + ")"


# --- measuring --------------------------------------------------------------------------------


def _median_rows(label: str, steps: dict[str, list[tuple[float, float]]], note: str) -> list[dict]:
    raw_notes = {
        "first use": "raw: scatter([x], hash=False) + submit(len, future).result()",
        "second use": "raw: submit(len, same future).result()",
        "small change": "raw: change one element, scatter again + submit",
    }
    rows = []
    for step, pairs in steps.items():
        ours_s = statistics.median(o for o, _ in pairs)
        raw_s = statistics.median(r for _, r in pairs)
        rows.append(
            {
                "benchmark": f"{label}: {step}",
                "taskcell_s": ours_s,
                "baseline_s": raw_s,
                "ratio": ours_s / raw_s,
                "note": f"median of {len(pairs)}; {note}; {raw_notes[step]}",
            }
        )
    return rows


def _value_rows(client: Any, shell: Any, cell: Callable[[str], Any], case: Case) -> list[dict]:
    """The three steps for one kind of value, taskcell and raw alternating which goes first."""
    read = "n = len(x)"
    steps: dict[str, list[tuple[float, float]]] = {
        "first use": [],
        "second use": [],
        "small change": [],
    }
    changes = iter(range(1, 10**6))
    size = ""

    def ours(x: Any) -> list[float]:
        shell.user_ns["x"] = x  # a fresh binding: nothing taskcell sent before is reused
        first = _seconds(lambda: cell(read))
        second = _seconds(lambda: cell(read))
        changed = _seconds(lambda: (case.change(x, next(changes)), cell(read)))
        assert shell.user_ns["n"] == len(x)
        _forget(shell, cell)
        return [first, second, changed]

    def raw(x: Any) -> list[float]:
        futures = []

        def scattered() -> int:
            [future] = client.scatter([x], hash=False)
            futures.append(future)
            return client.submit(len, future, pure=False).result()

        first = _seconds(scattered)
        second = _seconds(lambda: client.submit(len, futures[0], pure=False).result())
        changed = _seconds(lambda: (case.change(x, next(changes)), scattered()))
        del futures[:]
        return [first, second, changed]

    started = time.monotonic()
    for round_ in range(_repeats()):
        if round_ and time.monotonic() - started > _budget():
            break  # raw scatter of a long list costs minutes: see _RAW_LIST
        x = case.make()
        size = size or _pickled(x)
        gc.collect()
        if round_ % 2:
            theirs, mine = raw(x), ours(x)
        else:
            mine, theirs = ours(x), raw(x)
        for step, o, r in zip(steps, mine, theirs, strict=True):
            steps[step].append((o, r))
        del x
    note = f"{size}; {case.raw_note}" if case.raw_note else size
    return _median_rows(case.label, steps, note)


def _forget(shell: Any, cell: Callable[[str], Any]) -> None:
    """Unbind ``x``: the next cell lets go of what taskcell kept of it on the cluster."""
    shell.user_ns.pop("x", None)
    shell.user_ns.pop("n", None)
    cell("y = 1")


def _remote_rows(client: Any, shell: Any, cell: Callable[[str], Any]) -> list[dict]:
    """A cell makes a large array, kept on the worker; the next cell reduces it."""
    import numpy as np
    from distributed import wait

    n = max(int(2**27 * _scale()), 2**24)  # 1 GiB at full scale, 128 MiB at least
    shell.user_ns["np"] = np
    made: list[tuple[float, float]] = []
    used: list[tuple[float, float]] = []

    def ours() -> tuple[float, float]:
        make_s = _seconds(lambda: cell(f"big = np.ones({n})"))
        assert type(shell.user_ns["big"]).__name__ == "RemoteValue", type(shell.user_ns["big"])
        use_s = _seconds(lambda: cell("total = float(big.sum())"))
        assert shell.user_ns["total"] == n
        shell.user_ns.pop("big")
        cell("y = 1")
        return make_s, use_s

    def raw() -> tuple[float, float]:
        futures = []
        make_s = _seconds(
            lambda: (futures.append(client.submit(np.ones, n, pure=False)), wait(futures))
        )
        use_s = _seconds(lambda: client.submit(np.sum, futures[0], pure=False).result())
        del futures[:]
        return make_s, use_s

    for round_ in range(_repeats()):
        if round_ % 2:
            (rm, ru), (om, ou) = raw(), ours()
        else:
            (om, ou), (rm, ru) = ours(), raw()
        made.append((om, rm))
        used.append((ou, ru))
    size = f"{n * 8 / MIB:.0f} MiB"
    rows = []
    for what, pairs, note in [
        (
            f"%%task cell making a {size} value kept remote",
            made,
            "raw: client.submit(np.ones, n) + wait",
        ),
        (
            f"next cell on a {size} remote value",
            used,
            "the cell right after it was made: total = float(big.sum()); "
            "raw: client.submit(np.sum, future).result()",
        ),
    ]:
        ours_s = statistics.median(o for o, _ in pairs)
        raw_s = statistics.median(r for _, r in pairs)
        rows.append(
            {
                "benchmark": what,
                "taskcell_s": ours_s,
                "baseline_s": raw_s,
                "ratio": ours_s / raw_s,
                "note": f"median of {len(pairs)}; {note}",
            }
        )
    return rows


def run() -> list[dict]:
    from distributed import Client, LocalCluster
    from IPython.core.interactiveshell import InteractiveShell

    scale = _scale()
    rows: list[dict] = []
    with (
        LocalCluster(n_workers=1, threads_per_worker=2, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        shell = InteractiveShell.instance()
        shell.run_line_magic("load_ext", "taskcell")
        shell.run_line_magic("task_cluster", cluster.scheduler_address)

        cell = lambda body: shell.run_cell_magic("task", "", body)  # noqa: E731
        cell("y = 1")  # the worker's cell process is started (not timed)
        client.submit(len, [1], pure=False).result()

        for make_case in (
            _array,
            _dict_of_arrays,
            _dataframe,
            _dataframe_object,
            _model,
            _small_objects,
        ):
            started = time.monotonic()
            case = make_case(scale)
            rows += _value_rows(client, shell, cell, case)
            print(f"{case.label}: {time.monotonic() - started:.1f} s", flush=True)
        rows += _remote_rows(client, shell, cell)
    for row in rows:
        row["note"] += f"; TASKCELL_BENCH_SCALE={scale:g}"
    return rows
