"""One notebook cell as one Dask task, seen from the kernel.

:func:`run_cell_task` ships the names a cell reads, submits it with its resources, shows what
the worker prints while it runs and what it waits for while it is queued, and writes the names it
binds back into the namespace only if it succeeds. Results over a threshold stay on the worker as
:class:`~taskcell.runner.remote_value.RemoteValue` handles.
"""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import sys
import threading
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from taskcell import config
from taskcell.cluster.connect import live_workers, not_answering, silence
from taskcell.cluster.provision import claim, waiting_status
from taskcell.cluster.quiet import quiet_distributed
from taskcell.cluster.submit import plan, unique_key
from taskcell.cluster.waits import Wait, wait, wait_words
from taskcell.errors import (
    CellError,
    CellInterrupted,
    ClusterError,
    InputError,
    Interrupted,
    user_error,
    worker_lost,
)
from taskcell.runner import bounded, crossing, events, process_state
from taskcell.runner.analysis import analyze_cell
from taskcell.runner.cell_dask import uses_dask
from taskcell.runner.cell_magics import check_magics
from taskcell.runner.closure import function_globals, is_notebook_defined
from taskcell.runner.crossing import (
    BUNDLE,
    SEAL_THRESHOLD,
    Returned,
    Sealed,
    guard_classes,
    seal,
    sees,
    shared_roots,
)
from taskcell.runner.history import TaskRecord
from taskcell.runner.job import CellJob, CellResult
from taskcell.runner.remote import run_cell
from taskcell.runner.remote_value import RemoteValue
from taskcell.runner.stopping import stop_cell
from taskcell.runner.writeback import Sent
from taskcell.spec import Resources, parse_quantity, resource_key

if TYPE_CHECKING:
    from distributed import Client, Future


@dataclass(kw_only=True)
class CellSource:
    """A cell as the kernel holds it: the body to run and the cell as the user sees it, and
    how IPython turns its own syntax into Python (for the bodies of magics in the cell)."""

    body: str
    shown: str
    filename: str
    line_offset: int = 1
    transform: Callable[[str], str] | None = None
    count: int = 0  #: its execution count, the N of ``In[N]``


@dataclass(kw_only=True)
class Display:
    """Where a running cell's output goes; the magic wires these to IPython.

    ``display`` takes a display event (see :mod:`taskcell.runner.cell_shell`); ``clear`` is
    ``clear_output(wait)``.
    """

    stream: Callable[[str, str], None]
    display: Callable[[dict], None]
    status: Callable[[str], None]
    clear: Callable[[bool], None] = lambda wait: None


@dataclass(kw_only=True)
class Submission:
    """A cell submitted to the cluster and the events it has sent so far."""

    future: Future
    job: CellJob
    record: TaskRecord
    resources: dict[str, float]
    capable: int
    #: The notebook's objects the cell was sent, and the names it may delete.
    sent: Sent
    events: queue.Queue = field(default_factory=queue.Queue)
    attempts: list[str] = field(default_factory=list)
    sizes: dict[str, int] | None = None
    changed_sizes: dict[str, int] = field(default_factory=dict)
    submitted_at: float = field(default_factory=time.monotonic)
    status_at: float = 0.0  #: when its status was last shown
    done_at: float = 0.0  #: when its future was first seen done
    #: The objects it was sent: what the cell left as it was comes back as them.
    expected: crossing.Expected | None = None


def submit_cell(
    client: Client,
    cell: CellSource,
    namespace: MutableMapping[str, Any],
    request: Resources,
    name: str,
    retries: int = 0,
) -> Submission:
    """Check ``request`` can run, ship the cell's inputs and submit it; nothing runs on error.

    ``retries``: how many times the cell may start again on another worker when its worker
    dies; with 0 it starts at most once.
    """
    analysis = analyze_cell(cell.body, cell.transform)
    check_magics(analysis)
    placement = plan(request, client)
    key = unique_key(name)
    inputs = _inputs(client, analysis.inputs, namespace)
    dask_used = uses_dask(analysis, cell.body, inputs.objects.values())
    if dask_used:
        _reachable_from_the_worker(client)
    job = CellJob(
        key=key,
        source=cell.body,
        display_source=cell.shown,
        filename=cell.filename,
        count=cell.count,
        line_offset=cell.line_offset,
        outputs=analysis.outputs,
        topic=client.id,
        gpus=_gpu_count(request, placement.resources),
        retries=retries,
        sealed=inputs.sealed,
        same=inputs.same,
        clients=inputs.clients,
        uses_dask=dask_used,
        memory_limit=request.memory.limit if request.memory is not None else None,
        result_threshold=_threshold(),
        state=process_state.capture(),
    )
    record = TaskRecord(key=key, cell=name, request=request, source=cell.body)
    expected = crossing.expect(key, inputs.parts, namespace)
    inbox = events.listen(client, key)
    future = client.submit(
        run_cell, job, inputs.remote, key=key, resources=placement.resources or None, pure=False
    )
    events.submitted()
    future.add_done_callback(lambda _: inbox.put({"kind": "ended"}))
    claim(client, placement, future, followed=True)
    return Submission(
        future=future,
        job=job,
        record=record,
        resources=placement.resources,
        capable=len(placement.workers),
        sent=Sent(inputs.objects, analysis.deleted),
        events=inbox,
        expected=expected,
    )


def _reachable_from_the_worker(client: Client) -> None:
    """Refuse a cell that uses Dask on a cluster its process cannot reach: one that lives
    inside this kernel (``Client(processes=False)``, an ``inproc://`` scheduler)."""
    address = client.scheduler.address
    if address.startswith("inproc://"):
        raise InputError(
            f"the cell uses Dask, but its cluster's scheduler ({address}) lives inside this "
            f"kernel (Client(processes=False)), where the cell's process cannot reach it. Make "
            f"the client with processes=True (Dask's default), or point %task_cluster at a "
            f"scheduler address."
        )


def _gpu_count(request: Resources, resources: dict[str, float]) -> int | None:
    """Whole GPUs the cell's process is given: what ``GPU`` reserves (``gpu=2`` or
    ``--resources GPU=2``); None where other accelerators (MIG, TPU) are asked for, which the
    process then sees as the worker does."""
    gpus = int(sum(v for k, v in resources.items() if resource_key(k) == resource_key("GPU")))
    return None if gpus == 0 and request.gpu is not None else gpus


@dataclass(kw_only=True)
class _Inputs:
    """A cell's inputs as they travel: small ones sealed together, others as futures."""

    sealed: Sealed | None = None
    remote: dict[str, Any] = field(default_factory=dict)
    #: What was sealed, by part (a large input's name, or ``BUNDLE``).
    parts: dict[str, Sealed] = field(default_factory=dict)
    same: dict[str, str] = field(default_factory=dict)
    clients: tuple[str, ...] = ()
    objects: dict[str, Any] = field(default_factory=dict)


def _inputs(client: Client, names: tuple[str, ...], namespace: MutableMapping[str, Any]) -> _Inputs:
    """The cell's inputs: pickled here (:mod:`taskcell.runner.crossing`), small ones riding with
    the cell, large ones sent ahead and kept on the cluster while the notebook leaves them be.

    A function the notebook defined brings the notebook globals it reads along as inputs of
    their own, and travels without them: the cell process binds it to the cell's namespace.
    Names bound to one object travel once and share it there; the notebook's Dask client
    stays here (the cell gets its process's own). An input that cannot travel is named
    (:class:`InputError`) and nothing is submitted.
    """
    from distributed import Client

    wanted = [n for n in names if n in namespace]
    for n in list(wanted):
        if is_notebook_defined(namespace[n], namespace):
            wanted += sorted(function_globals(namespace[n], namespace) - set(wanted))
    inputs = _Inputs(objects={n: namespace[n] for n in wanted})
    first: dict[int, str] = {}
    clients = []
    values: dict[str, Any] = {}
    for n in wanted:
        value = namespace[n]
        if isinstance(value, Client):
            clients.append(_same_cluster(n, value, client))
        elif id(value) in first:
            inputs.same[n] = first[id(value)]
        elif isinstance(value, RemoteValue):
            inputs.remote[n] = value.future
        else:
            values[n] = value
        first.setdefault(id(value), n)
    inputs.clients = tuple(clients)
    _seal(client, values, namespace, inputs)
    return inputs


def _seal(
    client: Client, values: dict[str, Any], namespace: MutableMapping[str, Any], into: _Inputs
) -> None:
    """Pickle ``values``: each one over :data:`SEAL_THRESHOLD` on its own, sent ahead (or found
    there, unchanged since a cell sent it), the rest together, sent ahead only if they are large
    together; an array sharing memory with another input stays with the rest, as its view."""
    roots = shared_roots(values)
    together = {}
    for name, value in values.items():
        if sees(value, roots):
            together[name] = value
            continue
        sealed = _sealed({name: value}, namespace)
        if sealed.nbytes > SEAL_THRESHOLD:
            into.remote[name] = _kept.future(client, name, value, sealed)
            into.parts[name] = sealed
        else:
            together[name] = value
    _kept.forget_rebound(namespace)
    sealed = into.parts[BUNDLE] = _sealed(together, namespace)
    if sealed.nbytes > SEAL_THRESHOLD:
        into.remote[BUNDLE] = _scattered(client, sealed)
    else:
        into.sealed = sealed.copied()


def _sealed(values: dict[str, Any], namespace: MutableMapping[str, Any]) -> Sealed:
    try:
        return seal(values, namespace)
    except Exception as e:
        name = getattr(e, "input_name", next(iter(values)))
        raise _cannot_travel(name, values[name], e) from None


@dataclass(kw_only=True)
class _Sent:
    """A large input sent ahead of a cell and kept on the cluster: the notebook's object, what
    it pickled to, and its future."""

    value: Any
    fingerprint: bytes
    future: Future


class _KeptInputs:
    """Large inputs kept on the cluster by name, reused by the next cell that reads the same
    object unchanged (its pickle hashes the same), let go once the name is rebound."""

    def __init__(self) -> None:
        self._sent: dict[tuple[str, str], _Sent] = {}
        self._lock = threading.Lock()  # a background cell's retry submits from another thread

    def future(self, client: Client, name: str, value: Any, sealed: Sealed) -> Future:
        """A future of ``sealed``: the one kept for ``name`` if it holds this value unchanged."""
        key = (client.id, name)
        fingerprint = sealed.fingerprint()
        with self._lock:
            kept = self._sent.get(key)
        if (
            kept is not None
            and kept.value is value
            and kept.fingerprint == fingerprint
            and kept.future.status == "finished"
        ):
            return kept.future
        future = _scattered(client, sealed)
        with self._lock:
            self._sent[key] = _Sent(value=value, fingerprint=fingerprint, future=future)
        return future

    def forget_rebound(self, namespace: MutableMapping[str, Any]) -> None:
        """Let go of what is kept for names now bound to another object (or to none)."""
        with self._lock:
            for key in [k for k, s in self._sent.items() if namespace.get(k[1]) is not s.value]:
                del self._sent[key]


_kept = _KeptInputs()


def forget_rebound(namespace: MutableMapping[str, Any]) -> None:
    """After any cell: let go of the large inputs kept for names it rebound or deleted (what is
    kept holds the notebook's object too, which the notebook may be freeing)."""
    _kept.forget_rebound(namespace)


def _same_cluster(name: str, value: Any, client: Client) -> str:
    """``name``, a notebook client the cell may use: it must reach the cell's own cluster
    from the cell's process."""
    theirs, ours = value.scheduler.address, client.scheduler.address
    if theirs != ours:
        raise InputError(
            f"input {name!r} is a Dask client of the scheduler at {theirs}, but the cell runs on "
            f"the cluster at {ours}: in the cell, {name} would reach neither. Use one cluster "
            f"(%task_cluster {theirs})."
        )
    return name


def _scattered(client: Client, sealed: Sealed) -> Future:
    """``sealed`` sent to the cluster ahead of the cell, as one opaque value."""
    with quiet_distributed():
        return client.scatter(sealed, hash=False)


def _cannot_travel(name: str, value: Any, error: Exception) -> InputError:
    first = error.args[0] if error.args else None
    detail = first if isinstance(first, str) and first else str(error) or type(error).__name__
    return InputError(
        f"input {name!r} ({type(value).__name__}) cannot be sent to a worker: {detail}. "
        f"Create it inside the %%task cell instead."
    )


def wait_for_cell(client: Client, sub: Submission, out: Display) -> CellResult:
    """Wait for the cell, showing its output and status; interrupts stop it on its worker.

    An interrupt ends the wait within a second whatever the cluster does, and raises
    :class:`~taskcell.errors.Interrupted`. A worker that dies under the cell, or a scheduler
    that goes away or stops answering for ``taskcell.scheduler-timeout``, raises
    :class:`~taskcell.errors.ClusterError`.
    """
    try:
        while not look(client, sub, out, timeout=0.1):
            pass
    except KeyboardInterrupt:
        events.forget(client, sub.job.key)
        where = _where(sub)
        sub.record.finish("interrupted", error=f"interrupted {where}")
        if stop_cell(client, sub.job.key, sub.future):
            out.status(f"interrupted {where}; nothing was written back")
        else:
            out.status(
                f"interrupted; the scheduler at {client.scheduler.address} did not answer, so "
                f"the cell may still run {where}; nothing was written back"
            )
        raise Interrupted(f"the cell was interrupted {where}") from None
    except ClusterError as e:
        cell_lost(client, sub, e)
        raise
    return finish_cell(client, sub, out)


def look(client: Client, sub: Submission, out: Display, timeout: float) -> bool:
    """One look at a submitted cell: what it sent shown (waiting up to ``timeout`` for it), its
    status every half second; True once it has ended and all it sent is shown. ClusterError
    when its worker died or its scheduler is lost (then :func:`cell_lost`)."""
    _handle_next(sub, out, timeout)
    now = time.monotonic()
    if now - sub.status_at >= 0.5:
        sub.status_at = now
        out.status(_status(client, sub, now - sub.submitted_at))
    if not (sub.future.done() and sub.events.empty()):
        return False
    if sub.future.status != "finished" or sub.sizes is not None:
        return True
    sub.done_at = sub.done_at or now  # its sizes come by the event stream, a little later
    return now - sub.done_at >= 2


def cell_lost(client: Client, sub: Submission, error: ClusterError) -> None:
    """Record a cell lost with its worker or its scheduler, and stop what is left of it."""
    events.forget(client, sub.job.key)
    sub.record.finish("lost", error=str(error))
    stop_cell(client, sub.job.key, sub.future)


def finish_cell(client: Client, sub: Submission, out: Display) -> CellResult:
    """The result of a cell :func:`look` saw end; its error raised as the user's."""
    events.forget(client, sub.job.key)
    return _result(client, sub, out)


def _handle_next(sub: Submission, out: Display, timeout: float) -> None:
    """Show what the cell sent: the first event waited for up to ``timeout``, then any others
    already in."""
    try:
        event = sub.events.get(timeout=timeout) if timeout > 0 else sub.events.get_nowait()
    except queue.Empty:
        return
    _handle(event, sub, out)
    with contextlib.suppress(queue.Empty):
        while True:
            _handle(sub.events.get_nowait(), sub, out)


def _handle(event: dict, sub: Submission, out: Display) -> None:
    kind = event.get("kind")
    if kind == "stream":
        out.stream(event["name"], event["text"])
    elif kind == "display":
        out.display(event)
    elif kind == "clear":
        out.clear(event["wait"])
    elif kind == "started":
        sub.attempts.append(event["worker"])
        sub.record.start(event["worker"])
    elif kind == "finished":
        sub.sizes = event["sizes"]
        sub.changed_sizes = event.get("changed_sizes", {})


def _status(client: Client, sub: Submission, waited: float) -> str:
    try:
        live = {w.address for w in live_workers(client, wait=False)}
    except ClusterError:
        return _silent_scheduler(client)
    if not sub.attempts:
        return wait_words(waiting_status(client, sub.job.key) or _waiting_reason(sub, waited))
    worker, retries = sub.attempts[-1], sub.job.retries
    if worker not in live:  # the cached view may predate the worker: ask again before judging
        live = {w.address for w in live_workers(client, refresh=True)}
    dead = sub.attempts[:-1] + ([worker] if worker not in live else [])
    if len(dead) > retries:
        raise worker_lost(dead[-1], retries)
    if worker not in live:
        return f"worker {worker} died; waiting to run the cell again ({len(dead)} of {retries})"
    return f"running on {worker} for {sub.record.elapsed():.1f} s"


def _silent_scheduler(client: Client) -> str:
    """The status while the scheduler does not answer; past the timeout, the cell's end."""
    error = not_answering(client, "nothing was written back")
    if error is not None:
        raise error
    return (
        f"the scheduler at {client.scheduler.address} has not answered for {silence(client):.0f} s"
    )


def _waiting_reason(sub: Submission, waited: float) -> Wait:
    """What a cell no pool's worker was claimed for waits for, ``waited`` seconds after it was
    submitted."""
    if waited < 1:
        return wait("submitted")
    return wait("capable-busy", count=sub.capable, seconds=waited, request=sub.resources)


def _where(sub: Submission) -> str:
    return f"on {sub.attempts[-1]}" if sub.attempts else "before it started"


def _result(client: Client, sub: Submission, out: Display) -> CellResult:
    if sub.future.status == "cancelled":
        raise _cancelled(client, sub, out)
    try:
        result = _fetch(client, sub)
    except KeyboardInterrupt:
        sub.record.finish("interrupted", error=f"interrupted {_where(sub)}")
        out.status("interrupted while its result came back; nothing was written back")
        raise Interrupted("the cell was interrupted while its result came back") from None
    except CellInterrupted as e:  # cancelled: handle.cancel(), %task_cancel, the sidebar
        sub.record.finish("cancelled", error=f"{e} {_where(sub)}")
        out.status(f"cancelled {_where(sub)}; nothing was written back")
        raise Interrupted(f"{e} {_where(sub)}") from None
    except BaseException as e:
        error = e.summary if isinstance(e, CellError) else str(e) or type(e).__name__
        sub.record.finish("lost" if isinstance(e, ClusterError) else "error", error=error)
        out.status(f"failed {_where(sub)} after {sub.record.elapsed():.1f} s")
        if isinstance(e, CellError):
            raise user_error(e) from None
        raise
    sub.record.finish("finished", result.usage)
    out.status(f"ran on {result.worker} in {result.usage.wall:.2f} s")
    events.keep(sub.future)
    return result


def _cancelled(client: Client, sub: Submission, out: Display) -> BaseException:
    """Why the cell's future was cancelled: the scheduler was lost, or someone cancelled it."""
    reason = ""
    try:
        sub.future.result()
    except Exception as e:
        reason = getattr(e, "reason", "")
    if reason == "scheduler-connection-lost":
        message = (
            f"lost the scheduler at {client.scheduler.address} while the cell ran "
            f"{_where(sub)}; nothing was written back"
        )
        sub.record.finish("lost", error=message)
        out.status(message)
        return ClusterError(message)
    message = f"the cell's task was cancelled {_where(sub)}"
    sub.record.finish("cancelled", error=message)
    out.status(f"cancelled {_where(sub)}; nothing was written back")
    return Interrupted(message)


def _threshold() -> int:
    return parse_quantity(config.get("result-threshold"), "taskcell.result-threshold")


def _fetch(client: Client, sub: Submission) -> CellResult:
    """The cell's result, its large outputs left on the worker behind handles, as are large
    new states of inputs that were already there (others come to change the notebook's)."""
    worker = sub.attempts[-1] if sub.attempts else None
    with guard_classes():
        return bounded.fetch(client, worker, lambda: _fetched(client, sub))


def _fetched(client: Client, sub: Submission) -> CellResult:
    threshold = sub.job.result_threshold  # what the cell's process judged its result by
    remote = {n for n, v in sub.sent.objects.items() if isinstance(v, RemoteValue)}
    large = {n: size for n, size in (sub.sizes or {}).items() if size > threshold}
    changed = {n: s for n, s in sub.changed_sizes.items() if s > threshold and n in remote}
    if not large and not changed:
        return _opened(sub.future.result())
    small = client.submit(_without, sub.future, set(large), set(changed), pure=False).result()
    outputs = {n: _left_there(client, sub.future, "outputs", n, size) for n, size in large.items()}
    kept = {n: _left_there(client, sub.future, "changed", n, size) for n, size in changed.items()}
    return dataclasses.replace(
        small, outputs={**small.outputs, **outputs}, changed={**small.changed, **kept}
    )


def _left_there(client: Client, cell: Future, part: str, name: str, size: int) -> RemoteValue:
    return RemoteValue(client.submit(_pick, cell, part, name, pure=False), name, size)


def _opened(returned: Returned) -> CellResult:
    return dataclasses.replace(returned.open(), worker=returned.worker)


def _without(returned: Returned, outputs: set[str], changed: set[str]) -> CellResult:
    result = _opened(returned)
    return dataclasses.replace(
        result,
        outputs={n: v for n, v in result.outputs.items() if n not in outputs},
        changed={n: v for n, v in result.changed.items() if n not in changed},
    )


def _pick(returned: Returned, part: str, name: str) -> Any:
    return getattr(returned.open(), part)[name]


def print_stream(name: str, text: str) -> None:
    """Write a worker's stdout/stderr text to this process's own stream, once the other stream
    has sent what it holds: a kernel buffers and sends its two streams apart, so the order in
    which the cell interleaved them would be lost."""
    mine, other = (sys.stderr, sys.stdout) if name == "stderr" else (sys.stdout, sys.stderr)
    other.flush()
    mine.write(text)
