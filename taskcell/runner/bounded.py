"""A finished cell's result, fetched under the rule every other wait of a cell keeps.

Fetching asks the scheduler where the result is and then the worker for it. A network cut or a
frozen scheduler at that moment held the cell for Dask's own comm timeouts (tens of seconds) and
ended it with a long ``CommClosedError``; an interrupt there showed Dask's traceback. Here the
fetch runs in a thread of its own while the kernel's main thread waits in slices an interrupt
ends (:mod:`taskcell.cluster.interruptible`), asking meanwhile whether the scheduler and the
worker still answer: one silent past ``taskcell.scheduler-timeout`` ends the cell in one line,
with nothing written back. A slow transfer from a worker that answers is waited for: slow is not
dead.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from taskcell import config
from taskcell.cluster import interruptible
from taskcell.cluster.connect import live_workers, not_answering
from taskcell.errors import ClusterError

if TYPE_CHECKING:
    from distributed import Client

T = TypeVar("T")

#: Seconds between two looks at the scheduler and the worker while a result comes back.
LOOK_EVERY = 0.5
#: Seconds after which a worker no cell asks about any more is forgotten.
FORGET_AFTER = 600.0
_CONSEQUENCE = "nothing was written back"


def fetch(client: Client, worker: str | None, get: Callable[[], T]) -> T:
    """``get()``, the cell's result from ``worker``, ended as described in the module docstring.

    Raises
    ------
    ClusterError
        The scheduler or the worker stopped answering, or the connection to them failed.
    KeyboardInterrupt
        An interrupt, within :data:`~taskcell.cluster.interruptible.SLICE` seconds.
    """
    done = threading.Event()
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = get()
        except BaseException as e:
            box["error"] = e
        finally:
            done.set()

    threading.Thread(target=run, name="taskcell-fetch", daemon=True).start()
    worker_answered = time.monotonic()
    while not interruptible.wait(done, LOOK_EVERY):
        _scheduler_answers(client)
        if worker is not None:
            worker_answered = _worker_answers(client, worker, worker_answered)
    if "error" in box:
        raise _in_one_line(client, worker, box["error"])  # type: ignore[arg-type]
    return box["value"]  # type: ignore[return-value]


def _scheduler_answers(client: Client) -> None:
    """Ask the scheduler (at most once a second); ClusterError once it is silent too long."""
    try:
        live_workers(client)
    except ClusterError:
        error = not_answering(client, _CONSEQUENCE)
        if error is not None:
            raise error from None


def _worker_answers(client: Client, worker: str, since: float) -> float:
    """When ``worker`` last answered (``since`` at the earliest); ClusterError once it has been
    silent past ``taskcell.scheduler-timeout``.

    One question is in flight per worker, whichever cells wait on it, and it is not withdrawn
    when a look ends: a worker busy sending results answers late, and is not silent while it
    does (as :func:`~taskcell.cluster.connect.live_workers` asks the scheduler)."""
    key = (client.id, worker)
    asked: concurrent.futures.Future | None = None
    with _lock:
        _forget_idle(time.monotonic() - FORGET_AFTER)
        if key not in _asking or _asking[key].done():
            loop = getattr(client.loop, "asyncio_loop")  # noqa: B009 (tornado's IOLoop, untyped)
            asked = _asking[key] = asyncio.run_coroutine_threadsafe(
                client.rpc(worker).identity(), loop
            )
        since = max(since, _answers.get(key, since))
    if asked is not None:  # outside the lock: an answer already in runs the callback at once
        asked.add_done_callback(lambda done: _answered(key, done))
    quiet, limit = time.monotonic() - since, config.seconds("scheduler-timeout")
    if quiet > limit:
        raise ClusterError(
            f"the worker {worker} has not answered for {quiet:.0f} s while the cell's "
            f"result came back (taskcell.scheduler-timeout is {limit:g} s); {_CONSEQUENCE}"
        )
    return since


#: The question in flight to each worker, by (client id, worker address), and when each last
#: answered one.
_asking: dict[tuple[str, str], concurrent.futures.Future] = {}
_answers: dict[tuple[str, str], float] = {}
_lock = threading.Lock()


def _forget_idle(before: float) -> None:
    """Forget the workers no cell has asked about since ``before`` (with the lock held): a
    waiting cell asks every :data:`LOOK_EVERY` seconds, and workers come and go."""
    idle = [k for k, asked in _asking.items() if asked.done() and _answers.get(k, 0) < before]
    for key in idle:
        del _asking[key]
        _answers.pop(key, None)


def _answered(key: tuple[str, str], asked: concurrent.futures.Future) -> None:
    if not asked.cancelled() and asked.exception() is None:
        with _lock:
            if _asking.get(key) is asked:  # not forgotten meanwhile
                _answers[key] = time.monotonic()


def _in_one_line(client: Client, worker: str | None, error: BaseException) -> BaseException:
    """A connection's failure as one line naming where; any other error as it is."""
    if isinstance(error, asyncio.CancelledError):
        return ClusterError(
            f"lost the scheduler at {client.scheduler.address} while the cell's result came "
            f"back; {_CONSEQUENCE}"
        )
    if isinstance(error, (OSError, asyncio.TimeoutError, TimeoutError)):
        where = worker or client.scheduler.address
        why = str(error).splitlines()[0] if str(error) else type(error).__name__
        return ClusterError(
            f"the cell's result could not be fetched from {where} ({why}); {_CONSEQUENCE}"
        )
    return error
