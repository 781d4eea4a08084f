"""A ``%%task`` cell means what it means in Python: real kernels, real scheduler and workers.

The notebook corpus (``tests/corpus``) compares whole notebooks with and without ``%%task``;
these tests pin the rules one at a time, with the cases a corpus seldom reaches: failures and
interrupts change nothing, aliases, values that cannot come back, kernel-only magics, the
state a user registers, ``--graph`` and a cell waiting on its own graph on one thread.
"""

from __future__ import annotations

import textwrap

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(module_dask):
    """A one-thread worker, and a one-thread worker advertising ``GPU=1`` (named ``gpu``)."""
    module_dask.worker(name="plain")
    module_dask.worker("--resources", "GPU=1", name="gpu")
    module_dask.wait_for_workers(2)
    return module_dask


@pytest.fixture(scope="module")
def nb(kernel, cluster):
    out = kernel.run(f"%task_cluster {cluster.address}")
    assert out.status == "ok", out.error_text
    return kernel


def cell(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def test_changes_in_place_reach_every_name_and_only_when_the_cell_succeeds(nb):
    nb.run("items = [0]\nsame = items\nbook = {'page': items}\nclass Box: pass\nbox = Box()")
    failed = nb.run(
        cell("""
        %%task
        items.append(1)
        book['title'] = 'x'
        box.size = 3
        raise ValueError('after the changes')
    """)
    )
    assert failed.status == "error" and "after the changes" in failed.error_text
    assert nb.value("(items, book, hasattr(box, 'size'))") == ([0], {"page": [0]}, False)
    done = nb.run("%%task\nitems.append(1)\nbook['title'] = 'x'\nbox.size = 3")
    assert done.status == "ok", done.error_text
    assert nb.value("(same, same is items, book['page'] is items, box.size)") == (
        [0, 1],
        True,
        True,
        3,
    )


def test_a_large_set_read_stays_and_changed_comes_back(nb):
    """A set of strings over a mebibyte iterates in another order in the cell's process (its
    own string hashes), so it pickles to other bytes there than it came in: a change made there
    still comes back, to every name for it."""
    nb.run("words = {f'word-{i}' for i in range(200_000)}\nalias = words")
    read = nb.run("%%task\nn = len(words)")
    assert read.status == "ok", read.error_text
    changed = nb.run("%%task\nwords.add('new')")
    assert changed.status == "ok", changed.error_text
    assert nb.value("(n, alias is words, 'new' in alias, len(words))") == (
        200_000,
        True,
        True,
        200_001,
    )


def test_an_interrupted_cell_changes_nothing(nb):
    nb.run("log = []")
    msg_id = nb.start(
        "%%task\nimport time\nlog.append('started')\nprint('started', flush=True)\ntime.sleep(60)"
    )
    seen = ""
    while "started" not in seen:
        msg = nb.client.get_iopub_msg(timeout=60)
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream":
            seen += msg["content"]["text"]
    nb.manager.interrupt_kernel()
    out = nb.wait(msg_id, timeout=30)
    assert out.status == "error" and "KeyboardInterrupt" in out.error_text
    assert nb.value("log") == []


def test_an_alias_the_change_cannot_reach_is_named(nb):
    nb.run("class Draft: pass\nclass Final: pass\ndoc = Draft()\npinned = doc")
    out = nb.run("%%task\ndoc.__class__ = Final")  # Python changes the type in place
    assert out.status == "ok", out.error_text
    assert "pinned still holds the value from before" in out.stderr
    assert nb.value("(type(doc).__name__, type(pinned).__name__)") == ("Final", "Draft")


def test_a_background_cell_changes_in_place_when_it_ends(nb):
    nb.run("pending = []")
    out = nb.run("%%task --bg\npending.extend(range(3))")
    assert out.status == "ok", out.error_text
    assert nb.run("_.wait(60)").status == "ok"
    assert nb.value("pending") == [0, 1, 2]


def test_state_a_user_registers_travels_and_comes_back(nb):
    out = nb.run(
        cell("""
        import decimal
        from taskcell.runner import process_state
        process_state.register(
            "decimal precision",
            "decimal",
            lambda: decimal.getcontext().prec,
            lambda prec: setattr(decimal.getcontext(), "prec", prec),
        )
        decimal.getcontext().prec = 7
    """)
    )
    assert out.status == "ok", out.error_text
    out = nb.run("%%task\nseen = decimal.getcontext().prec\ndecimal.getcontext().prec = 12")
    assert out.status == "ok", out.error_text
    assert nb.value("(seen, decimal.getcontext().prec)") == (7, 12)


@pytest.mark.parametrize("magic", ["%load_ext autoreload", "%store items", "%matplotlib inline"])
def test_a_magic_that_needs_the_kernel_is_refused_before_anything_runs(nb, magic):
    nb.run("ran = 'no'")
    out = nb.run(f"%%task\nran = 'yes'\n{magic}")
    assert out.status == "error"
    assert f"{magic.split()[0]} cannot run inside a %%task cell" in out.error_text
    assert nb.value("ran") == "no"


def test_shell_escapes_and_timings_run_on_the_worker(nb):
    out = nb.run(
        cell("""
        %%task
        %%time
        import os
        where = os.environ['TASKCELL_WORKER_NAME']
        !echo on {where}
        names = !echo a b
        """)
    )
    assert out.status == "ok", out.error_text
    assert "Wall time" in out.stdout
    worker = nb.value("where")
    assert f"on {worker}" in out.stdout
    assert nb.value("names") == ["a b"]


def test_a_graph_cell_gives_every_task_its_request(nb):
    nb.run(
        cell("""
        import dask
        from distributed import get_worker

        @dask.delayed
        def where(i):
            return get_worker().name
    """)
    )
    out = nb.run(
        "%%task --graph --gpu 1 --name placed\nset(dask.compute(*[where(i) for i in range(6)]))"
    )
    assert out.status == "ok", out.error_text
    assert out.result == "{'gpu'}"
    assert nb.run("_t = %tasks").status == "ok"
    assert nb.value("_t[_t.cell == 'placed'].state.tolist()") == ["finished"]


def test_a_graph_cell_no_worker_can_meet_submits_nothing(nb):
    nb.run("sent = []")
    out = nb.run("%%task --graph --gpu 4\nsent.append(dask.compute(where(0)))")
    assert out.status == "error"
    assert "asks GPU=4" in out.error_text and "Nothing was submitted" in out.error_text
    assert nb.value("sent") == []


def test_a_graph_cells_tasks_show_under_its_name(nb):
    out = nb.run(
        cell("""
        from distributed import Event, get_client
        gate = Event("taskcell-graph-gate")
        def held(event_name):
            from distributed import Event
            return Event(event_name).wait(60)
    """)
    )
    assert out.status == "ok", out.error_text
    out = nb.run("%%task --graph --name gated\nheld_future = get_client().submit(held, gate.name)")
    assert out.status == "ok", out.error_text
    try:
        shown = nb.run(
            cell("""
            import time
            from taskcell.planner import snapshot
            for _ in range(600):
                _names = {t["name"] for w in snapshot()["workers"] for t in w["tasks"]}
                if "gated: held" in _names:
                    break
                time.sleep(0.1)
            print(sorted(_names))
        """),
            timeout=90,
        )
        assert "gated: held" in shown.stdout, shown.stdout + shown.error_text
    finally:
        nb.run("gate.set()\nheld_future.result()")


def test_a_cell_waiting_on_its_own_graph_on_a_one_thread_worker(dask_processes, fresh_kernel):
    dask_processes.worker()
    dask_processes.wait_for_workers(1)
    assert fresh_kernel.run(f"%task_cluster {dask_processes.address}").status == "ok"
    out = fresh_kernel.run(
        cell("""
        %%task
        import dask
        parts = [dask.delayed(pow)(i, 2) for i in range(5)]
        total = dask.delayed(sum)(parts).compute()
        total
        """),
        timeout=120,
    )
    assert out.status == "ok", out.error_text
    assert out.result == "30"


def test_a_function_a_task_cell_defines_reads_the_notebooks_globals_later(nb):
    out = nb.run("%%task\ndef scaled(x):\n    return x * factor")
    assert out.status == "ok", out.error_text
    nb.run("factor = 3")
    assert nb.value("scaled(2)") == 6


def test_top_level_await_runs_as_in_a_kernel(nb):
    out = nb.run("%%task\nimport asyncio\nawait asyncio.sleep(0)\nslept = 'yes'\nslept")
    assert out.status == "ok", out.error_text
    assert out.result == "'yes'"


def test_logging_set_up_in_the_notebook_prints_in_the_cell(nb):
    nb.run(
        "import logging\n"
        "logging.basicConfig(level=logging.INFO, format='%(levelname)s %(message)s', force=True)"
    )
    out = nb.run("%%task\nimport logging\nlogging.getLogger('work').info('step done')")
    assert out.status == "ok", out.error_text
    assert "INFO step done" in out.stderr


def test_a_module_beside_the_notebook_imports_in_the_cell(nb, tmp_path):
    (tmp_path / "helpers_here.py").write_text("def twice(x):\n    return 2 * x\n")
    nb.run(f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\nimport helpers_here")
    out = nb.run("%%task\ndoubled = helpers_here.twice(21)")
    assert out.status == "ok", out.error_text
    assert nb.value("doubled") == 42


def test_a_large_input_that_cannot_travel_is_one_line_and_no_log(nb):
    nb.run("import threading\nheavy = [bytes(2**21), threading.Lock()]")
    out = nb.run("%%task\nn = len(heavy)")
    assert out.status == "error"
    assert "input 'heavy' (list) cannot be sent to a worker" in out.error_text
    assert "cannot pickle '_thread.lock' object" in out.error_text
    assert out.stderr == "" and out.stdout == ""


def test_a_pipe_the_cell_binds_is_named_and_breaks_nothing(nb):
    out = nb.run(
        "%%task\nimport multiprocessing\nreader, writer = multiprocessing.Pipe()\nkept = 1"
    )
    assert out.status == "ok", out.error_text
    assert "reader (Connection: a Connection holds a file descriptor" in out.stderr
    assert nb.value("('reader' in dir(), kept)") == (False, 1)
    again = nb.run("%%task\nafter = kept + 1")
    assert again.status == "ok", again.error_text
    assert nb.value("after") == 2


def test_a_cell_out_of_memory_starts_again_one_rung_up(nb, tmp_path):
    marker = tmp_path / "first-attempt"
    nb.run(f"attempts_log = []\nmarker = {str(marker)!r}")
    out = nb.run(
        cell("""
        %%task --memory 256Mi --retries 1 --name hungry
        import os
        import numpy as np
        attempts_log.append('ran')
        first = not os.path.exists(marker)
        open(marker, 'a').close()
        if first:  # as numpy says it when the memory is not there
            raise MemoryError("Unable to allocate 300. MiB for an array with shape (314572800,)")
        size = np.ones(8, dtype=np.uint8).size
        """),
        timeout=120,
    )
    assert out.status == "ok", out.error_text
    assert "attempt 1 ran out of memory with 256 MiB" in out.stderr
    assert "running it again (attempt 2 of 2)" in out.stderr
    assert nb.value("(size, attempts_log)") == (8, ["ran"])  # nothing from the failed attempt
    assert nb.run("_t = %tasks").status == "ok"
    assert nb.value("_t[_t.cell == 'hungry'].state.tolist()") == ["error", "finished"]


def test_without_retries_the_memory_it_needs_is_named(nb):
    out = nb.run("%%task --memory 256Mi\nimport numpy as np\nnp.ones(2**60, dtype=np.uint8)")
    assert out.status == "error"
    assert "attempt 1 ran out of memory with 256 MiB" in out.stderr
    assert "Unable to allocate" in out.error_text


def test_names_the_analysis_cannot_see_come_back(nb):
    out = nb.run('%%task\nfrom math import *\nr = floor(2.5)\nexec("made_by_exec = 5")')
    assert out.status == "ok", out.error_text
    assert nb.value("(r, made_by_exec, round(pi, 2))") == (2, 5, 3.14)


def test_a_notebook_function_rebinding_a_global_rebinds_it_in_the_notebook(nb):
    nb.run("calls = 0\ndef bump():\n    global calls\n    calls += 1\nkept = [1]")
    out = nb.run('%%task\nbump()\nbump()\nbefore = len(kept)\nexec("kept = kept + [2]")')
    assert out.status == "ok", out.error_text
    assert nb.value("(calls, kept)") == (2, [1, 2])


def test_relative_paths_mean_the_notebooks_files_and_a_chdir_comes_back(nb, tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "data.txt").write_text("hello")
    nb.run(f"import os\nhome = os.getcwd()\nos.chdir({str(tmp_path)!r})")
    try:
        out = nb.run("%%task\ntext = open('data.txt').read()\nos.chdir('sub')")
        assert out.status == "ok", out.error_text
        assert nb.value("(text, os.getcwd())") == ("hello", str(tmp_path / "sub"))
        assert nb.run("%%task\n%cd ..").status == "ok"
        assert nb.value("os.getcwd()") == str(tmp_path)
    finally:
        nb.run("os.chdir(home)")


def test_a_failed_import_shows_the_users_frames_only(nb):
    out = nb.run("%%task\nimport no_such_module_here")
    assert "No module named 'no_such_module_here'" in out.error_text
    assert "taskcell" not in out.error_text.split("Traceback", 1)[1]


def test_capture_keeps_a_last_value_as_a_kernel_does(nb):
    out = nb.run('%%task\n%%capture captured_out\nprint("hi")\n1 + 1')
    assert out.status == "ok", out.error_text
    assert nb.value("(len(captured_out.outputs), captured_out.stdout)") == (1, "hi\n")
