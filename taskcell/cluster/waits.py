"""What a task waits for: a code and its numbers where the fact is known, words in one place.

The scheduler's occupancy plugin (:mod:`taskcell.planner.plugin`) knows why a queued task
waits, the client knows why an assigned one waits from its worker's amounts
(:mod:`taskcell.planner.codec`), a kernel's provisioner (:mod:`taskcell.cluster.provision`)
knows which pool's worker a claimed task waits for, and the runner
(:mod:`taskcell.runner.cell_task`) knows how long its cell has waited and how many live workers
could run it. Each says so as a :class:`Wait`: a :data:`WaitCode` and the numbers its words
need, as distributed's progress stream carries states and counts. The snapshot carries it as it
is (:mod:`taskcell.planner.schema`); :func:`wait_words` turns it into the words the cell's
status line, the notebook panel and the sidebar all show (the view,
:func:`taskcell.planner.view.task_view`, calls it; the server sends its words to the sidebar).
Nothing else writes them, and nothing reads a wait's meaning from its words.

A wait looks like::

    {"code": "no-capable-worker", "count": 0, "total": 0, "seconds": None, "request": {},
     "lacking": [{"resource": "GPU", "asked": 4, "has": 2, "held": 0, "on": "tcp://10.0.0.7:1"}],
     "pool": None, "where": None}

This module runs on the scheduler too, shipped by value with the occupancy plugin
(:func:`taskcell.planner.feed.pickled_plugins`): it uses only the standard library and
:mod:`taskcell.spec.amounts`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal, TypedDict

from taskcell.spec.amounts import shortfall, show_amount, show_request

#: submitted: the cell was submitted under a second ago; inputs: the task waits for ``count``
#: inputs to be computed; free-thread: queued on the scheduler until a worker has a free thread;
#: no-worker: no worker is connected; restricted: it may run only on workers or hosts that are
#: not connected; no-capable-worker: no live worker has enough of what ``lacking`` names;
#: not-together: no single live worker has all of ``request``; capable-busy: ``count`` live
#: workers can run ``request`` and all are busy, for ``seconds``; worker-resources: assigned to a
#: worker whose running tasks hold what ``lacking`` names; worker-thread: assigned to a worker
#: whose ``count`` of ``total`` threads are busy; worker-starting: assigned to a worker, about to
#: start; pool-starting: a worker of ``pool`` is starting (``where``: what was started, such as
#: ``SLURM job 17``), for ``seconds``; pool-busy: all ``count`` workers of ``pool`` are busy, at
#: its ``total`` max-workers; pool-queued: queued on ``where``, a worker of ``pool``.
WaitCode = Literal[
    "submitted",
    "inputs",
    "free-thread",
    "no-worker",
    "restricted",
    "no-capable-worker",
    "not-together",
    "capable-busy",
    "worker-resources",
    "worker-thread",
    "worker-starting",
    "pool-starting",
    "pool-busy",
    "pool-queued",
]


class Lack(TypedDict):
    """One resource a task asks for more of than there is: ``asked``; ``has``, the most any live
    worker has (no-capable-worker: ``on`` that worker, named in words only where it has any)
    or the worker's total (worker-resources: ``held`` of it by running tasks there)."""

    resource: str
    asked: float
    has: float
    held: float
    on: str | None


class Wait(TypedDict):
    """What a task waits for: its code and the numbers its words need (the rest 0, empty or
    None); see :data:`WaitCode` for which numbers each code uses."""

    code: WaitCode
    count: int
    total: int
    seconds: float | None
    request: dict[str, float]
    lacking: list[Lack]
    pool: str | None
    where: str | None


def wait(
    code: WaitCode,
    *,
    count: int = 0,
    total: int = 0,
    seconds: float | None = None,
    request: Mapping[str, float] | None = None,
    lacking: Iterable[Lack] = (),
    pool: str | None = None,
    where: str | None = None,
) -> Wait:
    """A :class:`Wait`, the numbers its code does not use left 0, empty or None."""
    return {
        "code": code,
        "count": int(count),
        "total": int(total),
        "seconds": seconds,
        "request": dict(request or {}),
        "lacking": list(lacking),
        "pool": pool,
        "where": where,
    }


def lack(resource: str, asked: float, has: float, held: float = 0.0, on: str | None = None) -> Lack:
    """One :class:`Lack`."""
    return {"resource": resource, "asked": asked, "has": has, "held": held, "on": on}


def _s(n: float) -> str:
    return "s" if n != 1 else ""


def wait_words(w: Wait) -> str:
    """The words for a wait: the one place they are written.

    Examples
    --------
    >>> wait_words(wait("capable-busy", count=2, seconds=5, request={"GPU": 2}))
    'waiting 5 s for GPU=2: 2 capable workers, all busy'
    >>> wait_words(wait("pool-starting", pool="a100x2", where="SLURM job 17", seconds=12))
    'starting a worker of pool a100x2 (SLURM job 17): 12 s'
    >>> wait_words(wait("no-capable-worker", lacking=[lack("GPU", 4, 2, on="tcp://h:1")]))
    'no live worker can ever run it: asks GPU=4; the most any worker has is 2, on tcp://h:1'
    """
    code, n = w["code"], w["count"]
    if code == "submitted":
        return "submitted"
    if code == "inputs":
        return f"waiting for {n} input{_s(n)} to be computed"
    if code == "free-thread":
        return "queued on the scheduler until a worker has a free thread"
    if code == "no-worker":
        return "no worker is connected to the scheduler"
    if code == "restricted":
        return "restricted to workers or hosts that are not connected"
    if code == "no-capable-worker":
        short = (shortfall(x["resource"], x["asked"], x["has"], x["on"]) for x in w["lacking"])
        return "no live worker can ever run it: " + "; ".join(short)
    if code == "not-together":
        return f"no single live worker has {show_request(w['request'])} together"
    if code == "capable-busy":
        asked = show_request(w["request"]) or "a free thread"
        return f"waiting {w['seconds'] or 0:.0f} s for {asked}: {n} capable worker{_s(n)}, all busy"
    if code == "worker-resources":
        held = (
            f"{x['resource']}={show_amount(x['resource'], x['asked'])} "
            f"({show_amount(x['resource'], x['held'])} of {show_amount(x['resource'], x['has'])} "
            "held by running tasks)"
            for x in w["lacking"]
        )
        return "waiting on this worker for " + "; ".join(held)
    if code == "worker-thread":
        return f"waiting on this worker for a free thread ({n} of {w['total']} busy)"
    if code == "worker-starting":
        return "starting"
    if code == "pool-starting":
        what = f" ({w['where']})" if w["where"] else ""
        waited = f": {w['seconds']:.0f} s" if w["seconds"] is not None else ""
        return f"starting a worker of pool {w['pool']}{what}{waited}"
    if code == "pool-busy":
        return f"waiting for a worker of pool {w['pool']}: all {n} busy (max-workers {w['total']})"
    if code == "pool-queued":
        return f"queued on {w['where']}, a worker of pool {w['pool']}"
    return f"waiting ({code})"  # a code a newer scheduler plugin sent: still said
