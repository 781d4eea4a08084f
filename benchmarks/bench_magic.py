"""``%%task`` against the raw Dask equivalent on the same LocalCluster (issue 3).

The cells run through IPython's own ``run_cell_magic`` in this process, as a kernel runs them.
"""

from __future__ import annotations

import resource
import statistics
import time

N_CELLS = 200
N_LINES = 10_000
MIB = 2**20


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def _seconds(fn, n: int = 1) -> float:
    started = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - started) / n


def _print_per_event(topic: str) -> None:
    """What forwarding each ``print`` as its own scheduler event costs (taskcell before 0.2)."""
    from distributed import get_worker

    worker = get_worker()
    for i in range(N_LINES):
        worker.log_event(topic, {"kind": "stream", "name": "stdout", "text": f"line {i}\n"})


def _printing(client, cell) -> dict:
    """A cell printing N_LINES lines, against the same lines sent one event each."""
    import contextlib
    import io

    from taskcell.cluster import connect

    topic = connect.current_client().id
    before = len(client.get_events(topic))
    with contextlib.redirect_stdout(io.StringIO()) as shown:
        ours_s = _seconds(lambda: cell(f"for i in range({N_LINES}):\n    print('line', i)"))
    assert shown.getvalue().count("\n") >= N_LINES
    events = len(client.get_events(topic)) - before - 2  # less 'started' and 'finished'

    received = []
    client.subscribe_topic("bench-per-line", received.append)

    def raw() -> None:
        client.submit(_print_per_event, "bench-per-line", pure=False).result()
        while len(received) < N_LINES:
            time.sleep(0.001)

    raw_s = _seconds(raw)
    return {
        "benchmark": f"%%task cell printing {N_LINES:,} lines",
        "taskcell_s": ours_s,
        "baseline_s": raw_s,
        "ratio": ours_s / raw_s,
        "note": (
            f"{events} scheduler events for {N_LINES:,} lines (batched like ipykernel's "
            f"output); raw: a task sending one event per line, {N_LINES:,} events"
        ),
    }


# What each of the two kinds of fresh process runs: an IPython shell made first (not timed),
# then the clock from `%load_ext taskcell` to the first cell's result, and a warm cell.
_FIRST_CELL = """
import os, sys, time
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
pause = float(sys.argv[1])
started = time.perf_counter()
shell.run_cell("%load_ext taskcell")
time.sleep(pause)
before = time.perf_counter()
assert shell.run_cell("%%task\\ny = 1").success
first = time.perf_counter()
assert shell.run_cell("%%task\\ny = 2").success
print("TIMES", first - started, first - before, time.perf_counter() - first)
from taskcell.cluster import connect
connect.close()
"""
_RAW_FIRST = """
import time
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
started = time.perf_counter()
from distributed import Client, LocalCluster
client = Client(LocalCluster(n_workers=1))
client.submit(int, 1, pure=False).result()
print("TIMES", time.perf_counter() - started)
client.close()
client.cluster.close()
"""


def _fresh(code: str, *args: str) -> list[float]:
    """Run ``code`` in a fresh interpreter with no cluster configured; the times it prints."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    done = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=True
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("TIMES"))
    return [float(x) for x in line.split()[1:]]


def _first_cell(rounds: int = 3, pause: float = 5.0) -> list[dict]:
    """``%load_ext taskcell`` to the first cell's result, against a raw LocalCluster + submit,
    in fresh processes of the same kind, alternating; and a first cell run ``pause`` seconds
    after loading, against a warm cell of the same kernel."""
    ours, raw, later, warm = [], [], [], []
    for _ in range(rounds):
        total, _, _ = _fresh(_FIRST_CELL, "0")
        ours.append(total)
        raw.append(_fresh(_RAW_FIRST)[0])
        _, first, again = _fresh(_FIRST_CELL, str(pause))
        later.append(first)
        warm.append(again)
    ours_s, raw_s = statistics.median(ours), statistics.median(raw)
    later_s, warm_s = statistics.median(later), statistics.median(warm)
    return [
        {
            "benchmark": "%load_ext taskcell to the first %%task result",
            "taskcell_s": ours_s,
            "baseline_s": raw_s,
            "ratio": ours_s / raw_s,
            "note": (
                f"median of {rounds} alternating fresh processes, the cell right after loading "
                f"(target <= 1.0x); raw: Client(LocalCluster(n_workers=1)) + one submit"
            ),
        },
        {
            "benchmark": f"first %%task cell {pause:g} s after %load_ext",
            "taskcell_s": later_s,
            "baseline_s": warm_s,
            "ratio": later_s / warm_s,
            "note": (
                f"median of {rounds}; baseline: the next, warm cell of the same kernel; the "
                f"embedded cluster started in the background after %load_ext"
            ),
        },
    ]


def run() -> list[dict]:
    import numpy as np
    from distributed import Client, LocalCluster, wait
    from IPython.core.interactiveshell import InteractiveShell

    rows = _first_cell()
    with (
        LocalCluster(n_workers=1, threads_per_worker=2, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        shell = InteractiveShell.instance()
        shell.run_line_magic("load_ext", "taskcell")
        shell.run_line_magic("task_cluster", cluster.scheduler_address)
        cell = lambda body, line="": shell.run_cell_magic("task", line, body)  # noqa: E731

        raw = lambda: client.submit(int, 1, pure=False).result()  # noqa: E731
        ours = lambda: cell("y = 1")  # noqa: E731
        _seconds(raw, 20), _seconds(ours, 20)
        rounds = [(_seconds(ours, N_CELLS // 4), _seconds(raw, N_CELLS // 4)) for _ in range(4)]
        ours_s = statistics.mean(o for o, _ in rounds)
        raw_s = statistics.mean(r for _, r in rounds)
        rows.append(
            {
                "benchmark": "trivial %%task cell round trip",
                "taskcell_s": ours_s,
                "baseline_s": raw_s,
                "ratio": ours_s / raw_s,
                "note": (
                    f"mean of {N_CELLS} in 4 interleaved rounds; "
                    f"{1000 * (ours_s - raw_s):.1f} ms added per cell"
                ),
            }
        )

        rows.append(_printing(client, cell))

        shell.user_ns["np"] = np
        arr = shell.user_ns["arr"] = np.ones(512 * MIB // 8)
        peak_before = _peak_rss()
        cell("n = len(arr)")
        growth = max(0, _peak_rss() - peak_before)
        raw = lambda: client.submit(len, client.scatter(arr), pure=False).result()  # noqa: E731
        raw()
        rounds = [(_seconds(lambda: cell("n = len(arr)")), _seconds(raw)) for _ in range(3)]
        ours_s = statistics.median(o for o, _ in rounds)
        raw_s = statistics.median(r for _, r in rounds)
        rows.append(
            {
                "benchmark": "512 MiB numpy input to a %%task cell",
                "taskcell_s": ours_s,
                "baseline_s": raw_s,
                "ratio": ours_s / raw_s,
                "note": (
                    f"median of 3 warm rounds; raw: client.scatter + submit; kernel peak grew "
                    f"{growth / MIB:.0f} MiB on the first run"
                ),
            }
        )
        shell.user_ns.pop("arr")

        rss_before = _rss()
        made_s = _seconds(lambda: cell("big = np.ones(2**27)"))
        kept = _rss() - rss_before
        big = shell.user_ns["big"]
        assert type(big).__name__ == "RemoteValue", type(big)
        remote = client.submit(np.ones, 2**27, pure=False)
        wait(remote)
        use = lambda: cell("total = float(big.sum())")  # noqa: E731
        raw = lambda: client.submit(np.sum, remote, pure=False).result()  # noqa: E731
        first = (_seconds(use), _seconds(raw))  # the very next cell, with no pause between
        rounds = [(_seconds(use), _seconds(raw)) for _ in "abc"]
        moved = _rss() - rss_before
        for what, (ours_s, raw_s), note in [
            ("next cell uses a 1 GiB result kept remote", first, "at once after it was made"),
            (
                "later cells use the same 1 GiB remote result",
                (statistics.median(o for o, _ in rounds), statistics.median(r for _, r in rounds)),
                "median of 3",
            ),
        ]:
            rows.append(
                {
                    "benchmark": what,
                    "taskcell_s": ours_s,
                    "baseline_s": raw_s,
                    "ratio": ours_s / raw_s,
                    "note": (
                        f"{note}; making it took {made_s:.2f} s; kernel memory grew "
                        f"{kept / MIB:.0f} MiB, {moved / MIB:.0f} MiB after 4 more cells; "
                        "raw: submit(np.sum, future)"
                    ),
                }
            )
    return rows
