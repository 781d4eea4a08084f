"""The planner's numbers against the truth, on the workload corpus (issues 19 and 27).

The corpus (``benchmarks/planner_corpus.py``) comes in two halves: ``TUNING``, which the
planner's factors and rules were read off, and ``VALIDATION``, which they were never tuned
on. Every figure is reported for each half apart. For each cell this measures:

- its true peak: the cell's code run alone in a fresh interpreter under GNU ``time``;
- the peak taskcell records for it, run as a ``%%task`` cell on a real worker process after
  the cells before it (a warm cell process), as the ratio recorded / true;
- what ``%%task auto`` chooses on a fine ladder of user presets (256Mi, 512Mi, 1Gi, 2Gi, 4Gi,
  8Gi) with no past run (the planner's estimate from the cell's code and a sample of its
  file), and after one run of the same cell on a quarter of the input (its peak scaled);
- the same choices by the rules before issue 19, as the baseline: the default profile's 4x of
  the input's size on disk, and the highest past peak with a quarter added.

A choice fits when its rung holds the true peak; it is *n* steps too big when a rung *n*
steps lower would have. Targets: at least 90% fit, never more than one step too big, recorded
peaks within 10% of the truth. Rows carry seconds where there are seconds (the planner's time
to decide for a cell, against reading its file's size as the rule before did); the ratio of
the peak row is the median recorded / true.
"""

from __future__ import annotations

import math
import os
import socket
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager

from benchmarks import planner_corpus as corpus

MiB = 1 << 20
RUNGS = ("256Mi", "512Mi", "1Gi", "2Gi", "4Gi", "8Gi")


def _ladder() -> dict:
    from taskcell.spec import Resources

    return {f"m{q}": Resources(memory=q) for q in RUNGS}


def _rung(nbytes: float) -> int:
    """The index of the smallest rung holding ``nbytes`` (past the top: one more)."""
    sizes = [int(q[:-2]) * (MiB if q.endswith("Mi") else 1024 * MiB) for q in RUNGS]
    return next((i for i, s in enumerate(sizes) if s >= nbytes), len(sizes))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _cluster() -> Iterator:
    """A scheduler and one single-threaded worker, as separate processes."""
    from distributed import Client

    address = f"tcp://127.0.0.1:{_free_port()}"
    host, port = address.removeprefix("tcp://").split(":")
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    scheduler = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", host, "--port", port,
         "--no-dashboard"], **quiet,
    )  # fmt: skip
    worker = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
         "--no-dashboard"], **quiet,
    )  # fmt: skip
    try:
        with Client(address, timeout=60) as client:
            client.wait_for_workers(1, timeout=60)
            yield client
    finally:
        for proc in (worker, scheduler):
            proc.terminate()
            proc.wait()


def _run(client, name: str, code: str) -> object:
    """Run ``code`` as a ``%%task`` cell, noting what it reads as ``%%task auto`` does; its
    task record. The names it binds are deleted at its end, so that no result (a GiB of
    words) travels to the worker: its peak is the same."""
    from taskcell.planner.auto import note_input
    from taskcell.planner.estimate import cell_input
    from taskcell.runner.analysis import analyze_cell
    from taskcell.runner.cell_task import CellSource, Display
    from taskcell.runner.execution import run_cell_task
    from taskcell.spec import Resources

    body = textwrap.dedent(code).strip("\n") + "\n"
    body += f"del {', '.join(analyze_cell(code).outputs)}\n"
    note_input(body, cell_input(code, {}).size)
    history: list = []
    quiet = Display(stream=lambda *_: None, display=lambda *_: None, status=lambda _: None)
    source = CellSource(body=body, shown=body, filename=f"<{name}>")
    run_cell_task(client, source, {}, Resources(cpu=1), name=name, history=history, out=quiet)
    return history[0]


def _measure(client, workloads: list) -> list[dict]:
    """Each cell's truth, recorded peak and the choices with and without a past run."""
    from taskcell.planner.auto import auto_preset
    from taskcell.planner.estimate import cell_input, estimate_memory
    from taskcell.planner.rightsize import memory_needed

    ladder = _ladder()
    full, small = corpus.data(), corpus.data(small=True)
    found = []
    for w in workloads:
        code, first = corpus.cell(w, full), corpus.cell(w, small)
        started = time.perf_counter()
        true = corpus.alone(code)
        alone_s = time.perf_counter() - started
        started = time.perf_counter()
        recorded = _run(client, w.name, code).usage.peak_memory
        ours_s = time.perf_counter() - started
        started = time.perf_counter()
        estimate = estimate_memory(cell_input(code, {}))
        planned = auto_preset([], name=w.name, estimate=estimate, presets=ladder)
        plan_s = time.perf_counter() - started
        started = time.perf_counter()
        on_disk = os.path.getsize(full / w.data)  # the old planner's input size
        sum_s = time.perf_counter() - started
        past = _run(client, w.name, first)
        learned = auto_preset([past], name=w.name, estimate=estimate, presets=ladder)
        old_learned = memory_needed(past.usage.peak_memory)
        found.append(
            {
                "name": w.name,
                "true": true,
                "recorded": recorded,
                "planned": _rung(planned.request.memory.request),
                "learned": _rung(learned.request.memory.request),
                "old_planned": _rung(4 * on_disk),
                "old_learned": _rung(old_learned),
                "need": _rung(true),
                "alone_s": alone_s,
                "ours_s": ours_s,
                "plan_s": plan_s,
                "sum_s": sum_s,
            }
        )
        print(
            f"{w.name:24s} true {true / MiB:7.0f} MiB  recorded x{recorded / true:4.2f}  "
            f"rung needed {found[-1]['need']} planner {found[-1]['planned']} learned "
            f"{found[-1]['learned']} (old rules {found[-1]['old_planned']}, "
            f"{found[-1]['old_learned']})",
            flush=True,
        )
    return found


def _fit(found: list[dict], key: str) -> tuple[int, int, int, int]:
    """How many fit, how many are too big, the most steps too big and the most too small."""
    steps = [f[key] - f["need"] for f in found]
    return sum(s >= 0 for s in steps), sum(s > 0 for s in steps), max(steps), -min(steps)


def _choice_row(found: list[dict], key: str, old: str, what: str) -> dict:
    n = len(found)
    seconds = (
        statistics.mean(f["plan_s"] for f in found),
        statistics.mean(f["sum_s"] for f in found),
    )
    fits, big, worst, short = _fit(found, key)
    old_fits, _, old_worst, old_short = _fit(found, old)
    misses = [f["name"] for f in found if f[key] < f["need"]]
    return {
        "benchmark": f"%%task auto on the fine ladder, {what} ({n} cells)",
        "taskcell_s": seconds[0],
        "baseline_s": seconds[1],
        "ratio": seconds[0] / seconds[1],
        "note": (
            f"fit {fits}/{n} ({100 * fits / n:.0f}%, target >= 90%), {big} a step too big, "
            f"largest step too big {worst} (target <= 1), largest step too small {max(short, 0)}"
            + (f"; misses: {', '.join(misses)}" if misses else "")
            + f". Rule before issue 19: fit {old_fits}/{n}, largest step too big {old_worst}, "
            f"too small {max(old_short, 0)}"
        ),
    }


def _peak_row(found: list[dict], half: str) -> dict:
    ratios = [f["recorded"] / f["true"] for f in found]
    big = [f for f in found if f["true"] > 100 * MiB]
    within = sum(0.9 <= f["recorded"] / f["true"] <= 1.1 for f in big)
    worst = max(found, key=lambda f: abs(math.log(f["recorded"] / f["true"])))
    return {
        "benchmark": f"recorded peak / the same code alone, {half} ({len(found)} cells)",
        "taskcell_s": sum(f["ours_s"] for f in found),
        "baseline_s": sum(f["alone_s"] for f in found),
        "ratio": statistics.median(ratios),
        "note": (
            f"ratio: median recorded/true peak (min {min(ratios):.2f}, max "
            f"{max(ratios):.2f}; {within}/{len(big)} cells over 100 MiB within 10%, target "
            f"all; furthest: {worst['name']}). Seconds: all cells as %%task on one warm "
            "worker process, against each alone under GNU time"
        ),
    }


def run() -> list[dict]:
    rows = []
    with _cluster() as client:
        for half, workloads in (("tuning", corpus.TUNING), ("validation", corpus.VALIDATION)):
            found = _measure(client, workloads)
            rows += [
                _peak_row(found, half),
                _choice_row(found, "planned", "old_planned", f"no past run, {half}"),
                _choice_row(found, "learned", "old_learned", f"after a run on a quarter, {half}"),
            ]
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
