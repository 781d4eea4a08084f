"""The provisioner's rules, decided from plain facts with no cluster: packing claims into a
pool's workers, ``max-workers``, workers on their way, connecting with or without the pool's
shape, failures, leaving, idle retirement and the sidebar's requests, each with its reason."""

from __future__ import annotations

import pytest

from taskcell.cluster.pools import Pool, parse_pools
from taskcell.cluster.provision_core import (
    Claim,
    Decision,
    Monotonic,
    Seen,
    Worker,
    decide,
)

NOW = Monotonic(1000.0)
ONE_A100 = {"GPU": 1, "GPU-A100": 1}


def a100x2(**entry: object) -> Pool:
    """Workers of 2 cores, 4 GiB and two A100s; ``entry`` sets max-workers and timeouts."""
    shape = {"cpu": 2, "memory": "4Gi", "gpu": "A100:2"}
    fields = {"idle-timeout": "60s", "start-timeout": "600s", **entry}
    (pool,) = parse_pools({"a100x2": {"shape": shape, **fields}})
    return pool


def worker(name: str, state: str = "starting", **fields: object) -> Worker:
    fields.setdefault("asked_at", Monotonic(NOW - 10))
    fields.setdefault("since", fields["asked_at"])
    return Worker(name=name, pool="a100x2", state=state, **fields)  # type: ignore[arg-type]


def run(
    pool: Pool,
    claims: list[Claim] = (),  # type: ignore[assignment]
    workers: list[Worker] = (),  # type: ignore[assignment]
    seen: dict[str, Seen] | None = None,
    asked: dict[str, int] | None = None,
    now: float = NOW,
) -> Decision:
    return decide(
        claims=claims,
        workers=workers,
        seen=seen or {},
        pools={pool.name: pool},
        asked=asked or {},
        now=Monotonic(now),
    )


def claims(n: int, resources: dict = ONE_A100, **fields: bool) -> list[Claim]:
    return [Claim(pool="a100x2", resources=resources, **fields) for _ in range(n)]


def said(decision: Decision) -> list[tuple[str, str | None, str]]:
    return [(e.action, e.worker, e.why) for e in decision.log]


# -- starting: packing, workers on their way, max-workers ------------------------------------


@pytest.mark.parametrize(
    ("waiting", "resources", "started"),
    [
        (1, ONE_A100, 1),
        (2, ONE_A100, 1),  # two one-GPU tasks share a two-GPU worker
        (3, ONE_A100, 2),
        (3, {"GPU": 2, "GPU-A100": 2}, 3),
        (4, {"CPU": 1}, 2),  # two cores: two one-core tasks at once
        (0, ONE_A100, 0),
    ],
    ids=["one", "two-share", "three", "three-whole", "by-cores", "none"],
)
def test_claims_are_packed_into_as_few_workers_as_run_them_at_once(waiting, resources, started):
    decision = run(a100x2(**{"max-workers": 5}), claims(waiting, resources))
    assert decision.start == ("a100x2",) * started
    assert decision.retire == decision.stop == decision.failed == ()


def test_no_more_start_than_max_workers_counting_those_up():
    pool = a100x2(**{"max-workers": 3})
    decision = run(pool, claims(4, {"GPU": 2, "GPU-A100": 2}))
    assert decision.start == ("a100x2",) * 3
    busy = Seen(address="tcp://w:1", resources=pool.resources, busy=True)
    up = [worker("a-1", "running", address="tcp://w:1"), worker("a-2", "retiring")]
    decision = run(pool, claims(4, {"GPU": 2, "GPU-A100": 2}), up, seen={"a-1": busy})
    assert decision.start == ("a100x2",)  # 3 allowed, 2 up


def test_workers_starting_or_idle_take_the_claims_before_new_ones_start():
    pool = a100x2(**{"max-workers": 5})
    idle = Seen(address="tcp://w:1", resources=pool.resources, busy=False)
    on_their_way = [worker("a-1"), worker("a-2", "running", address="tcp://w:1")]
    decision = run(pool, claims(5), on_their_way, seen={"a-2": idle})
    assert decision.start == ("a100x2",)  # 5 tasks need 3 workers; 2 are on their way
    # Claims already on a worker, or whose pool's worker failed, need nothing more.
    assert run(pool, claims(2, placed=True) + claims(2, failed=True)).start == ()


# -- what the scheduler says of a starting or running worker ----------------------------------


def test_a_worker_that_connects_with_its_shape_runs_idle_until_busy():
    pool = a100x2()
    seen = {"a-1": Seen(address="tcp://w:1", resources=pool.resources, busy=False)}
    decision = run(pool, [], [worker("a-1", started="pid 42")], seen)
    (w,) = decision.workers
    assert (w.state, w.address, w.since, w.idle_since) == ("running", "tcp://w:1", NOW, NOW)
    assert said(decision) == [("connect", "a-1", "connected as tcp://w:1")]
    busy = {"a-1": Seen(address="tcp://w:1", resources=pool.resources, busy=True)}
    (w,) = run(pool, [], [w], busy, now=NOW + 5).workers
    assert (w.state, w.since, w.idle_since) == ("running", NOW, None)


def test_a_worker_without_its_pools_shape_fails_the_waiting_claims_and_retires():
    pool = a100x2(**{"max-workers": 2})
    short = {"CPU": 2, "MEMORY": 4 << 30, "GPU": 1, "GPU-A100": 1}
    seen = {"a-1": Seen(address="tcp://w:1", resources=short, busy=False)}
    decision = run(pool, claims(3), [worker("a-1", started="pid 42")], seen)
    (w,) = decision.workers
    why = "it advertises GPU=1, GPU-A100=1, its pool's shape GPU=2, GPU-A100=2"
    assert (w.state, w.address) == ("failed", "tcp://w:1")
    assert w.error == f"the worker of pool a100x2 (pid 42) failed to start: {why}"
    assert decision.failed == (w,) and decision.retire == ("a-1",)
    assert decision.start == ()  # its claims fail with it: nothing starts for them
    assert said(decision) == [("fail", "a-1", why)]


@pytest.mark.parametrize(
    ("fields", "now", "why"),
    [
        ({"ended": "its process exited with status 2"}, NOW, "its process exited with status 2"),
        ({}, NOW + 591, "it did not connect within 600 s (start-timeout)"),
    ],
    ids=["ended", "timed-out"],
)
def test_a_worker_that_never_connects_fails_and_is_stopped(fields, now, why):
    decision = run(a100x2(), claims(1), [worker("a-1", **fields)], now=now)
    (w,) = decision.workers
    assert (w.state, w.error, w.since) == (
        "failed",
        f"the worker of pool a100x2 failed to start: {why}",
        now,
    )
    assert decision.stop == ("a-1",) and decision.retire == () and decision.start == ()


def test_a_worker_still_in_its_start_timeout_goes_on_starting():
    decision = run(a100x2(), claims(1), [worker("a-1")], now=NOW + 589)
    assert decision.workers == (worker("a-1"),) and decision.start == () and decision.log == ()


def test_a_running_worker_the_scheduler_no_longer_lists_has_retired():
    decision = run(a100x2(), [], [worker("a-1", "running", address="tcp://w:1")])
    (w,) = decision.workers
    assert (w.state, w.error, w.idle_since) == ("retired", "it left the scheduler", None)
    assert decision.stop == ("a-1",) and decision.failed == ()


# -- idle retirement --------------------------------------------------------------------------


def idle_for(seconds: float, pool: Pool) -> tuple[Worker, dict[str, Seen]]:
    w = worker("a-1", "running", address="tcp://w:1", idle_since=Monotonic(NOW - seconds))
    return w, {"a-1": Seen(address="tcp://w:1", resources=pool.resources, busy=False)}


def test_a_worker_idle_for_its_pools_idle_timeout_retires():
    pool = a100x2()
    w, seen = idle_for(60, pool)
    decision = run(pool, [], [w], seen)
    assert [x.state for x in decision.workers] == ["retiring"]
    assert decision.retire == ("a-1",)
    assert said(decision) == [("retire", "a-1", "idle for 60 s (idle-timeout)")]
    w, seen = idle_for(59, pool)
    assert run(pool, [], [w], seen).retire == ()


def test_an_idle_worker_stays_while_a_claim_waits_for_its_pool():
    pool = a100x2()
    w, seen = idle_for(3600, pool)
    decision = run(pool, claims(1), [w], seen)  # the task is on its way to it
    assert decision.retire == () and decision.start == ()


# -- the sidebar's requests -------------------------------------------------------------------


def test_the_sidebar_starts_one_worker_per_request_within_max_workers():
    pool = a100x2(**{"max-workers": 2})
    decision = run(pool, asked={"a100x2": 1})
    assert decision.start == ("a100x2",)
    assert said(decision) == [
        ("start", None, "1 worker(s): 0 task(s) wait, 0 worker(s) on their way, 1 asked from "
         "the sidebar"),
    ]  # fmt: skip
    decision = run(pool, claims(1), [worker("a-1")], asked={"a100x2": 2})
    assert decision.start == ("a100x2",)  # the claim rides the starting one; one more fits
    assert said(decision)[-1] == (
        "decline",
        None,
        "1 worker(s) asked from the sidebar: 1 of max-workers 2 are up",
    )


def test_a_request_for_a_pool_the_kernel_does_not_have_is_declined():
    decision = run(a100x2(), asked={"h100": 1})
    assert decision.start == ()
    assert said(decision) == [("decline", None, "no pool of this name is configured in the kernel")]
