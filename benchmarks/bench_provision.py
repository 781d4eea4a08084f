"""From a request no live worker meets to its task running on a pool's new worker (issue 14).

A scheduler process with one small worker and a local pool of one-thread "A100" workers.
``taskcell_s``: a decorated task asking ``gpu="A100:1"`` is called, taskcell finds no live worker
for it, starts one of the pool's, and the task starts there. ``baseline_s``: the same worker
started by hand (the same ``dask worker`` command line) and the task submitted with raw
``client.submit(..., resources=...)`` at once. Both end when the task starts on the new worker;
both include the worker's start-up, which dominates. Rounds alternate; each waits for the
previous worker to be gone.
"""

from __future__ import annotations

import socket
import statistics
import subprocess
import sys
import time

ROUNDS = 4
SHAPE = {"cpu": 1, "memory": "1Gi", "gpu": "A100:2"}


def started_at() -> float:
    """When the task began, on the worker's clock (the same machine's)."""
    return time.time()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(*argv: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def _wait_for(condition, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)


def _workers(client) -> int:
    return len(client.scheduler_info(n_workers=-1)["workers"])


def _ours(client, task) -> float:
    asked = time.time()
    began = task().result()
    _wait_for(lambda: _workers(client) == 1, "the pool's worker to retire")
    return began - asked


def _by_hand(client, pool, address: str) -> float:
    from taskcell.cluster.launch import LocalWorker

    argv = LocalWorker(address, "by-hand", pool).argv
    asked = time.time()
    worker = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    future = client.submit(started_at, resources={"GPU": 1, "GPU-A100": 1}, pure=False)
    began = future.result()
    del future
    client.retire_workers(names=["by-hand"], close_workers=True)
    worker.wait(60)
    _wait_for(lambda: _workers(client) == 1, "the hand-started worker to leave")
    return began - asked


def run() -> list[dict]:
    """Rows ``{"benchmark", "taskcell_s", "baseline_s", "ratio", "note"}``."""
    import dask
    from distributed import Client

    from taskcell.cluster import provision
    from taskcell.cluster.pools import parse_pools
    from taskcell.spec import Resources
    from taskcell.tasks import Task

    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [_start("distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port))]
    try:
        procs.append(_start("distributed.cli.dask_worker", address, "--nthreads", "1"))
        pools = {"a100x2": {"shape": SHAPE, "idle-timeout": "0.2s"}}
        with (
            dask.config.set({"scheduler-address": address, "taskcell.pools": pools}),
            Client(address, timeout=60) as client,
        ):
            client.wait_for_workers(1, timeout=60)
            (pool,) = parse_pools(pools)
            task = Task(started_at, Resources(gpu="A100:1"))
            _ours(client, task), _by_hand(client, pool, address)  # warm both paths
            rounds = [(_ours(client, task), _by_hand(client, pool, address)) for _ in range(ROUNDS)]
            provision.close_all()
    finally:
        for proc in reversed(procs):
            proc.terminate()
            proc.wait(30)
    ours = statistics.median(o for o, _ in rounds)
    raw = statistics.median(r for _, r in rounds)
    return [
        {
            "benchmark": "unmet request to its task running on a new local pool worker",
            "taskcell_s": ours,
            "baseline_s": raw,
            "ratio": ours / raw,
            "note": (
                f"median of {ROUNDS} alternating rounds; raw: the same `dask worker` command "
                "started by hand and client.submit(resources=) at once; both include the "
                "worker's start-up"
            ),
        }
    ]
