"""The process a worker runs notebook cells in (``python -m taskcell.runner.child FD``).

A cell runs in the main thread of a process of its own, so an interrupt is a real SIGINT
(``time.sleep(60)`` stops at once), its GPUs are chosen by ``CUDA_VISIBLE_DEVICES`` before
anything imports CUDA, and its CPU time and peak memory are its own. The process stays warm
between cells; each cell gets a fresh namespace.

Messages both ways are tuples over one socket (see :mod:`taskcell.runner.wire`): the worker sends a
:class:`~taskcell.runner.job.CellJob`; the child answers with any number of
``("stream", name, text)``, ``("display", event)`` (see :mod:`taskcell.runner.cell_shell`),
``("clear", wait)``, ``("started",)`` (the cell's code runs: an interrupt may come) and
``("secede",)`` (the cell will wait on the cluster: give its thread back) messages, then one
of ``("done", Returned, Usage, sizes, changed_sizes)`` (the
:class:`~taskcell.runner.job.CellResult` pickled, as
:class:`~taskcell.runner.crossing.Returned`, with what its worker reads of it), ``("error",
traceback_text, type_name)``, ``("input-error",
message)`` or ``("interrupted",)``.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import ctypes
import dataclasses
import inspect
import io
import linecache
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from typing import Any

from taskcell.errors import InputError
from taskcell.runner import cell_dask, cell_shell, crossing, peak_memory, process_state
from taskcell.runner.changes import InputSnapshot, Written
from taskcell.runner.closure import adopt
from taskcell.runner.descriptors import refuse_everywhere
from taskcell.runner.gpu_usage import gpu_peak
from taskcell.runner.job import CellJob, CellResult, Shown, Usage
from taskcell.runner.peak_memory import PeakMemory, release
from taskcell.runner.wire import Channel

_PR_SET_PDEATHSIG = 1


#: How often a running cell's output is sent to the worker, as ipykernel's ``flush_interval``.
FLUSH_INTERVAL = 0.2
#: Output pending past this many characters is sent at once.
FLUSH_SIZE = 1 << 20


class _Outbox:
    """What the cell prints, sent in batches: every :data:`FLUSH_INTERVAL` seconds at most,
    at once past :data:`FLUSH_SIZE`, and whatever is left before a display or the cell's end.
    A loop of 10,000 ``print`` calls is a handful of messages, in the order it was written."""

    def __init__(self, channel: Channel) -> None:
        self._channel = channel
        self._pending: list[list[str]] = []  # [stream name, text], consecutive names merged
        self._size = 0
        self._ready = threading.Condition()
        threading.Thread(target=self._flush_periodically, daemon=True).start()

    def write(self, name: str, text: str) -> None:
        with _sigint_held(), self._ready:
            if self._pending and self._pending[-1][0] == name:
                self._pending[-1][1] += text
            else:
                self._pending.append([name, text])
            self._size += len(text)
            if self._size >= FLUSH_SIZE:
                self._send_pending()
            self._ready.notify()

    def send(self, message: tuple) -> None:
        """Send ``message`` after the output written before it."""
        with _sigint_held(), self._ready:
            self._send_pending()
            self._channel.send(message)

    def flush(self) -> None:
        with _sigint_held(), self._ready:
            self._send_pending()

    def _send_pending(self) -> None:
        pending, self._pending, self._size = self._pending, [], 0
        for name, text in pending:
            self._channel.send(("stream", name, text))

    def _flush_periodically(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # interrupts are the cell's
        with self._ready:
            while True:
                self._ready.wait_for(lambda: self._pending)
                deadline = time.monotonic() + FLUSH_INTERVAL
                while (left := deadline - time.monotonic()) > 0:
                    self._ready.wait(left)
                self._send_pending()


class _Stream(io.TextIOBase):
    """``sys.stdout`` or ``sys.stderr`` of a cell: text goes to the notebook through the outbox."""

    def __init__(self, outbox: _Outbox, name: str) -> None:
        self._outbox = outbox
        self.name = name

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"  # as a kernel's streams: the notebook takes any text

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if text:
            self._outbox.write(self.name, text)
        return len(text)

    def flush(self) -> None:
        self._outbox.flush()


@contextlib.contextmanager
def _sigint_held() -> Iterator[None]:
    """Hold SIGINT back: an interrupt must not cut a message in half. One that arrives
    meanwhile is delivered, into the cell's code, as soon as the message is out."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """Let SIGINT in while the cell's own code runs, and only then; a stale one is dropped."""
    if signal.SIGINT in signal.sigpending():
        signal.sigwait({signal.SIGINT})
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def _compile(job: CellJob) -> tuple[Any, Any]:
    """The cell's statements and, when it ends in an expression, that expression apart."""
    linecache.cache[job.filename] = (
        len(job.display_source),
        None,
        job.display_source.splitlines(keepends=True),
        job.filename,
    )
    tree = ast.parse(job.source, job.filename)
    ast.increment_lineno(tree, job.line_offset)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body[-1].value)
        del tree.body[-1]
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT  # as IPython allows ``await`` in a cell
    body = compile(tree, job.filename, "exec", flags=flags)
    return body, (compile(last, job.filename, "eval", flags=flags) if last is not None else None)


def _evaluated(code: Any, namespace: dict[str, Any]) -> Any:
    """``code`` run in ``namespace``, its top-level ``await`` in an event loop of its own."""
    value = eval(code, namespace)
    if code.co_flags & inspect.CO_COROUTINE:
        value = asyncio.run(value)
    return value


def _inputs(
    job: CellJob,
    namespace: dict[str, Any],
    noted: dict[str, tuple[str, dict[int, Any]]],
    parts: dict[str, crossing.Sealed],
) -> dict[str, Any]:
    """The cell's inputs by name, their notebook functions reading ``namespace``; names the
    notebook bound to one object share it here. ``noted`` takes, by name, the part it came in
    and the objects made for it (:meth:`~taskcell.runner.crossing.Sealed.open`); ``parts``,
    the parts by name (a large input's, or ``BUNDLE``)."""
    crossing.begin_cell()
    if job.sealed is not None:
        parts[crossing.BUNDLE] = job.sealed
    inputs = {}
    for name, value in job.inputs.items():
        if isinstance(value, crossing.Sealed):
            parts[name] = value
        else:
            inputs[name] = value
    with crossing.receiving(namespace):
        for part, sealed in parts.items():
            made: dict[str, dict[int, Any]] = {}
            inputs.update(sealed.open(made))
            noted.update((name, (part, objects)) for name, objects in made.items())
    for name, same in job.same.items():
        inputs[name] = inputs[same]
    return inputs


def run(job: CellJob, outbox: _Outbox, written: Written) -> tuple:
    """Execute one cell; the reply tuple described in the module docstring."""
    process_state.apply(job.state)  # sys.path first: the inputs may need it to load
    dask_client = cell_dask.client(lambda: outbox.send(("secede",))) if job.uses_dask else None
    namespace: dict[str, Any] = {"__name__": "__main__"}
    noted: dict[str, tuple[str, dict[int, Any]]] = {}
    parts: dict[str, crossing.Sealed] = {}
    try:
        inputs = _inputs(job, namespace, noted, parts)
    except InputError as e:
        return ("input-error", str(e))
    if dask_client is not None:
        inputs.update(dict.fromkeys(job.clients, dask_client))
        if cell_dask.bind_futures(dask_client, inputs.values()):
            outbox.send(("secede",))  # the cell may wait on the notebook's futures
    adopt(namespace, inputs)
    snapshot = InputSnapshot(inputs, written, parts)
    definitions = crossing.DefinitionsSnapshot()
    environ = _environ()
    memory = PeakMemory()
    memory.start(namespace)
    gpu = gpu_peak()
    gpu.start()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Stream(outbox, "stdout"), _Stream(outbox, "stderr")
    try:
        body, last = _compile(job)
        with cell_shell.cell_shell(namespace, outbox.send, job.count) as shell, _interruptible():
            there = dict(namespace)  # held, so a rebound name's old object keeps its id
            outbox.send(("started",))  # its worker may interrupt it from now on
            _evaluated(body, namespace)
            value = _evaluated(last, namespace) if last is not None else None
            if "matplotlib.pyplot" in sys.modules:
                _flush_figures(shell)
    except KeyboardInterrupt:
        return ("interrupted",)
    except BaseException as e:
        return ("error", _user_traceback(e, job.filename), type(e).__name__)
    finally:
        sys.stdout, sys.stderr = stdout, stderr
        gpu_memory = gpu.stop()
        environ_changes = _restored_environ(environ)
    wall = time.perf_counter() - wall0
    usage = Usage(
        wall=wall,
        cpu=time.process_time() - cpu0,
        peak_memory=memory.stop() if memory.own else None,
        gpu_memory=gpu_memory,
    )
    result = _result(job, namespace, there, snapshot, value, usage, dask_client)
    result = dataclasses.replace(
        result, environ=environ_changes, definitions=definitions.changed() or None
    )
    sizes = {n: crossing.size_of(v) for n, v in result.outputs.items()}
    changed_sizes = {n: crossing.size_of(v) for n, v in result.changed.items()}
    refs, home = crossing.References(), crossing.Home(job.key)
    if max([*sizes.values(), *changed_sizes.values()], default=0) <= job.result_threshold:
        # Opened in the kernel. Only data whose change could be told: code's parts (a
        # function's defaults) may have changed unseen.
        data = [n for n in noted if n in snapshot.judged()]
        left = [n for n in data if n not in result.changed]
        refs = crossing.references(
            job.key, noted, snapshot.objects, left, [n for n in data if n not in left]
        )
        home = crossing.Home(job.key, namespace)
    returned, sent = _returned(result, refs, home)
    sizes = {n: size for n, size in sizes.items() if n in sent.outputs}
    changed_sizes = {n: size for n, size in changed_sizes.items() if n in sent.changed}
    return ("done", returned, usage, sizes, changed_sizes)


def _returned(
    result: CellResult, refs: crossing.References, home: crossing.Home
) -> tuple[crossing.Returned, CellResult]:
    """``result`` as it crosses back, and what of it was sent: what the cell received and left
    as it was, as references to the notebook's own objects (none where a value stays on the
    worker, over the kernel's threshold, where a later cell reads it); what cannot be
    pickled, named and left out."""
    try:
        return crossing.Returned.of(result, refs, home), result
    except Exception:
        sendable = _sendable(result)
        return crossing.Returned.of(sendable, refs, home), sendable


def _environ() -> dict[bytes, bytes]:
    """The environment variables as the OS holds them: copied without decoding, per cell."""
    return dict(os.environ._data)  # type: ignore[attr-defined]


def _restored_environ(before: dict[bytes, bytes]) -> dict[str, str | None]:
    """What the cell did to the environment variables (None: unset), undone here: they are
    the notebook's to keep, and this process runs other cells next."""
    now = _environ()
    if now == before:
        return {}
    decode = os.fsdecode
    changes: dict[str, str | None] = {
        decode(k): decode(v) for k, v in now.items() if before.get(k) != v
    }
    changes.update(dict.fromkeys(decode(k) for k in before.keys() - now.keys()))
    os.environ.clear()
    os.environ.update({decode(k): decode(v) for k, v in before.items()})
    return changes


def _flush_figures(shell: Any) -> None:
    """Display the figures the cell left open, as the inline backend does once a cell ends,
    marked so the notebook shows them after the cell's ``Out[]``, as it would there."""
    from taskcell.runner import figures

    shell.display_pub.after_cell = True
    figures.flush()


def _result(
    job: CellJob,
    namespace: dict[str, Any],
    there: dict[str, Any],
    snapshot: InputSnapshot,
    value: Any,
    usage: Usage,
    dask_client: Any,
) -> CellResult:
    """What the cell sends back: outputs, changed inputs, and which of them are inputs.

    The outputs are the names the analysis found and those the cell bound where it could
    not see (``from m import *``, ``exec``, a notebook function's ``global``): names bound to
    another object than ``there`` before it ran (not ``_``-led ones, which IPython's own
    machinery binds too)."""
    inputs = {id(v): name for name, v in reversed(snapshot.objects.items())}
    if dask_client is not None and job.clients:
        inputs[id(dask_client)] = job.clients[0]
    outputs, aliases, shared = {}, {}, {}
    made: dict[int, str] = {}
    unseen = [
        name
        for name, bound in namespace.items()
        if (name not in there or there[name] is not bound)
        and name[0] != "_"
        and name not in job.outputs
    ]
    for name in [*job.outputs, *unseen]:
        if name not in namespace:
            continue
        bound = namespace[name]
        if id(bound) in inputs:
            aliases[name] = inputs[id(bound)]
        elif id(bound) in made:
            shared[name] = made[id(bound)]
        else:
            outputs[name] = bound
            made[id(bound)] = name
    changed = snapshot.changed()
    futures = dask_client is not None and bool(
        cell_dask.hand_over(dask_client, [*outputs.values(), *changed.values(), value], job.topic)
    )
    return CellResult(
        outputs=outputs,
        value=value,
        usage=usage,
        changed=changed,
        aliases=aliases,
        shared=shared,
        value_alias=inputs.get(id(value)) if value is not None else None,
        state=process_state.changed(job.state),
        futures=futures,
    )


#: Files whose frames a user's traceback leaves out: the import hook that measures what imports
#: cost (in every import's frames) and the stand-ins for ``input()`` and ``getpass``.
_OURS = frozenset({peak_memory.__file__, cell_shell.__file__})


def _user_traceback(error: BaseException, filename: str) -> str:
    """The traceback from the cell's first frame on: the user's code, not taskcell's (nor the
    import hook that measures what imports cost, in every import's frames)."""
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    shown = traceback.TracebackException(type(error), error, tb)
    seen: set[int] = set()
    todo: list[traceback.TracebackException | None] = [shown]
    while todo:
        part = todo.pop()
        if part is None or id(part) in seen:
            continue
        seen.add(id(part))
        frames = [f for f in part.stack if f.filename not in _OURS]
        part.stack = traceback.StackSummary.from_list(frames)
        todo += [part.__cause__, part.__context__]
    return "".join(shown.format())


def serve(channel: Channel, warming: threading.Thread | None = None) -> None:
    """Run jobs until the worker closes the socket; the first once ``warming`` is done (two
    threads importing at once can deadlock on a package's circular imports)."""
    outbox = _Outbox(channel)
    while True:
        try:
            if warming is not None:
                select.select([channel.sock], [], [])
                warming.join()
                warming = None
            job = channel.receive()
        except EOFError:
            return
        except KeyboardInterrupt:
            continue  # an interrupt that arrived after its cell had finished
        try:
            reply = run(job, outbox, channel.written)
        except KeyboardInterrupt:
            reply = ("interrupted",)
        except Exception as e:  # taskcell's own failure: the cell's error, not this process's end
            traceback.print_exc()  # to the worker's log
            why = (
                f"taskcell failed in the cell's process ({type(e).__name__}: {e}); nothing was "
                f"written back, and the traceback is in the worker's log\n"
            )
            reply = ("error", why, type(e).__name__)
        outbox.send(reply)
        del job, reply  # the next cell's peak memory must not hold this one's values
        release()  # while no cell waits: the next one need not pay for it


def _sendable(result: CellResult) -> CellResult:
    """``result`` without what cannot travel back: each such output or changed input named
    in ``lost``, with why (none for a closed file: the notebook unbinds it without a word);
    a last value that cannot travel is sent as its ``repr``, what Out[] shows."""
    lost: dict[str, str] = {}
    lost_changes: dict[str, str] = {}
    outputs = {n: v for n, v in result.outputs.items() if _travels(n, v, lost)}
    lost = {n: "" if _closed(result.outputs[n]) else why for n, why in lost.items()}
    changed = {n: v for n, v in result.changed.items() if _travels(n, v, lost_changes)}
    value = result.value if _travels("", result.value, {}) else Shown(repr(result.value))
    state = [(c, v) for c, v in result.state if _travels(c.name, v, {})]
    return dataclasses.replace(
        result,
        outputs=outputs,
        changed=changed,
        value=value,
        state=state,
        lost=lost,
        lost_changes=lost_changes,
    )


def _travels(name: str, value: Any, lost: dict[str, str]) -> bool:
    """Whether ``value`` pickles; if not, why, in ``lost[name]``."""
    try:
        crossing.dumps(value, lambda _: None)
    except Exception as e:
        lost[name] = f"{type(value).__name__}: {e}" if str(e) else type(value).__name__
        return False
    return True


def _closed(value: Any) -> bool:
    """Whether ``value`` is a closed file, as a ``with`` block leaves one: nothing of it is
    left to use, so losing it is not worth a word (an open one is)."""
    try:
        return getattr(value, "closed", None) is True and callable(getattr(value, "close", None))
    except Exception:  # an object whose attributes fail to read is no file
        return False


def main() -> None:
    cell_dask.take_credentials()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sock = socket.socket(fileno=int(sys.argv[1]))
    sock.setblocking(True)
    refuse_everywhere()
    # IPython, which every cell runs with, imported while the first cell is still on its way.
    warming = threading.Thread(target=cell_shell.warm_shell, name="taskcell-warm", daemon=True)
    warming.start()
    serve(Channel(sock), warming)


if __name__ == "__main__":
    main()
