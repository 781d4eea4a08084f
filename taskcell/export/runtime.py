"""The helpers a workflow module exported for the ``dask`` target calls.

A task cell's call, :func:`submit`, returns a :class:`Pending` at once, so task cells in a row
that do not read each other's names run at the same time; a later task reads an earlier one's
value as a future (``pending[0]``). Before the driver runs a cell of its own, it waits for the
tasks before it, in notebook order (:meth:`Pending.result`): each task's printed output and
displays are shown then, as the notebook showed them; the notebook objects it changed take
their new state in place, as ``%%task`` makes them (:mod:`taskcell.runner.inplace`), and a value
it bound that holds one of them holds the notebook's own; the process-wide state
it changed (a seeded generator moved on) becomes the driver's, and so do the environment
variables it set. On the worker a task runs with the driver's process-wide state and the
environment variables the driver set, its output captured per thread; an argument it left as it
was does not travel back, and Dask collections it persisted come back holding their data, since
its own futures end with it.

:func:`results` gathers what the workflow bound at the end, and :func:`run` is the module's
command line.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import os
import sys
import threading
import traceback
import types
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

import cloudpickle

from taskcell.export.standalone import caches_by_value, close_figures, ipython
from taskcell.runner import crossing, inplace, process_state

if TYPE_CHECKING:
    from distributed import Future

    from taskcell.tasks import Task

__all__ = ["Pending", "results", "run", "submit"]

_pending: list[Pending] = []  # the tasks submitted and not yet waited for, in order
_task_values: set[Any] = set()  # keys of the futures of earlier tasks' values (Pending[i])


class Pending:
    """A task cell's call that the driver has not waited for yet."""

    def __init__(self, future: Future, returns: int, changes_state: bool) -> None:
        self.future = future
        self.returns = returns
        self.changes_state = changes_state

    def __getitem__(self, i: int) -> Future:
        """A future of the ``i``-th value the task returns, for a task called before the
        driver waits for this one."""
        item = self.future.client.submit(_item, self.future, i, pure=False)
        _task_values.add(item.key)
        return item

    def state(self) -> Future:
        """A future of the process-wide state the task ended with."""
        return self.future.client.submit(_item, self.future, -1, pure=False)

    def result(self, *olds: Any) -> Any:
        """Wait for the task; show what it printed and displayed; return what it returns.

        Parameters
        ----------
        olds
            The driver's objects for the first values, which the task may have changed in
            place: each takes its new state and is returned in its place (itself, untouched,
            where the task left it as it was). A later value holding a part of one holds the
            driver's own, as after a ``%%task`` cell.
        """
        if self in _pending:
            _pending.remove(self)
        with _classes_kept():
            outcome = self.future.client.submit(_slim, self.future, pure=False).result()
        sys.stdout.write(outcome.stdout)
        sys.stderr.write(outcome.stderr)
        if outcome.error is not None:
            sys.stderr.write(outcome.traceback)
            raise outcome.error
        process_state.apply(outcome.changed)
        _set_environ(outcome.environ)
        values, updates = outcome.values, inplace.Updates()
        changed = {i: (old, values[i]) for i, old in enumerate(olds) if i not in outcome.unchanged}
        taken = updates.update_all(changed)
        for i, old in enumerate(olds):
            if i not in changed or taken[i]:
                values[i] = old
        values[len(olds) :] = map(updates.resolved, values[len(olds) :])
        return tuple(values) if self.returns > 1 else values[0]


def _classes_kept() -> contextlib.AbstractContextManager[None]:
    """Keep the notebook's classes as they are while a task's outcome loads, as ``%%task``
    keeps them (:func:`taskcell.runner.crossing.guard_classes`): cloudpickle, which carried an
    instance's class by value, sets the class's attributes again on the class it finds."""
    main = sys.modules.get("__main__")
    found = list(vars(main).values()) if main is not None else []
    return crossing.guard_classes(
        c for c in found if isinstance(c, type) and c.__module__ == "__main__"
    )


class _Outcome:
    """What a task cell's run sends back."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.unchanged: set[int] = set()
        """Values that are arguments the task left as they were: the driver keeps its own."""
        self.state: process_state.State = []
        """The process-wide state the cell ended with: the next task starts from it."""
        self.changed: process_state.State = []
        """What of it the driver takes, as from a ``%%task`` cell."""
        self.environ: dict[str, str | None] = {}
        self.stdout = self.stderr = self.traceback = ""
        self.error: BaseException | None = None


def submit(task: Task, *args: Any, returns: int = 1, changes_state: bool = False) -> Pending:
    """Call a task cell's function on the cluster; return at once.

    Parameters
    ----------
    task
        The ``@task``-decorated function.
    args
        Its arguments: values, or futures of earlier tasks' values (``pending[i]``).
    returns
        How many values it returns (a tuple when more than one).
    changes_state
        It may change the process-wide state: the tasks after it start from the state it
        ends with.
    """
    from taskcell.cluster.connect import current_client
    from taskcell.cluster.submit import submit as submit_request

    client = current_client()
    caches_by_value()  # a cached notebook function among the args goes by value
    earlier = [p for p in _pending if p.changes_state]
    state = earlier[-1].state() if earlier else process_state.capture()
    kept = list(map(_kept, args))
    sealed = _sealed(kept)
    future = submit_request(
        client,
        _run_cell,
        task.fn,
        state,
        _environ_changes(_environ_at_start, dict(os.environ)),
        returns,
        sealed,
        *(None if sealed is not None and i in sealed.indices else a for i, a in enumerate(kept)),
        request=task.request(*args),
        name=task.name,
        retries=task.retries,
    )
    pending = Pending(future, returns, changes_state)
    _pending.append(pending)
    return pending


class _Kept:
    """An argument holding the notebook's futures, which Dask passes to the task as it is: a
    task cell gets a Future as a Future, as ``%%task`` gives it, not its value."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _kept(arg: Any) -> Any:
    """``arg`` as the task gets it: an earlier task's value (a future Dask resolves) as it is,
    one holding the notebook's futures kept from Dask's resolving them."""
    from distributed.client import futures_of

    if getattr(arg, "key", None) in _task_values or not futures_of(arg):
        return arg
    return _Kept(arg)


class _Sealed:
    """The task's plain arguments, as cloudpickle's bytes, where one holds a cached function of
    the notebook (:func:`~taskcell.export.standalone.caches_by_value`): the scheduler loads a
    task's arguments and pickles them again to send them on, which such a function, loaded
    there, no longer allows. Opened on the worker, all together, so what they share stays
    shared."""

    def __init__(self, indices: list[int], payload: bytes) -> None:
        self.indices = indices
        self.payload = payload


def _sealed(args: list[Any]) -> _Sealed | None:
    """The plain ``args`` sealed, where they hold a cached function of the notebook."""
    from distributed.client import futures_of

    indices = [
        i
        for i, arg in enumerate(args)
        if not isinstance(arg, _Kept) and getattr(arg, "key", None) not in _task_values
    ]
    if not indices or not _notebook_caches() or not any(_caches_of(args[i]) for i in indices):
        return None
    assert not any(futures_of(args[i]) for i in indices)
    return _Sealed(indices, cloudpickle.dumps([args[i] for i in indices]))


def _notebook_caches() -> bool:
    """Whether the notebook (the module run as ``__main__``) defined a cached function: only
    then may an argument hold one, and its arguments are worth looking through."""
    import functools

    main = sys.modules.get("__main__")
    return any(
        isinstance(value, functools._lru_cache_wrapper) and value.__module__ == "__main__"
        for value in list(vars(main).values() if main is not None else ())
    )


def _caches_of(value: Any) -> bool:
    """Whether ``value`` holds a function cached by ``functools.lru_cache`` (that Python
    pickles by name): cloudpickle's bytes of it name the cache's type only then."""
    try:  # arrays' data out of band, unread: the pickle is only looked at
        return b"_lru_cache_wrapper" in cloudpickle.dumps(
            value, protocol=5, buffer_callback=lambda _: None
        )
    except Exception:  # Dask's own pickling says what the value cannot do
        return False


def _item(outcome: _Outcome, i: int) -> Any:
    caches_by_value()  # the value goes on to another worker
    if i < 0:
        return outcome.state
    if outcome.error is not None:
        raise outcome.error
    return outcome.values[i]


def _slim(outcome: _Outcome) -> _Outcome:
    """The outcome as the driver takes it: without the values it holds already."""
    caches_by_value()  # the values go on to the driver
    slim = copy.copy(outcome)
    slim.values = [None if i in outcome.unchanged else v for i, v in enumerate(outcome.values)]
    return slim


def _run_cell(
    fn: Callable[..., Any],
    state: process_state.State,
    environ: dict[str, str | None],
    returns: int,
    sealed: _Sealed | None,
    *args: Any,
) -> _Outcome:
    """Run a task cell's function on a worker as its cell ran in the notebook's kernel: the
    driver's process-wide state and environment variables, its prints and displays captured."""
    outcome = _Outcome()
    caches_by_value()  # and among the values the cell sends back
    args = tuple(arg.value if isinstance(arg, _Kept) else arg for arg in args)
    if sealed is not None:
        opened = dict(zip(sealed.indices, cloudpickle.loads(sealed.payload), strict=True))
        args = tuple(opened.get(i, arg) for i, arg in enumerate(args))
    out, err = io.StringIO(), io.StringIO()
    before = [_fingerprint(arg) for arg in args]
    worker_environ = dict(os.environ)
    with _captured(out, err):
        process_state.apply(state)
        _set_environ(environ)
        started = dict(os.environ)
        ipython()
        try:
            value = _call(fn, args)
            outcome.values = list(value) if returns > 1 else [value]
            for i, v in enumerate(outcome.values):
                for arg, fingerprint in zip(args, before, strict=True):
                    if v is arg and (fingerprint is None or _fingerprint(arg) == fingerprint):
                        outcome.unchanged.add(i)
            outcome.values = [
                v if i in outcome.unchanged else _materialized(v)
                for i, v in enumerate(outcome.values)
            ]
        except Exception as e:
            outcome.error = e
            outcome.traceback = traceback.format_exc()
        close_figures()
        outcome.state = _state_after(state)
        outcome.changed = process_state.changed(state)
        outcome.environ = _environ_changes(started, dict(os.environ))
    _set_environ(_environ_changes(dict(os.environ), worker_environ))  # the worker's own again
    outcome.stdout, outcome.stderr = out.getvalue(), err.getvalue()
    return outcome


def _call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """``fn(*args)``; where the args hold the notebook's futures, bound to this worker's client
    and the task seceded from the worker's threads, as ``worker_client()`` does: a task that
    waits for a future must not hold the thread that future's own task needs."""
    from distributed import get_client, rejoin, secede
    from distributed.client import futures_of

    futures = [f for arg in args for f in futures_of(arg)]
    if not futures:
        return fn(*args)
    client = get_client()
    for future in futures:
        future.bind_client(client)
    client._inform_scheduler_of_futures()  # so that it tells this client when they finish
    secede()
    try:
        return fn(*args)
    finally:
        rejoin()


def _state_after(before: process_state.State) -> process_state.State:
    """The state of every carrier the driver sent or this process registered, now."""
    carriers = {c.name: c for c in process_state.registered()}
    carriers.update((c.name, c) for c, _ in before)
    return process_state.capture(list(carriers.values()))


def _fingerprint(value: Any) -> bytes | None:
    """A digest of what ``value`` holds, to tell whether a task changed it; None for what a
    task cannot change (code, modules, Dask's immutable collections and futures) or what does
    not pickle."""
    if isinstance(value, (types.FunctionType, types.ModuleType, type)):
        return None
    if type(value).__module__.partition(".")[0] in ("dask", "distributed", "dask_expr"):
        return None
    try:
        return hashlib.blake2b(cloudpickle.dumps(value), digest_size=16).digest()
    except Exception:
        return None


_environ_at_start: dict[str, str] = dict(os.environ)


def _environ_changes(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, str | None]:
    """What turns environment ``before`` into ``after``: values set, and None for unset."""
    changes: dict[str, str | None] = {k: v for k, v in after.items() if before.get(k) != v}
    changes.update({k: None for k in before if k not in after})
    return changes


def _set_environ(changes: Mapping[str, str | None]) -> None:
    for name, value in changes.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


class _Routed(io.TextIOBase):
    """``sys.stdout`` or ``sys.stderr`` of a worker: what a thread running a task cell writes
    goes to that cell's buffer, the rest where it went before."""

    def __init__(self, original: Any) -> None:
        self.original = original
        self.buffers = threading.local()

    def _target(self) -> Any:
        return getattr(self.buffers, "stream", None) or self.original

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def __getattr__(self, name: str) -> Any:  # encoding, fileno, isatty...
        return getattr(self.original, name)


_routing = threading.Lock()


def _captured(out: io.StringIO, err: io.StringIO) -> Any:
    """A context in which this thread's prints go to ``out`` and ``err``."""
    import contextlib

    with _routing:
        for name in ("stdout", "stderr"):
            if not isinstance(getattr(sys, name), _Routed):
                setattr(sys, name, _Routed(getattr(sys, name)))

    @contextlib.contextmanager
    def routed() -> Any:
        streams = [(cast(_Routed, sys.stdout), out), (cast(_Routed, sys.stderr), err)]
        for routed_stream, buffer in streams:
            routed_stream.buffers.stream = buffer
        try:
            yield
        finally:
            for routed_stream, _ in streams:
                routed_stream.buffers.stream = None

    return routed()


def _materialized(value: Any) -> Any:
    """``value`` with each Dask collection that holds this task's futures (one it persisted)
    rebuilt around their data: the futures end with the task, the data travels."""
    from dask import is_dask_collection
    from distributed.client import futures_of

    if isinstance(value, tuple) and not is_dask_collection(value):
        return (
            type(value)(*map(_materialized, value))
            if hasattr(value, "_fields")
            else tuple(map(_materialized, value))
        )
    if not is_dask_collection(value) or not futures_of(value):
        return value
    from dask.core import flatten
    from distributed import get_client

    keys = list(flatten(value.__dask_keys__()))
    # The graph holds the futures and what refers to them; get() leaves this worker's thread
    # to the cluster while it waits.
    data = get_client().get(dict(value.__dask_graph__()), keys)
    rebuild, extra = value.__dask_postpersist__()
    return rebuild(dict(zip(keys, data, strict=True)), *extra)


def results(namespace: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """The values of ``names`` (the notebook's, which a workflow's ``main()`` binds) in
    ``namespace`` (the module's globals), those bound at the end."""
    return {
        name: namespace[name]
        for name in names
        if name in namespace
        and not name.startswith("_")
        and not isinstance(namespace[name], Pending)
    }


def run(main: Callable[[], Any], scheduler: str | None = None) -> Any:
    """Run a workflow's ``main()`` on ``scheduler``, or on a cluster started on this machine.

    Parameters
    ----------
    main
        The workflow.
    scheduler
        A Dask scheduler address (``tcp://host:8786``): the tasks run there, and so does a
        ``Client()`` the notebook makes. None uses Dask's ``scheduler-address`` configuration if
        set; else the notebook's own ``Client()`` if it makes one; else taskcell's embedded
        cluster (sized by ``taskcell.embedded-cluster.*``), stopped afterwards.

    Returns
    -------
    object
        What ``main()`` returns.
    """
    import dask.config

    from taskcell.cluster import connect

    global _environ_at_start
    _pending.clear()
    _task_values.clear()
    _environ_at_start = dict(os.environ)
    try:
        if scheduler:
            connect.use_address(scheduler)
            with dask.config.set({"scheduler-address": scheduler}):
                return main()
        return main()
    finally:
        _pending.clear()
        connect.close()
