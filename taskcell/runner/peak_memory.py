"""A cell's peak memory: its own, measured in the cell process that runs it.

The cell process is warm: it ran other cells before and may hold their garbage, their freed
heap and the libraries they imported, and it maps values shared with its worker
(:mod:`taskcell.runner.wire`) that earlier cells touched. A cell's peak is what the same code
would need in a process of its own:

- at the start, the last cell's garbage is collected (when it left memory behind) and free
  heap handed back to the system (``malloc_trim``, and pyarrow's pool where pyarrow is loaded),
  so the cell cannot reuse it unseen; then the high-water mark (``VmHWM``) is reset through
  ``/proc/self/clear_refs``;
- the peak counts what the process gained over what it held at the start, plus the process's
  own floor (an interpreter with taskcell's cell loop, measured when the process started), plus
  the libraries the cell uses that an earlier cell imported: each top-level package's memory is
  measured when the process first imports it, and a cell uses the packages it imports and those
  its values, functions and modules come from (with the packages they import in turn);
- pages of shared values count only if the cell touches them: their accessed bits are cleared
  at the start, and those resident at the end and untouched are taken off (``Rss`` less
  ``Referenced`` in ``/proc/self/smaps``);
- the cell's child processes, and theirs, are sampled every :data:`INTERVAL` seconds while
  they live: each one's own high-water mark, less the pages a forked child still shares with
  its parent, is added to this process's memory at that moment; a child that ended between two
  samples still counts through ``RUSAGE_CHILDREN``.

Where ``/proc/self/clear_refs`` cannot be written (not Linux, or a kernel without it) the
figure is the process's peak since it started, which earlier cells may have set:
:attr:`PeakMemory.own` is then False.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import gc
import os
import resource
import signal
import sys
import threading
import time
import types
from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import Any

#: Seconds between two samples of the cell's child processes.
INTERVAL = 0.02
#: Seconds between two searches for new ones, at most (a search reads every process's state).
SEARCH_INTERVAL = 0.2
#: Seconds between two reads of a forked child's shared pages (``smaps_rollup`` walks them all).
SHARED_INTERVAL = 0.1
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
#: How ``runner.wire`` names its shared segments in ``/proc/self/smaps``.
_SHARED_SEGMENT = "memfd:taskcell-value"


def _write(path: str, text: str) -> bool:
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError:
        return False
    return True


def _status(pid: int | str = "self") -> dict[str, int]:
    """The ``kB`` fields of ``/proc/PID/status`` in bytes; empty when it cannot be read."""
    fields = {}
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if value.endswith("kB\n"):
                fields[name] = int(value.split()[0]) * 1024
    return fields


def _resident() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:
        return 0


def _children_peak() -> int:
    """The largest peak of any child this process has waited for, ever (bytes)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024


@dataclass
class _Loading:
    """A package being imported: the memory before, and what packages it imported took."""

    package: str
    before: int
    nested: int = 0


class _Imports:
    """What each top-level package cost this process when it was imported, which packages
    each imports, and which ones were imported (loaded or not) since :meth:`reset`."""

    def __init__(self) -> None:
        self.floor = _resident()
        self.cost: dict[str, int] = {}
        self.needs: dict[str, set[str]] = {}
        self.used: set[str] = set()
        self._original = builtins.__import__
        self._local = threading.local()
        builtins.__import__ = self._import

    def _import(
        self,
        name: str,
        globals: Mapping[str, Any] | None = None,
        locals: Mapping[str, Any] | None = None,
        fromlist: Any = (),
        level: int = 0,
    ) -> Any:
        package = (globals or {}).get("__package__") or "" if level else name
        top = package.partition(".")[0]
        stack: list[_Loading] = self._local.__dict__.setdefault("stack", [])
        self.used.add(top)
        if stack and stack[-1].package != top:
            self.needs[stack[-1].package].add(top)
        if not top or top in sys.modules or (stack and stack[-1].package == top):
            return self._original(name, globals, locals, fromlist, level)
        frame = _Loading(top, _resident())
        self.needs.setdefault(top, set())
        stack.append(frame)
        try:
            return self._original(name, globals, locals, fromlist, level)
        finally:
            stack.pop()
            took = max(_resident() - frame.before, 0)
            self.cost[top] = self.cost.get(top, 0) + max(took - frame.nested, 0)
            if stack:
                stack[-1].nested += took

    def reset(self) -> None:
        self.used = set()

    def held(self, loaded: Set[str], namespace: Mapping[str, Any] | None) -> int:
        """The memory of the packages in ``loaded`` that the cell used, and theirs."""
        wanted = set(self.used)
        for value in (namespace or {}).values():
            wanted.add(_package_of(value))
        seen: set[str] = set()
        while wanted:
            package = wanted.pop()
            if package not in seen:
                seen.add(package)
                wanted |= self.needs.get(package, set())
        return sum(self.cost.get(p, 0) for p in seen & loaded)


def _package_of(value: Any) -> str:
    if isinstance(value, types.ModuleType):
        name = value.__name__
    elif isinstance(value, type | types.FunctionType | types.BuiltinFunctionType):
        name = getattr(value, "__module__", None) or ""
    else:
        name = type(value).__module__
    return name.partition(".")[0]


_imports: _Imports | None = None
_released = False
#: Resident memory after the last collection; a cell that left less than :data:`LEFT_OVER` more
#: behind is not worth a full collection (tens of milliseconds with a library loaded).
_after_release = 0
LEFT_OVER = 16 << 20


def watch_imports() -> None:
    """Measure what each package costs this process from now on; what it holds now is its
    floor. Done once, when the cell process imports this module (before its first cell's
    state and inputs import the libraries they need); :meth:`PeakMemory.start` does it in a
    process that did not."""
    global _imports
    if _imports is None:
        _imports = _Imports()


def _in_cell_process() -> bool:
    main = sys.modules.get("__main__")
    return getattr(getattr(main, "__spec__", None), "name", None) == "taskcell.runner.child"


def release() -> None:
    """Hand free heap back to the system, collecting the last cell's garbage first where it
    left memory behind (:data:`LEFT_OVER`; a full collection takes tens of milliseconds).

    The cell process calls it while it waits for its next cell, so that cell need not pay for
    it; :meth:`PeakMemory.start` does it otherwise.
    """
    global _released, _after_release
    if _resident() > _after_release + LEFT_OVER:
        gc.collect()  # a cell's functions and its namespace hold each other: a cycle
    _trim()
    _released, _after_release = True, _resident()


def _trim() -> None:
    """Hand the heap's free pages back: glibc's, and pyarrow's pool where pyarrow is loaded."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)
    arrow = sys.modules.get("pyarrow")  # its own allocator keeps freed memory for reuse
    if arrow is not None:
        with contextlib.suppress(Exception):
            arrow.default_memory_pool().release_unused()


def _untouched_shared() -> int:
    """Bytes of shared segments resident in this process but not touched since the start."""
    total = rss = referenced = 0
    inside = False
    with contextlib.suppress(OSError), open("/proc/self/smaps") as f:
        for line in f:
            if not line[:1].isupper():  # a mapping's first line: its address range
                total += max(rss - referenced, 0) if inside else 0
                inside, rss, referenced = _SHARED_SEGMENT in line, 0, 0
            elif inside and line.startswith("Rss:"):
                rss = int(line.split()[1]) * 1024
            elif inside and line.startswith("Referenced:"):
                referenced = int(line.split()[1]) * 1024
    return total + (max(rss - referenced, 0) if inside else 0)


class _Child:
    """One process the cell started (or one of theirs), as the sampler last saw it.

    A child whose command line is its parent's is a copy of it (forked): the pages it still
    shares with its parent are not its own. One seen only once may be a copy that is about to
    run a new program (``subprocess`` forks, or vforks sharing its parent's memory outright, then
    execs): it counts from its second sample, when its command line says which it is.
    """

    def __init__(self, pid: int, parent: int) -> None:
        self.pid = pid
        self.parent_command = _command_line(parent)
        self.forked = _command_line(pid) == self.parent_command
        self.shared = 0
        self.shared_read = -SHARED_INTERVAL
        self.samples = 0
        self.peak = 0  # its high-water mark, less what it shares

    def sample(self, now: float) -> bool:
        """Read its peak; False once it has gone."""
        status = _status(self.pid)
        if "VmHWM" not in status:
            return False
        self.samples += 1
        if self.forked:
            command = _command_line(self.pid)
            if not command:  # it is exiting (its memory went after its status was read)
                return True
            if command != self.parent_command:
                self.forked, self.shared = False, 0  # it ran a new program: all it holds is its own
        if self.forked and self.samples == 1:
            return True
        if self.forked and now - self.shared_read >= SHARED_INTERVAL:
            shared = _shared_pages(self.pid)
            if shared is None:  # it is exiting: its memory is going, what was read stands
                return True
            # The most it shared: pages its parent let go of since the fork are its alone now,
            # but they were never its to count (seen as 1.6 GB for two 400 MB children).
            self.shared, self.shared_read = max(self.shared, shared), now
        self.peak = max(status["VmHWM"] - self.shared, 0)
        return True


def _shared_pages(pid: int) -> int | None:
    """The pages ``pid`` shares with others (bytes); None where its memory cannot be read any
    more (it is exiting), which must not read as nothing shared."""
    shared = resident = 0
    with contextlib.suppress(OSError), open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith(("Shared_Clean:", "Shared_Dirty:")):
                shared += int(line.split()[1]) * 1024
            elif line.startswith("Rss:"):
                resident = int(line.split()[1]) * 1024
    return shared if resident else None


def _last_pid() -> bytes:
    """The latest process id the system handed out: when it has not changed, no process (nor
    thread) was started, and the cell's children need no new search."""
    try:
        with open("/proc/loadavg", "rb") as f:
            return f.read().split()[-1]
    except (OSError, IndexError):
        return b""


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process this one can see."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name, in parentheses, may hold spaces: count fields from its end.
        found[int(entry.name)] = int(stat[stat.rindex(b")") + 2 :].split()[1])
    return found


def _command_line(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


class _Sampler:
    """Samples the running cell's child processes from one thread, started once per process:
    :meth:`begin` before a cell, :meth:`finish` after it; ``peak``: the most the cell and its
    children held at once, as this process's resident memory counts it. (A thread per cell
    costs a thread's start and join on every cell, trivial ones included.)"""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # held while sampling: finish waits for a sample under way
        self._active = threading.Event()
        self._wake = threading.Event()
        self._begin_state()
        thread = threading.Thread(target=self._run, name="taskcell-peak-memory", daemon=True)
        thread.start()

    def _begin_state(self) -> None:
        self._children: dict[int, _Child] = {}
        self._last_pid = _last_pid()  # processes made before the cell
        self._searched = -SEARCH_INTERVAL
        self.peak = 0
        #: The largest high-water mark of a child seen, shared pages and all.
        self.largest_seen = 0

    def begin(self) -> None:
        with self._lock:
            self._begin_state()
            self._wake.clear()
            self._active.set()

    def _run(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # interrupts are the cell's
        while True:
            self._active.wait()
            self._wake.wait(INTERVAL)
            with self._lock:
                if self._active.is_set():
                    self.sample(search=True)

    def finish(self) -> None:
        """Stop sampling; sample the children seen once more (one that ended since then
        counts through ``RUSAGE_CHILDREN``)."""
        with self._lock:
            self._active.clear()
            self._wake.set()
        self.sample(search=False)

    def sample(self, search: bool) -> None:
        now = time.monotonic()
        if search and now - self._searched >= SEARCH_INTERVAL:
            last_pid = _last_pid()
            if last_pid and last_pid != self._last_pid:
                self._last_pid, self._searched = last_pid, now
                with contextlib.suppress(OSError):
                    self._search()
        if not self._children:
            return
        live = [c for c in self._children.values() if c.sample(now)]
        self._children = {c.pid: c for c in live}
        for child in live:
            self.largest_seen = max(self.largest_seen, child.peak + child.shared)
        self.peak = max(self.peak, _resident() + sum(c.peak for c in live))

    def _search(self) -> None:
        """Find the cell's children and theirs."""
        kids: dict[int, list[int]] = {}
        for pid, parent in _parents().items():
            kids.setdefault(parent, []).append(pid)
        found: dict[int, _Child] = {}
        todo = [os.getpid()]
        while todo:
            parent = todo.pop()
            for pid in kids.get(parent, ()):
                found[pid] = self._children.get(pid) or _Child(pid, parent)
                todo.append(pid)
        self._children = found


_the_sampler: _Sampler | None = None


def _sampler() -> _Sampler:
    """This process's one sampler, started on first use."""
    global _the_sampler
    if _the_sampler is None:
        _the_sampler = _Sampler()
    return _the_sampler


_top_level: tuple[int, frozenset[str]] = (-1, frozenset())


def _top_level_modules() -> frozenset[str]:
    """The top-level packages imported so far; read again only when ``sys.modules`` grew or
    shrank (a cell that imports nothing, most of them, reuses the last answer)."""
    global _top_level
    count = len(sys.modules)
    if count != _top_level[0]:
        _top_level = count, frozenset(name.partition(".")[0] for name in list(sys.modules))
    return _top_level[1]


class PeakMemory:
    """The peak memory of one cell, its child processes included: ``start()`` before the
    cell's code, ``stop()`` after it (bytes). See the module's docstring for what counts.

    ``start(namespace)`` lets the cell's values say which libraries it uses; without it, the
    libraries it imports say so alone.
    """

    def __init__(self) -> None:
        #: Whether the figure is the cell's own; False where the high-water mark cannot be reset.
        self.own = False
        self._namespace: Mapping[str, Any] | None = None
        self._start = self._shared = self._children_before = 0
        self._loaded: frozenset[str] = frozenset()
        self._sampler: _Sampler | None = None

    def start(self, namespace: Mapping[str, Any] | None = None) -> None:
        global _released
        watch_imports()
        if not _released:
            release()
        _released = False
        self._shared = _status().get("RssShmem", 0)
        if self._shared:
            _write("/proc/self/clear_refs", "3")  # accessed bits of mapped pages
        self.own = _write("/proc/self/clear_refs", "5")  # the high-water mark
        if not self.own:
            return
        assert _imports is not None
        _imports.reset()
        self._namespace = namespace
        self._loaded = _top_level_modules()
        self._start = _resident()
        self._children_before = _children_peak()
        self._sampler = _sampler()
        self._sampler.begin()

    def stop(self) -> int:
        if not self.own or self._sampler is None or _imports is None:
            return _lifetime_peak()
        self._sampler.finish()
        own = _status().get("VmHWM", 0)
        held = max(own, self._sampler.peak)
        # A child that ended between two samples. A child's figure holds its parent's pages
        # until it runs a new program: one no larger than this process may be only those.
        children = _children_peak()
        if children > max(self._children_before, self._sampler.largest_seen, own):
            held = max(held, self._start + children)
        untouched = _untouched_shared() if self._shared else 0
        gained = held - untouched - (self._start - self._shared)
        libraries = _imports.held(self._loaded, self._namespace)
        self._sampler, self._namespace = None, None
        return _imports.floor + libraries + max(gained, 0)


def _lifetime_peak() -> int:
    """The process's peak since it started: all there is where it cannot be reset."""
    status = _status()
    if "VmHWM" in status:
        return status["VmHWM"]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes there, KiB elsewhere


if _in_cell_process():  # ``python -m taskcell.runner.child`` imports this module first thing
    watch_imports()
