"""Values crossing between the notebook and a cell's process keep Python's meaning: each case
runs the same cell plainly and as ``%%task`` in one real kernel, on real scheduler and worker
processes, and compares what the notebook then holds."""

from __future__ import annotations

import textwrap

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def nb(kernel, module_dask):
    module_dask.worker(name="plain")
    module_dask.wait_for_workers(1)
    out = kernel.run(f"%task_cluster {module_dask.address}")
    assert out.status == "ok", out.error_text
    return kernel


def both_ways(nb, setup: str, cell: str, probe: str) -> tuple[str, str]:
    """What ``probe`` prints after ``setup`` and ``cell``: run plainly, then as a task."""
    seen = []
    for magic in ("", "%%task\n"):
        ran = nb.run(textwrap.dedent(setup))
        assert ran.status == "ok", ran.error_text
        out = nb.run(magic + textwrap.dedent(cell))
        assert out.status == "ok", out.error_text
        shown = nb.run(textwrap.dedent(probe))
        assert shown.status == "ok", shown.error_text
        seen.append(out.stdout + "|" + shown.stdout)
    return seen[0], seen[1]


def test_dicts_that_share_keys_keep_their_own_values(nb):
    local, task = both_ways(
        nb,
        "import numpy as np\nd1 = {'k': np.zeros(200_000)}\nd2 = {'k': np.ones(200_000)}",
        "s = (float(d1['k'].sum()), float(d2['k'].sum()))",
        "print(s)",
    )
    assert task == local == "|(0.0, 200000.0)\n"


def test_a_large_list_travels_as_one_value(nb):
    local, task = both_ways(
        nb,
        "rows = [{'i': i, 'name': str(i)} for i in range(60_000)]",
        "total = sum(r['i'] for r in rows)\nrows.append({'i': -1})",
        "print(total, len(rows), rows[-1])",
    )
    assert task == local


def test_the_notebooks_dataclass_keeps_its_methods(nb):
    local, task = both_ways(
        nb,
        """
        from dataclasses import dataclass
        @dataclass
        class Point:
            x: int
            y: int
        p = Point(1, 2)
        """,
        "p.x = 5\nq = Point(3, 4)",
        "print(repr(p), repr(q), type(q) is Point, repr(Point(7, 8)))",
    )
    assert task == local == "|Point(x=5, y=2) Point(x=3, y=4) True Point(x=7, y=8)\n"


def test_decorated_helpers_run_as_they_do_in_the_notebook(nb):
    local, task = both_ways(
        nb,
        """
        import contextlib, functools
        log = []
        @contextlib.contextmanager
        def section(name):
            log.append(f"enter {name}")
            yield name.upper()
            log.append(f"exit {name}")
        def traced(f):
            @functools.wraps(f)
            def wrapper(*args):
                log.append(f.__name__)
                return f(*args)
            return wrapper
        @traced
        def double(x):
            return 2 * x
        @functools.lru_cache(maxsize=None)
        def square(x):
            return x * x
        """,
        """
        with section("a") as shout:
            got = (shout, double(4), square(5))
        print(got)
        """,
        "print(log, got)",
    )
    assert task == local


def test_class_state_and_mutable_defaults_come_back(nb):
    local, task = both_ways(
        nb,
        """
        class Registry:
            items = []
            @classmethod
            def add(cls, x):
                cls.items.append(x)
        def acc(x, into=[]):
            into.append(x)
            return len(into)
        acc.calls = 0
        """,
        "Registry.add(1)\nn = acc(7)\nacc.calls += 1",
        "print(Registry.items, acc.__defaults__, acc.calls, n)",
    )
    assert task == local == "|[1] ([7],) 1 1\n"


def test_a_view_stays_a_view_of_its_base(nb):
    local, task = both_ways(
        nb,
        "import numpy as np\nbase = np.zeros(8)\nview = base[2:5]",
        "view[0] = -5\nprint(base[2])",
        "print(base.tolist(), view.tolist(), view.base is base)",
    )
    assert task == local


def test_a_large_input_unchanged_is_sent_once(nb):
    """The second cell reads the value the first sent (the same key on the cluster); a change
    in the notebook sends it again, and the cell sees the change."""
    nb.run(
        "from taskcell.runner.cell_task import _kept\n"
        "def sent_key(name):\n"
        "    return next(str(s.future.key) for (_, n), s in _kept._sent.items() if n == name)\n"
        "import numpy as np\n"
        "big = np.arange(1_000_000)"
    )
    keys = []
    for change in ("", "", "big[0] = 10"):
        assert nb.run(change).status == "ok"
        out = nb.run("%%task\ntotal = int(big.sum())")
        assert out.status == "ok", out.error_text
        keys.append(nb.value("sent_key('big')"))
    assert keys[0] == keys[1] != keys[2]
    assert nb.value("total") == sum(range(1_000_000)) + 10


def test_dask_in_a_cell_on_the_notebooks_in_process_client_is_refused_by_name(fresh_kernel):
    """``Client(processes=False)`` lives inside the kernel: a cell that uses Dask cannot reach
    it from its process, and says so before it runs; a cell that does not use Dask runs."""
    started = fresh_kernel.run(
        "from distributed import Client\n"
        "client = Client(processes=False, n_workers=1, threads_per_worker=1, "
        "dashboard_address=None)\n"
        "done = []"
    )
    assert started.status == "ok", started.error_text
    refused = fresh_kernel.run(
        "%%task\nimport dask\ndone.append(1)\ntotal = dask.delayed(sum)([1, 2]).compute()",
        timeout=120,
    )
    assert refused.status == "error"
    assert "processes=False" in refused.error_text
    assert fresh_kernel.value("done") == []
    plain = fresh_kernel.run("%%task\nsquare = 7 * 7", timeout=120)
    assert plain.status == "ok", plain.error_text
    assert fresh_kernel.value("square") == 49
    fresh_kernel.run("client.close()")


def test_a_value_kept_on_the_worker_stays_there_for_the_next_cell(nb):
    """A result over the threshold is a handle; the next cell reads it where it is, and the
    kernel never brings it over (sizing the cell's inputs must not touch it)."""
    nb.run("import dask\nsmall_threshold = dask.config.set({'taskcell.result-threshold': '1MiB'})")
    try:
        out = nb.run("%%task\nimport numpy as np\nkept_there = np.ones(2**20)")
        assert out.status == "ok", out.error_text
        assert nb.value("type(kept_there).__name__") == "RemoteValue"
        out = nb.run("%%task\nkept_total = float(kept_there.sum())")
        assert out.status == "ok", out.error_text
        assert nb.value("kept_total") == 2**20
        assert nb.value("kept_there._fetched") is False
    finally:
        nb.run("small_threshold.__exit__(None, None, None)")
