"""The provisioner's rules, decided from plain facts with no cluster: packing claims into a
pool's workers, ``max-workers``, workers on their way, connecting with or without the pool's
shape, failures, leaving, idle retirement, the sidebar's requests, what the provisioner tells
(a start failed, the scheduler kept a worker, a stop failed, the kernel closes), what is kept
of ended workers and what a claimed task waits for, each with its reason."""

from __future__ import annotations

import pytest

from taskcell.cluster.pools import Pool, parse_pools
from taskcell.cluster.provision_core import (
    ENDED_KEPT,
    Claim,
    Decision,
    Fact,
    Monotonic,
    Seen,
    Worker,
    decide,
    waiting,
)
from taskcell.cluster.waits import wait

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
    facts: list[Fact] = (),  # type: ignore[assignment]
) -> Decision:
    return decide(
        claims=claims,
        workers=workers,
        seen=seen or {},
        pools={pool.name: pool},
        asked=asked or {},
        now=Monotonic(now),
        tag="t",
        facts=facts,
    )


def claims(n: int, resources: dict = ONE_A100, **fields: bool) -> list[Claim]:
    return [Claim(pool="a100x2", resources=resources, **fields) for _ in range(n)]


def launched(decision: Decision) -> tuple[str, ...]:
    """The pool of each worker to start."""
    return tuple(w.pool for w in decision.launch)


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
    assert launched(decision) == ("a100x2",) * started
    assert decision.retire == decision.stop == decision.failed == ()


def test_no_more_start_than_max_workers_counting_those_up():
    pool = a100x2(**{"max-workers": 3})
    decision = run(pool, claims(4, {"GPU": 2, "GPU-A100": 2}))
    assert launched(decision) == ("a100x2",) * 3
    busy = Seen(address="tcp://w:1", resources=pool.resources, busy=True)
    up = [worker("a-1", "running", address="tcp://w:1"), worker("a-2", "retiring")]
    decision = run(pool, claims(4, {"GPU": 2, "GPU-A100": 2}), up, seen={"a-1": busy})
    assert launched(decision) == ("a100x2",)  # 3 allowed, 2 up


def test_workers_starting_or_idle_take_the_claims_before_new_ones_start():
    pool = a100x2(**{"max-workers": 5})
    idle = Seen(address="tcp://w:1", resources=pool.resources, busy=False)
    on_their_way = [worker("a-1"), worker("a-2", "running", address="tcp://w:1")]
    decision = run(pool, claims(5), on_their_way, seen={"a-2": idle})
    assert launched(decision) == ("a100x2",)  # 5 tasks need 3 workers; 2 are on their way
    # Claims already on a worker, or whose pool's worker failed, need nothing more.
    assert launched(run(pool, claims(2, placed=True) + claims(2, failed=True))) == ()


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
    assert launched(decision) == ()  # its claims fail with it: nothing starts for them
    assert said(decision) == [("fail", "a-1", why)]


@pytest.mark.parametrize(
    ("facts", "now", "why"),
    [
        (
            [Fact("start-failed", "a-1", "its process exited with status 2")],
            NOW,
            "its process exited with status 2",
        ),
        ([], NOW + 591, "it did not connect within 600 s (start-timeout)"),
    ],
    ids=["ended", "timed-out"],
)
def test_a_worker_that_never_connects_fails_and_is_stopped(facts, now, why):
    decision = run(a100x2(), claims(1), [worker("a-1")], now=now, facts=facts)
    (w,) = decision.workers
    assert (w.state, w.error, w.since) == (
        "failed",
        f"the worker of pool a100x2 failed to start: {why}",
        now,
    )
    assert decision.stop == ("a-1",) and decision.retire == () and launched(decision) == ()


def test_a_worker_still_in_its_start_timeout_goes_on_starting():
    decision = run(a100x2(), claims(1), [worker("a-1")], now=NOW + 589)
    assert decision.workers == (worker("a-1"),) and launched(decision) == () and decision.log == ()


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
    assert decision.retire == () and launched(decision) == ()


# -- the sidebar's requests -------------------------------------------------------------------


def test_the_sidebar_starts_one_worker_per_request_within_max_workers():
    pool = a100x2(**{"max-workers": 2})
    decision = run(pool, asked={"a100x2": 1})
    assert launched(decision) == ("a100x2",)
    assert said(decision) == [
        ("start", None, "1 worker(s): 0 task(s) wait, 0 worker(s) on their way, 1 asked from "
         "the sidebar"),
    ]  # fmt: skip
    decision = run(pool, claims(1), [worker("a-1")], asked={"a100x2": 2})
    assert launched(decision) == ("a100x2",)  # the claim rides the starting one; one more fits
    assert said(decision)[-1] == (
        "decline",
        None,
        "1 worker(s) asked from the sidebar: 1 of max-workers 2 are up",
    )


def test_a_request_for_a_pool_the_kernel_does_not_have_is_declined():
    decision = run(a100x2(), asked={"h100": 1})
    assert launched(decision) == ()
    assert said(decision) == [("decline", None, "no pool of this name is configured in the kernel")]


# -- what the provisioner tells: starts, retirements, stops, closing --------------------------


def test_a_start_that_fails_fails_the_worker_naming_what_was_started_and_stops_it():
    told = [Fact("started", "a-1", "pid 42"), Fact("start-failed", "a-1", "no such flag")]
    decision = run(a100x2(), claims(1), [worker("a-1")], facts=told)
    (w,) = decision.workers
    assert (w.state, w.started, w.since) == ("failed", "pid 42", NOW)
    assert w.error == "the worker of pool a100x2 (pid 42) failed to start: no such flag"
    assert decision.failed == (w,) and decision.stop == ("a-1",) and launched(decision) == ()
    assert said(decision) == [("fail", "a-1", "no such flag")]


def test_a_worker_the_scheduler_lists_connects_whatever_its_start_said():
    pool = a100x2()
    seen = {"a-1": Seen(address="tcp://w:1", resources=pool.resources, busy=True)}
    told = [Fact("start-failed", "a-1", "late"), Fact("started", "a-1", "worker g-1")]
    (w,) = run(pool, [], [worker("a-1")], seen, facts=told).workers
    assert (w.state, w.started, w.error) == ("running", "worker g-1", None)


def retiring(pool: Pool) -> tuple[Worker, dict[str, Seen]]:
    w = worker("a-1", "retiring", address="tcp://w:1", since=Monotonic(NOW - 1))
    return w, {"a-1": Seen(address="tcp://w:1", resources=pool.resources, busy=False)}


def test_a_retired_worker_is_leaving_for_a_while_then_forgotten_by_plans():
    pool = a100x2()
    w, seen = retiring(pool)
    assert run(pool, [], [w], seen).leaving == {"tcp://w:1"}
    decision = run(pool, [], [w], seen, facts=[Fact("retired", "a-1")])
    (w,) = decision.workers
    assert (w.state, w.since, w.error) == ("retired", NOW, None)
    assert decision.leaving == {"tcp://w:1"} and decision.stop == ()
    assert run(pool, [], [w], now=NOW + 4.9).leaving == {"tcp://w:1"}
    assert run(pool, [], [w], now=NOW + 5).leaving == set()


def test_a_worker_the_scheduler_keeps_runs_on_idle_from_then():
    pool = a100x2()
    w, seen = retiring(pool)
    decision = run(pool, [], [w], seen, facts=[Fact("retire-refused", "a-1")])
    (w,) = decision.workers
    assert (w.state, w.since, w.idle_since) == ("running", NOW, NOW)
    why = "the scheduler kept it: no other worker can take its results"
    assert said(decision) == [("retire", "a-1", why)] and decision.leaving == set()
    assert run(pool, [], [w], seen, now=NOW + 59).retire == ()
    assert run(pool, [], [w], seen, now=NOW + 60).retire == ("a-1",)


def test_a_failed_worker_the_scheduler_keeps_is_stopped_anyway():
    w = worker("a-1", "failed", address="tcp://w:1", error="it advertises GPU=1")
    decision = run(a100x2(), [], [w], facts=[Fact("retire-refused", "a-1")])
    assert decision.workers == (w,) and decision.stop == ("a-1",) and decision.log == ()


def test_a_stop_that_fails_is_added_to_the_workers_reason():
    w = worker("a-1", "retired", error="it left the scheduler")
    (w,) = run(a100x2(), [], [w], facts=[Fact("stop-failed", "a-1", "scancel: no job")]).workers
    assert w.error == "it left the scheduler (stopping it failed: scancel: no job)"


def test_closing_retires_and_stops_every_worker_up_and_starts_none():
    pool = a100x2(**{"max-workers": 5})
    up = [worker("a-1"), worker("a-2", "running"), worker("a-3", "retiring")]
    ended = worker("a-4", "failed", error="it did not connect")
    decision = run(pool, claims(3), [*up, ended], asked={"a100x2": 1}, facts=[Fact("closing")])
    assert [(w.state, w.error, w.since) for w in decision.workers[:3]] == [
        ("retired", "the kernel closed", NOW)
    ] * 3
    assert decision.workers[3] == ended
    assert decision.stop == ("a-1", "a-2", "a-3") and launched(decision) == decision.retire == ()


# -- what is kept, and what starts ------------------------------------------------------------


def test_the_last_ended_workers_of_each_pool_are_kept():
    ended = [worker(f"a-{i}", "retired" if i % 2 else "failed") for i in range(ENDED_KEPT + 3)]
    up = worker("a-up", "running", address="tcp://w:1")
    seen = {"a-up": Seen(address="tcp://w:1", resources=a100x2().resources, busy=True)}
    decision = run(a100x2(), [], [*ended[:2], up, *ended[2:]], seen)
    assert [w.name for w in decision.workers] == ["a-up"] + [w.name for w in ended[3:]]


def test_the_workers_to_start_are_named_by_the_decision_and_start_now():
    decision = run(a100x2(**{"max-workers": 5}), claims(2, {"GPU": 2, "GPU-A100": 2}))
    assert decision.launch == (
        Worker(name="a100x2-t0", pool="a100x2", asked_at=NOW, since=NOW),
        Worker(name="a100x2-t1", pool="a100x2", asked_at=NOW, since=NOW),
    )
    assert decision.workers == decision.launch


# -- what a claimed task waits for ------------------------------------------------------------


def test_a_claimed_task_waits_on_its_worker_else_for_one_starting_else_for_one_free():
    pool = a100x2(**{"max-workers": 2})
    starting = worker("a-2", started="SLURM job 17")
    running = worker("a-1", "running", address="tcp://w:1")
    assert waiting(pool, "tcp://w:1", [running], NOW) == wait(
        "pool-queued", pool="a100x2", where="tcp://w:1"
    )
    assert waiting(pool, None, [running, starting], Monotonic(NOW + 2)) == wait(
        "pool-starting", pool="a100x2", where="SLURM job 17", seconds=12
    )
    assert waiting(pool, None, [running], NOW) == wait("pool-busy", pool="a100x2", count=1, total=2)
    assert waiting(pool, None, [], NOW) == wait("pool-starting", pool="a100x2")
