"""The panel in a real kernel: it moves while a blocking ``%%task`` cell runs; closed, it stops."""

from __future__ import annotations

import queue
import textwrap

import pytest
from waiting import eventually

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def panel_kernel(kernel, module_dask):
    """A kernel on a cluster of one worker with two GPUs, showing a panel as ``p``."""
    module_dask.worker("--nthreads", "2", "--resources", "GPU=2", name="gpu-box")
    out = kernel.run(
        f"import distributed; distributed.Client({module_dask.address!r}).wait_for_workers(1)\n"
        f"%task_cluster {module_dask.address}\n"
        "import taskcell.widgets\n"
        "p = taskcell.widgets.panel()\n"
        "p"
    )
    assert out.status == "ok", out.error_text
    (result,) = out.of_type("execute_result")
    assert "application/vnd.jupyter.widget-view+json" in result["content"]["data"]
    return kernel


def iopub_until_idle(kernel, msg_id, on_message):
    """Every iopub message, whatever its parent, until ``msg_id``'s execution is idle."""

    def next_message():
        try:
            msg = kernel.client.get_iopub_msg(timeout=0.1)
        except queue.Empty:
            return None
        on_message(msg)
        return msg

    def idle(msg) -> bool:
        return (
            msg is not None
            and msg["msg_type"] == "status"
            and msg["parent_header"].get("msg_id") == msg_id
            and msg["content"]["execution_state"] == "idle"
        )

    eventually(next_message, f"execution {msg_id} to finish", holds=idle, every=0)
    kernel.client.get_shell_msg(timeout=10)


def state_updates(msg, model_id):
    if msg["msg_type"] != "comm_msg":
        return None
    if msg["content"]["comm_id"] != model_id:
        return None
    return msg["content"]["data"].get("state", {}).get("value")


def test_panel_moves_while_a_blocking_cell_runs(panel_kernel, tmp_path):
    workers_id = panel_kernel.value("p.workers.model_id")
    flag = tmp_path / "release"
    cell = textwrap.dedent(f"""
        %%task --gpu 1 --name blocker
        import os, time
        while not os.path.exists({str(flag)!r}):
            time.sleep(0.05)
        held = True
    """).strip()
    msg_id = panel_kernel.start(cell)
    running: list[str] = []

    def watch(msg):
        # The cell holds the kernel until the panel has changed four times showing it.
        value = state_updates(msg, workers_id)
        if value is not None and "blocker" in value and not flag.exists():
            running.append(value)
            if len(running) == 4:
                flag.touch()

    iopub_until_idle(panel_kernel, msg_id, watch)
    assert len(running) == 4
    assert "1 of 2 GPU in use" in running[-1]  # one of the two GPUs held by the cell
    assert panel_kernel.value("held") is True

    # And it empties once the cell is done.
    panel_kernel.eventual_value(
        "p.feed.snapshot()['totals'][1]['running']", "the GPU free", lambda v: v == 0
    )


def test_planner_box_suggests_and_inserts_the_line(panel_kernel):
    from taskcell.planner import suggest

    expected = suggest("1 GiB")
    out = panel_kernel.run("p.size.value = '1 GiB'\nprint(p.suggestion.line)\np.insert()")
    assert out.status == "ok", out.error_text
    assert out.stdout.strip() == expected.line
    assert out.result == "True"
    sent = [
        m["content"]["data"]
        for m in out.of_type("comm_msg")
        if m["content"]["data"].get("action") == "insert-cell-below"
    ]
    assert sent == [{"action": "insert-cell-below", "source": f"{expected.line}\n"}]
    assert f"{expected.preset} fits" in panel_kernel.value("p.advice.value")

    out = panel_kernel.run(
        "import numpy as np\narr = np.zeros(2 << 30, dtype='uint8')\n"
        "p.size.value = 'arr'\np.profile.value = 'light'\nprint(p.suggestion.preset)"
    )
    assert out.stdout.strip() == suggest(2 << 30, "light").preset, out.error_text
    panel_kernel.run("p.size.value = 'no such thing'")
    assert "matches no file" in panel_kernel.value("p.advice.value")
    assert panel_kernel.value("p.insert_button.disabled") is True


def test_the_panel_cancels_a_background_cell_and_frees_its_gpu(panel_kernel):
    out = panel_kernel.run(
        "%%task --gpu 2 --bg --name sleeper\nimport time\nwhile True:\n    time.sleep(0.05)"
    )
    assert out.status == "ok", out.error_text
    options = panel_kernel.eventual_value(
        "list(p.cancel_choice.options)",
        "the cell offered for cancelling",
        lambda o: any(label.startswith("sleeper · running on ") for label, _ in o),
    )
    key = next(k for label, k in options if label.startswith("sleeper"))
    out = panel_kernel.run(f"p.cancel({key!r}).join(30)\nprint(p.cancel_status.value)")
    assert out.stdout.strip() == f"{key}: interrupted on its worker", out.error_text
    panel_kernel.eventual_value(
        "p.feed.snapshot()['totals'][1]['running']", "its GPUs free", lambda v: v == 0
    )
    ended = panel_kernel.eventual_value(
        "p.ended.value", "it listed as ended", lambda v: "sleeper" in v
    )
    assert "cancelled" in ended, ended[-1500:]
    panel_kernel.run("from taskcell.runner.history import kernel_history")
    states = "[r.state for r in kernel_history() if r.cell == 'sleeper']"
    panel_kernel.eventual_value(states, "it recorded as cancelled", lambda v: v == ["cancelled"])


def test_a_failed_background_cell_is_listed_with_its_error(panel_kernel):
    out = panel_kernel.run("%%task --bg --name broken\nraise ValueError('bad batch')")
    assert out.status == "ok", out.error_text
    ended = panel_kernel.eventual_value(
        "p.ended.value", "it listed as ended", lambda v: "broken" in v
    )
    assert "failed" in ended and "ValueError: bad batch" in ended


def test_hints_are_one_per_cell_in_requests_people_write(panel_kernel):
    for _ in range(2):
        out = panel_kernel.run("%%task --memory 4Gi --name tiny\nsmall = 1")
        assert out.status == "ok", out.error_text
    hints = panel_kernel.eventual_value("p.hints.value", "a hint for it", lambda v: "tiny" in v)
    assert hints.count("<li>tiny asked for 4 GiB") == 1
    assert "--memory 256Mi" in hints


def test_closed_panel_stops_updating(panel_kernel):
    workers_id = panel_kernel.value("p.workers.model_id")
    out = panel_kernel.run(
        "import ipywidgets\n"
        "p.close()\n"
        "p._thread.is_alive(), p.feed.closed, p.workers.comm, p.widget.comm"
    )
    assert out.result == "(False, True, None, None)", out.error_text
    msg_id = panel_kernel.start("%%task --gpu 1\nimport time; time.sleep(1.5); slept = True")
    updates = []
    iopub_until_idle(panel_kernel, msg_id, lambda m: updates.append(state_updates(m, workers_id)))
    assert [u for u in updates if u is not None] == []
    assert panel_kernel.value("slept") is True
