"""``%tasks``: the table of this kernel's tasks, from records, and in a real kernel."""

from __future__ import annotations

import re
import textwrap

import pytest

from taskcell.kernel_magics.task_table import (
    NO_TASKS,
    TaskTable,
    hints_by_key,
    short_worker,
    task_row,
    wall_text,
)
from taskcell.planner.rightsize import review
from taskcell.runner.history import TaskHistory, TaskRecord
from taskcell.runner.job import Usage
from taskcell.spec import BUILTIN_PRESETS, Resources

GiB = 1 << 30
KEY = "cell-3-" + "0123456789abcdef" * 2  # as long as the runner's keys


def finished(cell, request, *, wall=2.0, cores=1.0, peak=GiB, gpu=None, key=KEY):
    r = TaskRecord(key=key, cell=cell, request=request, worker="tcp://10.0.0.5:40123")
    r.started, r.ended, r.state = 100.0, 100.0 + wall + 0.4, "finished"  # 0.4 s of transfer
    r.usage = Usage(wall=wall, cpu=cores * wall, peak_memory=peak, gpu_memory=gpu)
    return r


def failed(cell, request, *, key="failed-key"):
    r = TaskRecord(key=key, cell=cell, request=request, worker="tcp://10.0.0.6:40000")
    r.started, r.ended, r.state, r.error = 100.0, 103.25, "error", "ValueError: bad batch"
    return r


def queued(cell, request, *, key="queued-key"):
    return TaskRecord(key=key, cell=cell, request=request)


def table(*records):
    return TaskTable(records, hints_by_key(review(records, BUILTIN_PRESETS)))


def test_a_finished_row_reads_as_the_cell_said():
    r = finished("train", Resources(cpu=2, memory="8Gi", gpu="A100:2"), wall=1.234, cores=1.5)
    row = task_row(r)
    assert (row.name, row.request, row.worker, row.state) == (
        "train",
        "--cpu 2 --memory 8Gi --gpu A100:2",
        "10.0.0.5:40123",
        "finished",
    )
    # the cell said "ran on ... in 1.23 s": its measured run, not the 1.63 s with the transfer
    assert (row.wall, row.cores, row.peak) == ("1.23 s", "1.5", "1 GiB")
    assert f"{r.usage.wall:.2f} s" == row.wall
    assert ("key", KEY) in row.details
    assert ("request", "Resources(cpu=2, memory='8Gi', gpu='A100:2')") in row.details


@pytest.mark.parametrize(
    ("record", "wall"),
    [
        (finished("a", Resources(), wall=0.005), "0.01 s"),
        (failed("b", Resources()), "3.2 s"),  # as "failed ... after 3.2 s"
        (queued("c", Resources()), ""),
    ],
    ids=["finished-usage-wall", "failed-elapsed", "queued-empty"],
)
def test_wall_time(record, wall):
    assert wall_text(record) == wall


def test_the_frame_wall_agrees_with_the_table():
    r = finished("train", Resources(cpu=1), wall=1.5)
    assert TaskHistory([r]).frame().iloc[0]["wall_s"] == 1.5
    assert r.wall() == 1.5 and r.elapsed() == pytest.approx(1.9)
    assert failed("b", Resources()).wall() == pytest.approx(3.25)
    assert queued("c", Resources()).wall() is None


@pytest.mark.parametrize(
    ("worker", "shown"),
    [
        ("tcp://127.0.0.1:40123", "127.0.0.1:40123"),
        ("this kernel (--graph)", "this kernel (--graph)"),
        (None, ""),
    ],
    ids=["address", "name", "none"],
)
def test_short_worker(worker, shown):
    assert short_worker(worker) == shown


def test_html_is_compact_with_the_record_a_click_away():
    over = finished("big", Resources(cpu=32, memory="128Gi"), peak=3 * GiB, cores=1.5, gpu=GiB)
    t = table(over, failed("boom", Resources(memory="1Gi")), queued("later", Resources()))
    page = t._repr_html_()
    heading = re.search(r"<thead>(.*)</thead>", page).group(1)
    assert re.findall(r"<th>(\w+)</th>", heading) == [
        "name",
        "request",
        "worker",
        "state",
        "wall",
        "cores",
        "peak",
        "hint",
    ]
    rows = re.findall(r"<tr>(.*?)</tr>", page.split("<tbody>")[1])
    assert len(rows) == 3
    assert not re.search(r"\bnan\b|\bNone\b", page, re.IGNORECASE)
    record, cells = rows[0].split("</details>")
    # the row: the name, the request as options, the hint in a few words; the key only inside
    assert "<summary>big</summary>" in record and "<code>--cpu 32 --memory 128Gi</code>" in cells
    assert "memory over-requested, cpu over-requested: %%task small_task" in cells
    assert KEY not in cells and f"<dd>{KEY}</dd>" in record
    assert "<dt>gpu memory</dt><dd>1 GiB</dd>" in record
    assert "peaked at 3 GiB" in record  # the whole hint
    assert "<dt>error</dt><dd>ValueError: bad batch</dd>" in rows[1]
    assert "<td>error</td>" in rows[1] and ">3.2 s</td>" in rows[1]
    # a queued task has empty cells, not NaN
    queued_cells = re.findall(r"<td[^>]*>(.*?)</td>", rows[2].split("</details>")[1])
    assert queued_cells == ["", "", "queued", "", "", "", ""]


def test_html_escapes_what_the_user_wrote():
    page = table(failed("<b>x</b>", Resources(), key="k")).rows[0]
    assert page.name == "<b>x</b>"
    assert "<b>x</b>" not in table(failed("<b>x</b>", Resources()))._repr_html_()


def test_text_is_aligned_for_a_terminal():
    t = table(finished("train", Resources(cpu=1), wall=2), queued("a-longer-name", Resources()))
    lines = repr(t).splitlines()
    assert lines[0].split() == [
        "name",
        "request",
        "worker",
        "state",
        "wall",
        "cores",
        "peak",
        "hint",
    ]
    assert lines[1].startswith("train          --cpu 1")
    assert lines[2].startswith("a-longer-name  ")
    assert lines[0].index("state") == lines[1].index("finished") == lines[2].index("queued")
    assert "2.00 s" in lines[1] and "nan" not in repr(t).lower()
    assert KEY not in repr(t)


def test_pretty_prints_the_text():
    from IPython.lib.pretty import pretty

    t = table(finished("train", Resources(cpu=1)))
    assert pretty(t) == repr(t)


def test_an_empty_kernel_says_so():
    t = TaskTable([], {})
    assert repr(t) == NO_TASKS and NO_TASKS in t._repr_html_()
    assert len(t) == 0 and list(t.frame.columns)[-1] == "hint"


def test_the_dataframe_is_still_there():
    over = finished("big", Resources(cpu=32, memory="128Gi"), peak=3 * GiB, cores=1.5)
    t = table(over, failed("boom", Resources()))
    frame = t.to_dataframe()
    assert list(frame.columns) == [*TaskHistory().frame().columns, "hint"]
    assert frame.iloc[0]["hint"].startswith("over-requested memory: %%task small_task")
    assert frame.iloc[0]["key"] == KEY and frame.iloc[0]["wall_s"] == 2.0
    # read as the DataFrame was, by code written when %tasks returned it
    assert tuple(t[t.cell == "boom"][["state", "error"]].iloc[-1]) == (
        "error",
        "ValueError: bad batch",
    )
    assert list(zip(t.cell, t.state, strict=True)) == [("big", "finished"), ("boom", "error")]
    assert len(t) == 2 and t.iloc[-1].request == "Resources()"
    with pytest.raises(AttributeError):
        t._repr_latex_  # noqa: B018  IPython's probes are not the frame's


def test_taskcell_tasks_frame_is_the_kernels_frame(monkeypatch):
    import taskcell
    from taskcell.runner import history

    records = history.TaskHistory([finished("train", Resources(cpu=1))])
    monkeypatch.setattr(history, "_KERNEL_HISTORY", records)
    frame = taskcell.tasks_frame()
    assert list(frame.cell) == ["train"] and "hint" in frame.columns


def cell(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


@pytest.mark.slow
def test_tasks_in_a_kernel_show_what_the_cells_said(kernel, module_dask):
    module_dask.worker("--nthreads", "2", "--resources", "process=1", name="table-worker")
    out = kernel.run(
        f"import distributed; distributed.Client({module_dask.address!r}).wait_for_workers(1)\n"
        f"%task_cluster {module_dask.address}"
    )
    assert out.status == "ok", out.error_text
    said = {}
    for name, options in [("first", "--cpu 1 --memory 1Gi"), ("second", "--resources process=1")]:
        ran = kernel.run(f"%%task --name {name} {options}\nvalue = {name!r}")
        assert ran.status == "ok", ran.error_text
        status = [d["text/plain"] for d in ran.displays if "ran on" in d.get("text/plain", "")]
        said[name] = re.search(r"ran on \S+ in ([\d.]+) s", status[-1]).group(1)
    shown = kernel.run("%tasks")
    assert shown.status == "ok", shown.error_text
    data = shown.of_type("execute_result")[0]["content"]["data"]
    page = data["text/html"]
    assert not re.search(r"\bnan\b", page, re.IGNORECASE)
    for name, request in [("first", "--cpu 1 --memory 1Gi"), ("second", "--resources process=1")]:
        (row,) = [r for r in re.findall(r"<tr>(.*?)</tr>", page) if f"<summary>{name}<" in r]
        assert f"<code>{request}</code>" in row
        assert f">{said[name]} s</td>" in row  # the wall the cell's own "ran in" showed
        assert "<td>finished</td>" in row
        assert name in data["text/plain"]
    # the DataFrame, both ways
    kernel.run("import taskcell")
    assert kernel.value("taskcell.tasks_frame().cell.tolist()[-2:]") == ["first", "second"]
    kernel.run("_t = %tasks")
    assert kernel.value("_t[_t.cell == 'second'].state.tolist()") == ["finished"]
