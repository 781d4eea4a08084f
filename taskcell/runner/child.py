"""The process a worker runs notebook cells in (``python -m taskcell.runner.child FD``).

A cell runs in the main thread of a process of its own, so an interrupt is a real SIGINT
(``time.sleep(60)`` stops at once), its GPUs are chosen by ``CUDA_VISIBLE_DEVICES`` before
anything imports CUDA, and its CPU time and peak memory are its own. The process stays warm
between cells; each cell gets a fresh namespace.

Messages both ways are tuples over one socket (see :mod:`taskcell.runner.wire`): the worker sends a
:class:`~taskcell.runner.job.CellJob`; the child answers with any number of
``("stream", name, text)`` and ``("display", bundle)`` messages, then one of
``("done", outputs, value, usage)``, ``("error", traceback_text, type_name)`` or
``("interrupted",)``.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import io
import linecache
import signal
import socket
import sys
import time
import traceback
import types
from collections.abc import Iterator
from typing import Any

from taskcell.runner.gpu_usage import gpu_peak
from taskcell.runner.job import CellJob, Usage
from taskcell.runner.wire import Channel

_PR_SET_PDEATHSIG = 1


class _Stream(io.TextIOBase):
    """A text stream that forwards every write to the worker as it happens."""

    def __init__(self, channel: Channel, name: str) -> None:
        self._channel = channel
        self.name = name

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if text:
            _send(self._channel, ("stream", self.name, text))
        return len(text)


def _send(channel: Channel, message: tuple) -> None:
    """Send with SIGINT held back: an interrupt must not cut a message in half. One that
    arrives meanwhile is delivered, into the cell's code, as soon as the message is out."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        channel.send(message)
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


def _display_function(channel: Channel):
    def display(*objs: Any, **kwargs: Any) -> None:
        """Show objects in the notebook cell that runs this task, as IPython's display does."""
        from IPython.core.formatters import DisplayFormatter

        formatter = DisplayFormatter()
        for obj in objs:
            data, metadata = formatter.format(obj)
            _send(channel, ("display", {"data": data, "metadata": metadata}))

    return display


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
        last = ast.Expression(tree.body.pop().value)
    body = compile(tree, job.filename, "exec")
    return body, (compile(last, job.filename, "eval") if last is not None else None)


def _peak_rss_reset() -> None:
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _peak_rss() -> int:
    with contextlib.suppress(OSError), open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _adopt(namespace: dict[str, Any], inputs: dict[str, Any]) -> None:
    """Make the notebook's functions and methods read the cell's namespace as their globals,
    as they read the notebook's at home (cloudpickle gave each a private copy, or none)."""

    def rebound(f: Any) -> Any:
        if not isinstance(f, types.FunctionType) or f.__module__ != "__main__":
            return f
        clone = types.FunctionType(f.__code__, namespace, f.__name__, f.__defaults__, f.__closure__)
        clone.__kwdefaults__, clone.__qualname__ = f.__kwdefaults__, f.__qualname__
        clone.__doc__, clone.__dict__ = f.__doc__, f.__dict__
        return clone

    for name, value in inputs.items():
        if isinstance(value, type) and value.__module__ == "__main__":
            for attr, member in list(vars(value).items()):
                if isinstance(member, (staticmethod, classmethod)):
                    setattr(value, attr, type(member)(rebound(member.__func__)))
                elif isinstance(member, types.FunctionType):
                    setattr(value, attr, rebound(member))
        else:
            namespace[name] = rebound(value)


def run(job: CellJob, channel: Channel) -> tuple:
    """Execute one cell; the reply tuple described in the module docstring."""
    namespace: dict[str, Any] = {"__name__": "__main__", "display": _display_function(channel)}
    namespace.update(job.inputs)
    _adopt(namespace, job.inputs)
    _peak_rss_reset()
    gpu = gpu_peak()
    gpu.start()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Stream(channel, "stdout"), _Stream(channel, "stderr")
    try:
        body, last = _compile(job)
        with _interruptible():
            exec(body, namespace)
            value = eval(last, namespace) if last is not None else None
    except KeyboardInterrupt:
        return ("interrupted",)
    except BaseException as e:
        return ("error", _user_traceback(e, job.filename), type(e).__name__)
    finally:
        sys.stdout, sys.stderr = stdout, stderr
        gpu_memory = gpu.stop()
    wall = time.perf_counter() - wall0
    usage = Usage(
        wall=wall, cpu=time.process_time() - cpu0, peak_memory=_peak_rss(), gpu_memory=gpu_memory
    )
    outputs = {name: namespace[name] for name in job.outputs if name in namespace}
    return ("done", outputs, value, usage)


def _user_traceback(error: BaseException, filename: str) -> str:
    """The traceback from the cell's first frame on: the user's code, not taskcell's."""
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(error), error, tb))


def serve(channel: Channel) -> None:
    """Run jobs until the worker closes the socket."""
    while True:
        try:
            job = channel.receive()
        except EOFError:
            return
        except KeyboardInterrupt:
            continue  # an interrupt that arrived after its cell had finished
        try:
            reply = run(job, channel)
        except KeyboardInterrupt:
            reply = ("interrupted",)
        try:
            channel.send(reply)
        except Exception as e:  # an output that cannot be pickled
            channel.send(
                ("error", f"cannot send the cell's outputs back: {e!r}\n", "PicklingError")
            )


def main() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sock = socket.socket(fileno=int(sys.argv[1]))
    sock.setblocking(True)
    serve(Channel(sock))


if __name__ == "__main__":
    main()
