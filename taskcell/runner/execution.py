"""Running a cell as a task: in the foreground, or with ``--bg`` while the notebook goes on.

A background cell binds its names when it finishes, by two rules a user can predict: never
over a value the user rebound after submitting it, and among several background cells binding
one name, the one submitted last wins (whichever finishes first).
"""

from __future__ import annotations

import concurrent.futures
import html
import itertools
import threading
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from taskcell.cluster import interruptible
from taskcell.cluster.connect import live_workers
from taskcell.errors import ERROR_MIME, CellError, ClusterError, ErrorOutput
from taskcell.runner.cell_task import (
    CellSource,
    Display,
    Submission,
    cell_lost,
    finish_cell,
    look,
    submit_cell,
    wait_for_cell,
)
from taskcell.runner.history import TaskRecord
from taskcell.runner.job import CellResult
from taskcell.runner.stopping import stop_cell
from taskcell.runner.writeback import write_back
from taskcell.spec import Resources

if TYPE_CHECKING:
    from distributed import Client

#: The end of a background cell's output kept for its view, in characters.
_OUTPUT_SHOWN = 20_000
_MISSING = object()
_order = itertools.count()
#: name -> (order, value) of the last value a background cell bound to it.
_bound: dict[str, tuple[int, Any]] = {}
_bind_lock = threading.Lock()
#: Background cells not finished yet, by key.
_running: dict[str, BackgroundCell] = {}
#: Background cells no ``%task_wait`` has waited for yet, in the order they were submitted.
_unwaited: list[BackgroundCell] = []


@dataclass(kw_only=True)
class _Following:
    """What a background cell needs while it runs: its submission (its attempts, as it is
    retried), the namespace's objects before it, and where its output goes."""

    attempts: Attempts
    sub: Submission
    before: dict[str, Any]
    out: Display


class BackgroundCell:
    """The handle of a background cell: its state, its output so far, and why it failed.

    Shown in the notebook (its cell's ``Out``), it follows the cell live: queued, running on a
    worker, then finished, failed with the user's traceback, or cancelled.
    """

    def __init__(self, attempts: Attempts, sub: Submission):
        namespace = attempts.namespace
        self.key = sub.job.key
        self.record = sub.record
        self.output = ""
        self.displays: list[dict] = []
        self.status = "submitted"
        self.error: BaseException | None = None
        self.value: Any = None
        #: Names it did not bind because they were rebound after it was submitted.
        self.kept: list[str] = []
        self._order = next(_order)
        names = (*sub.job.outputs, *sub.sent.deleted, *sub.sent.objects)
        #: Let go of when it ends: the notebook's Out keeps every handle.
        self._following: _Following | None = _Following(
            attempts=attempts,
            sub=sub,
            before={n: namespace.get(n, _MISSING) for n in names},
            out=Display(stream=self._stream, display=self._display, status=self._set_status),
        )
        self._done = threading.Event()
        self._drawing = threading.Lock()  # a redraw never races the first display
        self._shown = False
        self._changed_at = 0.0

    @property
    def _live(self) -> _Following:
        following = self._following
        if following is None:
            raise RuntimeError(f"background cell {self.key} has ended")
        return following

    @classmethod
    def start(cls, attempts: Attempts, sub: Submission) -> BackgroundCell:
        """Follow ``sub`` with the kernel's other background cells (:class:`_Watcher`) and
        bind its outputs if it succeeds."""
        handle = cls(attempts, sub)
        _running[handle.key] = handle
        _unwaited.append(handle)
        _watcher.watch(handle)
        return handle

    def look(self) -> BaseException | bool:
        """One look at the cell (see :func:`~taskcell.runner.cell_task.look`): True once it
        ended, an error once it was lost (or the look failed), False while it goes on."""
        try:
            live = self._live
            return look(live.attempts.client, live.sub, live.out, timeout=0)
        except BaseException as e:
            return e

    def finish(self, failed: BaseException | None) -> None:
        """Bind the ended cell's outputs, or run it again where its request allows (then it is
        followed again), or end with its error (``failed``: what its last look raised)."""
        live = self._live
        client = live.attempts.client
        try:
            if isinstance(failed, ClusterError):
                cell_lost(client, live.sub, failed)
            if failed is not None:
                raise failed
            result = finish_cell(client, live.sub, live.out)
        except (CellError, ClusterError) as error:
            try:
                live.sub = live.attempts.again(error, live.sub, live.out)
            except BaseException as final:
                self._end(final)
                return
            self.record = live.sub.record
            _watcher.watch(self)
            return
        except BaseException as e:
            self._end(e)
            return
        try:
            self.value = self._bind(result)
        except BaseException as e:
            self._end(e)
            return
        self._end(None)

    def _end(self, error: BaseException | None) -> None:
        self.error = error
        with _bind_lock:  # another cell's _bind reads what the running ones bind
            _running.pop(self.key, None)
            self._following = None
        self._done.set()
        self._changed(force=True)

    def _bind(self, result: Any) -> Any:
        """Apply the finished cell, binding only the names nobody rebound since (see the
        module docstring); its value."""
        live = self._live
        namespace = live.attempts.namespace
        with _bind_lock:
            value, notes = write_back(
                live.attempts.client, namespace, live.sub.sent, result, self._may_bind
            )
            for name in [*result.outputs, *result.aliases, *result.shared]:
                if name not in self.kept:
                    _bound[name] = (self._order, namespace.get(name))
            # Remember a value only while another background cell may bind the same name.
            others = [h._live.before for h in list(_running.values()) if h is not self]
            for name in [n for n in _bound if not any(n in before for before in others)]:
                del _bound[name]
        for note in notes:
            self._stream("stderr", f"taskcell: {note}\n")
        return value

    def _may_bind(self, name: str) -> bool:
        live = self._live
        now = live.attempts.namespace.get(name, _MISSING)
        order, last = _bound.get(name, (None, _MISSING))
        if order is not None and now is last:  # a background cell bound it
            unchanged = order < self._order
        else:
            unchanged = now is live.before.get(name, _MISSING)
        if not unchanged:
            self.kept.append(name)
        return unchanged

    def _stream(self, name: str, text: str) -> None:
        self.output = (self.output + text)[-_OUTPUT_SHOWN:]
        self._changed()

    def _display(self, event: dict) -> None:
        self.displays.append(event["data"])

    def _set_status(self, text: str) -> None:
        self.status = text
        self._changed()

    def _changed(self, force: bool = False) -> None:
        """Redraw the handle where the notebook shows it, at most every 0.2 s until it ends."""
        from IPython.display import update_display

        with self._drawing:
            now = time.monotonic()
            if not self._shown or (not force and now - self._changed_at < 0.2):
                return
            if not force and self.record.ended is not None and not self.done():
                return  # its error and names are not in yet: the last redraw shows them
            self._changed_at = now
            update_display(self._bundle(), raw=True, display_id=self.key)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        with self._drawing:
            display(self._bundle(), raw=True, display_id=self.key)
            self._shown = True

    def _bundle(self) -> dict[str, Any]:
        lines = [f"taskcell: {self.record.cell}: {self._summary()}"]
        if self.kept:
            lines.append(
                f"not bound, rebound since this cell was submitted: {', '.join(self.kept)}"
            )
        text = "\n".join(lines) + ("\n" + self.output if self.output else "")
        failure = getattr(self.error, "traceback_text", None)
        if failure:  # an error (ERROR_MIME) in JupyterLab; elsewhere red, as Jupyter draws one
            text += "\n" + failure
            error = ErrorOutput(
                ename=getattr(self.error, "type_name", type(self.error).__name__),
                evalue=str(self.error),
                traceback=text.splitlines(),
            )
            return {ERROR_MIME: error, "application/vnd.jupyter.stderr": text, "text/plain": text}
        return {"text/plain": text, "text/html": f"<pre>{html.escape(text)}</pre>"}

    def _summary(self) -> str:
        record = self.record
        where = f" on {record.worker}" if record.worker else ""
        if record.state == "finished" and record.usage is not None:
            return f"done{where} in {record.usage.wall:.1f} s"
        if record.state == "error":
            return f"failed{where} after {record.elapsed():.1f} s: {record.error}"
        if record.state == "cancelled":
            return f"cancelled{where}; nothing was bound"
        if record.state == "lost":
            return f"lost: {record.error}"
        return self.status

    def cancel(self) -> None:
        """Stop the cell, on its worker if it runs, and free its resources; nothing is bound."""
        following = self._following
        if following is not None:
            stop_cell(following.attempts.client, self.key, following.sub.future)

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> Any:
        """Block until the cell ends; its last value, or its error raised here."""
        if not interruptible.wait(self._done, timeout):
            raise TimeoutError(f"task {self.key} still {self.record.state} after {timeout} s")
        if self.error is not None:
            raise self.error
        return self.value

    def __repr__(self) -> str:
        why = f": {self.error}" if self.error is not None else ""
        return f"<taskcell background cell {self.record.cell!r}: {self.record.state}{why}>"


def wait_background(which: str = "all") -> list[BackgroundCell]:
    """Wait for the background cells named ``which`` (their ``--name`` or cell-N), or all of
    them, not waited for before; the first failure raised once all have ended (a cancelled cell
    is not one), so a notebook run by nbclient or papermill fails where it waits."""
    chosen = [h for h in list(_unwaited) if which in ("all", h.record.cell)]
    for handle in chosen:
        interruptible.wait(handle._done)
    for handle in chosen:
        _unwaited.remove(handle)
    failed = [
        h for h in chosen if h.error is not None and not isinstance(h.error, KeyboardInterrupt)
    ]
    if failed:
        raise failed[0].error  # type: ignore[misc]
    return chosen


class _Watcher:
    """Follows every background cell of the kernel in one thread, a look at each every
    :data:`LOOK_EVERY` seconds; a cell that ended is finished (its result fetched, its names
    bound) by one of a few threads, so a large result does not hold the others' output back.
    A thousand background cells cost one thread, not a thousand."""

    #: Seconds between two looks at the cells.
    LOOK_EVERY = 0.05
    #: Threads that finish ended cells at once.
    FINISHERS = 4

    def __init__(self) -> None:
        self._cells: list[BackgroundCell] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._finishers: concurrent.futures.ThreadPoolExecutor | None = None

    def watch(self, handle: BackgroundCell) -> None:
        """Follow ``handle`` from now on."""
        with self._lock:
            self._cells.append(handle)
            if self._finishers is None:
                self._finishers = concurrent.futures.ThreadPoolExecutor(
                    self.FINISHERS, thread_name_prefix="taskcell-finish"
                )
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="taskcell-background", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                cells = list(self._cells)
                if not cells:
                    self._thread = None
                    return
                finishers = self._finishers
            for handle in cells:
                seen = handle.look()
                if seen is False:
                    continue
                with self._lock:
                    self._cells.remove(handle)
                failed = seen if isinstance(seen, BaseException) else None
                if finishers is not None:
                    finishers.submit(handle.finish, failed)
            time.sleep(self.LOOK_EVERY)


_watcher = _Watcher()


def cancel_background(which: str) -> list[BackgroundCell]:
    """Cancel the unfinished background cells named ``which`` (their ``--name`` or cell-N), or
    all of them for ``"all"``; the cells cancelled."""
    chosen = [h for h in list(_running.values()) if which in ("all", h.record.cell)]
    for handle in chosen:
        handle.cancel()
    return chosen


#: What a cell asks for after a failed attempt: ``(error, request, attempt, memory it had)``
#: to a step with the next ``request`` and a ``message`` naming it
#: (:func:`taskcell.planner.escalation.next_attempt`), or None where memory did not fail it.
Escalate = Callable[[BaseException, Resources, int, "int | None"], Any]


@dataclass(kw_only=True)
class Attempts:
    """A cell's runs: the first, and, after one that ran out of memory, the next one rung up
    (up to ``retries`` more), each a new task; nothing of a failed one is written back."""

    client: Client
    cell: CellSource
    namespace: MutableMapping[str, Any]
    request: Resources
    name: str
    history: list[TaskRecord]
    retries: int = 0
    escalate: Escalate | None = None
    attempt: int = 1

    def submit(self) -> Submission:
        sub = submit_cell(
            self.client, self.cell, self.namespace, self.request, self.name, self.retries
        )
        self.history.append(sub.record)
        return sub

    def wait(self, sub: Submission, out: Display) -> tuple[Submission, CellResult]:
        """The submission that finished and its result; the last attempt's error."""
        while True:
            try:
                return sub, wait_for_cell(self.client, sub, out)
            except (CellError, ClusterError) as error:
                sub = self.again(error, sub, out)

    def again(self, error: BaseException, sub: Submission, out: Display) -> Submission:
        """The next attempt after ``sub`` failed with ``error``, one rung up; ``error`` raised
        where it was not memory, or no attempt is left."""
        step = self._step(error, sub)
        if step is None:
            raise error
        if self.attempt > self.retries:
            out.stream("stderr", f"taskcell: {step.message}\n")
            raise error
        out.stream(
            "stderr",
            f"taskcell: {step.message}; running it again "
            f"(attempt {self.attempt + 1} of {self.retries + 1})\n",
        )
        self.request, self.attempt = step.request, self.attempt + 1
        return self.submit()

    def _step(self, error: BaseException, sub: Submission) -> Any:
        if self.escalate is None:
            return None
        ran_on = sub.attempts[-1] if sub.attempts else None
        held = next((w.memory_limit for w in _known(self.client) if w.address == ran_on), None)
        return self.escalate(error, self.request, self.attempt, held or None)


def _known(client: Client) -> list[Any]:
    """The live workers as last seen, or none where the scheduler does not answer."""
    try:
        return live_workers(client)
    except ClusterError:
        return []


def run_cell_task(
    client: Client,
    cell: CellSource,
    namespace: MutableMapping[str, Any],
    request: Resources,
    *,
    name: str,
    history: list[TaskRecord],
    out: Display | None,
    retries: int = 0,
    escalate: Escalate | None = None,
) -> Any:
    """Run ``cell`` as a task: wait and return its last value, or, with no ``out``, return a
    :class:`BackgroundCell` at once. ``escalate``: what to ask for after an attempt that ran
    out of memory (see :class:`Attempts`)."""
    attempts = Attempts(
        client=client,
        cell=cell,
        namespace=namespace,
        request=request,
        name=name,
        history=history,
        retries=retries,
        escalate=escalate,
    )
    sub = attempts.submit()
    if out is None:
        return BackgroundCell.start(attempts, sub)
    sub, result = attempts.wait(sub, out)
    value, notes = write_back(client, namespace, sub.sent, result)
    for note in notes:
        out.stream("stderr", f"taskcell: {note}\n")
    return value


def measure_cell(
    client: Client,
    cell: CellSource,
    namespace: MutableMapping[str, Any],
    request: Resources,
    *,
    name: str,
    status: Callable[[str], None] = lambda text: None,
) -> int | None:
    """Run ``cell`` as a task on ``namespace`` for its peak memory alone (``%%task auto
    --probe``): nothing it binds or changes is written back, what it prints and shows is
    dropped, and no record of it joins the kernel's history. Its error raised as the user's."""
    quiet = Display(stream=lambda name, text: None, display=lambda event: None, status=status)
    sub = submit_cell(client, cell, namespace, request, name)
    return wait_for_cell(client, sub, quiet).usage.peak_memory
