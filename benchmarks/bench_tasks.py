"""A decorated task call + result against raw ``client.submit(...).result()`` (issue 2)."""

from __future__ import annotations

import time

N_CALLS = 1000


def inc(x: int) -> int:
    return x + 1


def _time(fn, n: int) -> float:
    started = time.perf_counter()
    for i in range(n):
        fn(i)
    return time.perf_counter() - started


def run() -> list[dict]:
    from distributed import Client, LocalCluster

    from taskcell import Resources, task

    decorated = task(resources=Resources(cpu=1))(inc)
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        raw = lambda i: client.submit(inc, i, pure=False).result()  # noqa: E731
        ours = lambda i: decorated(i).result()  # noqa: E731
        _time(raw, 50), _time(ours, 50)  # warm both paths
        rounds = [(_time(raw, N_CALLS // 4), _time(ours, N_CALLS // 4)) for _ in range(4)]
    raw_s = sum(r for r, _ in rounds)
    ours_s = sum(o for _, o in rounds)
    return [
        {
            "benchmark": f"decorated task call + result, {N_CALLS} trivial calls",
            "taskcell_s": ours_s,
            "baseline_s": raw_s,
            "ratio": ours_s / raw_s,
            "note": "raw: client.submit(f, pure=False).result(); interleaved rounds, same cluster",
        }
    ]
