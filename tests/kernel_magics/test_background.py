"""``%%task --bg``: followed live in its own output, cancelled, and bound by rules a user can
predict. A real kernel against real scheduler and worker processes."""

from __future__ import annotations

import pytest
from conftest import KernelSession
from waiting import eventually

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bg_kernel(module_dask):
    """A kernel on a worker with six threads and one ``slot``."""
    module_dask.worker("--nthreads", "6", "--resources", "slot=1", name="bg-worker")
    kernel = KernelSession()
    out = kernel.run(
        "%load_ext taskcell\nimport distributed\n"
        f"distributed.Client({module_dask.address!r}).wait_for_workers(1)\n"
        f"%task_cluster {module_dask.address}"
    )
    assert out.status == "ok", out.error_text
    yield kernel
    kernel.stop()


def views(kernel: KernelSession, key: str, until: str) -> list[str]:
    """The texts a background cell's output showed, from the kernel's messages (whatever
    execution they came under), once one contains ``until``."""

    def shown() -> list[str]:
        return [
            msg["content"]["data"]["text/plain"]
            for msg in kernel.log
            if msg["msg_type"] in ("display_data", "update_display_data")
            and msg["content"].get("transient", {}).get("display_id") == key
        ]

    return kernel.read_until(
        shown, f"its output to say {until!r}", lambda texts: any(until in t for t in texts)
    )


def test_a_failing_background_cell_shows_the_failure_where_it_is(bg_kernel):
    out = bg_kernel.run("%%task --bg --name boom\nprint('working')\nraise ValueError('bad batch')")
    assert out.status == "ok", out.error_text
    key = bg_kernel.value("_.key")
    shown = views(bg_kernel, key, until="failed")
    assert "taskcell: boom: failed on tcp://127.0.0.1" in shown[-1]
    assert "ValueError: bad batch" in shown[-1] and "working" in shown[-1]
    assert (
        'raise ValueError("bad batch")' in shown[-1] or "raise ValueError('bad batch')" in shown[-1]
    )
    bg_kernel.run("tasks = %tasks")
    row = "tuple(tasks[tasks.cell == 'boom'][['state', 'error']].iloc[-1])"
    assert bg_kernel.value(row) == ("error", "ValueError: bad batch")


def test_a_successful_background_cell_says_done(bg_kernel):
    out = bg_kernel.run("%%task --bg --name fine\nanswer = 42")
    key = bg_kernel.value("_.key")
    assert out.status == "ok", out.error_text
    shown = views(bg_kernel, key, until="done")
    assert "taskcell: fine: done on tcp://127.0.0.1" in shown[-1]
    assert bg_kernel.value("answer") == 42


@pytest.mark.parametrize("how", ["handle", "magic"])
def test_cancelling_stops_the_cell_and_frees_its_resources(bg_kernel, how, tmp_path):
    started = tmp_path / "started"
    bg_kernel.run("held = 'before'")
    bg_kernel.run(
        f"%%task --bg --name holder --resources slot=1\nimport time\n"
        f"open({str(started)!r}, 'w').close()\ntime.sleep(600)\nheld = 'after'"
    )
    bg_kernel.run("holder = _")
    eventually(started.exists, "the background cell to start")
    cancel = "holder.cancel()" if how == "handle" else "%task_cancel holder"
    assert bg_kernel.run(cancel).status == "ok"
    assert bg_kernel.run("holder.wait(60)").status == "error"
    assert bg_kernel.value("holder.record.state") == "cancelled"
    again = bg_kernel.run("%%task --resources slot=1\nslot_free = True")
    assert again.status == "ok", again.error_text
    assert bg_kernel.value("held") == "before"


def test_a_name_rebound_after_submitting_is_kept(bg_kernel, tmp_path):
    go = tmp_path / "go"
    bg_kernel.run("mine = 'old'")
    bg_kernel.run(
        f"%%task --bg --name rebinder\nimport os, time\n"
        f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.05)\nmine = 'from the task'"
    )
    bg_kernel.run("rebinder = _\nmine = 'the user'")
    go.touch()
    bg_kernel.run("rebinder.wait(60)")
    assert bg_kernel.value("mine") == "the user"
    assert bg_kernel.value("rebinder.kept") == ["mine"]
    shown = views(bg_kernel, bg_kernel.value("rebinder.key"), until="not bound")
    assert "not bound, rebound since this cell was submitted: mine" in shown[-1]


@pytest.mark.parametrize("finish_order", ["first-submitted-first", "last-submitted-first"])
def test_among_background_cells_binding_one_name_the_last_submitted_wins(
    bg_kernel, tmp_path, finish_order
):
    cells = range(5)
    for i in cells:
        bg_kernel.run(
            f"%%task --bg --name writer-{i}\nimport os, time\n"
            f"while not os.path.exists({str(tmp_path / str(i))!r}):\n    time.sleep(0.05)\n"
            f"shared = {i}"
        )
        bg_kernel.run(f"writer_{i} = _")
    order = list(cells) if finish_order == "first-submitted-first" else list(reversed(cells))
    for i in order:  # each cell ends, and binds, before the next is let go
        (tmp_path / str(i)).touch()
        assert bg_kernel.run(f"writer_{i}.wait(60)").status == "ok"
    assert bg_kernel.value("shared") == 4


def test_many_background_cells_all_bind_and_cost_one_thread(bg_kernel, tmp_path):
    """Two hundred background cells, all waiting at once, are followed by one thread of the
    kernel (and a few that finish them), not one each; every one binds its name."""
    gate = str(tmp_path / "gate")
    bg_kernel.run(f"import threading\nbefore = threading.active_count()\ngate = {gate!r}")
    for i in range(200):
        out = bg_kernel.run(
            f"%%task --bg\nimport os, time\nwhile not os.path.exists(gate):\n"
            f"    time.sleep(0.05)\nsquare_{i} = {i} * {i}",
            timeout=120,
        )
        assert out.status == "ok", out.error_text
    assert bg_kernel.value("threading.active_count() - before") <= 10
    open(gate, "w").close()
    bound = bg_kernel.eventual_value(
        "sum(f'square_{i}' in globals() for i in range(200))",
        "every background cell to bind its name",
        holds=lambda n: n == 200,
    )
    assert bound == 200
    assert bg_kernel.value("all(globals()[f'square_{i}'] == i * i for i in range(200))")


def test_task_wait_raises_the_first_failure_of_the_background_cells(bg_kernel):
    """``%task_wait`` waits for every background cell not waited for yet and fails where it is
    written, as nbclient and papermill see a failure; the failed cell shows as an error."""
    bg_kernel.run("%task_wait")  # the cells of the tests before this one
    ok = bg_kernel.run("%%task --bg --name fine\nfine = 1")
    assert ok.status == "ok", ok.error_text
    failing = bg_kernel.run("%%task --bg --name broken\nraise ValueError('bad wait')")
    assert failing.status == "ok", failing.error_text
    key = bg_kernel.value("_.key")
    waited = bg_kernel.run("%task_wait", timeout=120)
    assert waited.status == "error"
    error = waited.of_type("error")[0]["content"]
    assert error["ename"] == "ValueError" and "bad wait" in error["evalue"]
    assert bg_kernel.value("fine") == 1
    failed = [
        msg["content"]["data"]
        for msg in bg_kernel.log
        if msg["msg_type"] == "update_display_data"
        and msg["content"].get("transient", {}).get("display_id") == key
    ]
    assert "application/vnd.jupyter.stderr" in failed[-1]
    assert "ValueError: bad wait" in failed[-1]["application/vnd.jupyter.stderr"]
    again = bg_kernel.run("%task_wait")
    assert again.status == "ok" and "0 background cells done" in again.stdout


def test_an_ended_background_cell_holds_none_of_what_it_read(bg_kernel):
    """The handle a background cell leaves in ``Out`` keeps its output and record, not what the
    cell sent: an array it read, over a mebibyte, is freed when the notebook deletes it."""
    made = "import gc, weakref\nimport numpy as np\nbig = np.ones(1 << 18)\nref = weakref.ref(big)"
    assert bg_kernel.run(made).status == "ok"
    out = bg_kernel.run("%%task --bg --name reader\ntotal = float(big.sum())")
    assert out.status == "ok", out.error_text
    assert bg_kernel.run("reader = _\nreader.wait(60)").status == "ok"
    assert bg_kernel.value("total") == float(1 << 18)
    assert bg_kernel.run("del big\ngc.collect()").status == "ok"
    assert bg_kernel.value("ref() is None") is True
    assert bg_kernel.value("reader.record.state") == "finished"
