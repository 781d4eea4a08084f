"""The differential check of ``%%task``: a cell run plainly in one kernel, as a task in another.

The contract (DESIGN.md, "Values between the notebook and the cluster"): the same cell run locally
and as a task gives the same namespace and output, or the task cell is refused by name before it
ran. A :class:`Pair` holds the two real kernels, ``L`` (plain) and ``T`` (``%%task``, pointed at a
real cluster); :func:`check` runs one :class:`Example` in both and says what differs.

What is compared, after each cell: what the cell printed (stdout and stderr, taskcell's own
``taskcell:`` lines left out), its ``Out[]``, whether it raised and what, and :data:`PROBE`'s
description of every name of the notebook. The probe describes a value structurally; an
object with an identity met a second time is ``{"same as": PATH}``, the path where the walk
first met it, so two names (or two places in a container) that hold one object,
``view.base is base``, ``type(p) is Point`` and a class's state all show in the description,
and equal descriptions mean the two namespaces cannot be told apart by ``is``, ``==``,
``repr`` or a class's state.

Two differences are allowed, both as README.md describes ``%%task``:

- a cell that raises changes nothing in ``T`` (what it changed before raising stays in ``L``);
  the two still print the same and raise the same error;
- a cell reading an input that cannot travel (a generator, a file) may be refused before it
  runs, by an error naming that input, with the namespace unchanged.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from conftest import Execution, KernelSession

#: Seconds one cell may take before the check calls it a hang (never a judgement of speed).
CELL_TIMEOUT = float(os.environ.get("TASKCELL_DIFFERENTIAL_CELL_TIMEOUT", "240"))

#: What every example's kernels import before its setup cell; modules are not compared.
PRELUDE = """\
import collections, contextlib, dataclasses, enum, functools, itertools, sys
from dataclasses import dataclass, field
import numpy as np
import pandas as pd
"""

#: The probe cell: prints ``PROBE-JSON`` and a description of every name of the notebook. An
#: object with an identity is described where the walk first meets it (names in sorted order);
#: wherever else it is met, it is ``{"same as": PATH}``, the path where it was first met.
PROBE = r"""
def _taskcell_probe():
    import enum, functools, hashlib, inspect, io, json, re, sys, types
    np = sys.modules.get("numpy")
    pd = sys.modules.get("pandas")
    ns = get_ipython().user_ns
    hidden = {"In", "Out", "exit", "quit", "get_ipython"}
    atoms = (type(None), bool, int, float, complex, str, bytes)
    address = re.compile(r" at 0x[0-9a-fA-F]+")
    first_met, keep, based = {}, [], []

    def shown(value):
        try:
            return address.sub(" at 0x…", repr(value))
        except Exception as e:
            return f"<repr raised {type(e).__name__}: {e}>"

    def named(t):
        return f"{getattr(t, '__module__', '?')}.{getattr(t, '__qualname__', '?')}"

    def notebooks(obj):
        return getattr(obj, "__module__", None) == "__main__"

    def canon(value, path):
        if type(value) in atoms:
            return shown(value)
        if isinstance(value, types.ModuleType):
            return ["module", value.__name__]
        if isinstance(value, type) and not notebooks(value):
            return ["type", named(value)]
        if isinstance(value, types.BuiltinFunctionType) or (
            isinstance(value, types.FunctionType) and not notebooks(value)
        ):
            return ["function", named(value)]
        if path.count(".") + path.count("[") > 24:
            return ["deep", named(type(value))]
        if id(value) in first_met:
            return {"same as": first_met[id(value)]}
        first_met[id(value)] = path
        keep.append(value)
        return describe(value, path)

    def kind(value, path):
        t = type(value)
        return canon(t, f"type({path})") if notebooks(t) else named(t)

    def function(f, path):
        closure = []
        for i, c in enumerate(f.__closure__ or ()):
            try:
                closure.append(canon(c.cell_contents, f"{path}.<closure {i}>"))
            except ValueError:
                closure.append("<empty cell>")
        g = f.__globals__
        return {
            "function": f.__qualname__,
            "globals": "notebook" if g is ns else g.get("__name__", "?"),
            "defaults": canon(f.__defaults__, f"{path}.__defaults__"),
            "kwdefaults": canon(f.__kwdefaults__, f"{path}.__kwdefaults__"),
            "closure": closure,
            "wrapped": canon(f.__dict__.get("__wrapped__"), f"{path}.__wrapped__"),
            "dict": canon(
                {k: v for k, v in f.__dict__.items() if k != "__wrapped__"}, f"vars({path})"
            ),
        }

    def items(pairs, path):
        out = []
        for i, (k, v) in enumerate(pairs):
            step = f"[{shown(k)}]" if type(k) in atoms else f".<item {i}>"
            out.append([canon(k, f"{path}.<key {i}>"), canon(v, path + step)])
        return out

    def describe(value, path):
        t = type(value)
        if isinstance(value, type):
            attrs, others = {}, []
            skip = ("__dict__", "__weakref__", "__doc__", "__module__", "__slotnames__")
            for k, v in vars(value).items():
                if k in skip:  # __slotnames__: a cache pickling an instance leaves on its class
                    continue
                if isinstance(v, types.FunctionType):
                    attrs[k] = canon(v, f"{path}.{k}")
                elif k.startswith("_") or hasattr(v, "__get__"):
                    others.append(k)
                else:
                    attrs[k] = canon(v, f"{path}.{k}")
            return {
                "class": value.__qualname__,
                "bases": [canon(b, f"{path}.__bases__[{i}]")
                          for i, b in enumerate(value.__bases__)],
                "attrs": attrs,
                "others": sorted(others),
            }
        if isinstance(value, enum.Enum):
            return {"enum": kind(value, path), "name": value.name,
                    "value": canon(value.value, f"{path}.value")}
        if isinstance(value, types.FunctionType):
            return function(value, path)
        if isinstance(value, functools._lru_cache_wrapper):
            # Not its cache_info(): a task cell's calls fill the worker's cache, never the
            # notebook's (the README says so), and results do not depend on it.
            return {
                "lru_cache": getattr(value, "__qualname__", "?"),
                "wrapped": canon(value.__wrapped__, f"{path}.__wrapped__"),
            }
        if isinstance(value, functools.partial):
            return {"partial": canon(value.func, f"{path}.func"),
                    "args": canon(value.args, f"{path}.args"),
                    "keywords": canon(value.keywords, f"{path}.keywords")}
        if isinstance(value, types.MethodType):
            return {"method": value.__func__.__qualname__,
                    "self": canon(value.__self__, f"{path}.__self__"),
                    "func": canon(value.__func__, f"{path}.__func__")}
        if isinstance(value, types.GeneratorType):
            return {"generator": value.__qualname__, "state": inspect.getgeneratorstate(value)}
        if isinstance(value, io.IOBase):
            return {"file": named(t), "name": shown(getattr(value, "name", None)),
                    "mode": shown(getattr(value, "mode", None)), "closed": value.closed,
                    "at": None if value.closed else value.tell()}
        if np is not None and isinstance(value, np.ndarray):
            chain, base = [], value.base
            while base is not None:
                keep.append(base)
                chain.append(id(base))
                base = getattr(base, "base", None)
            if value.dtype.hasobject or value.size <= 64:
                data = canon(value.tolist(), f"{path}.tolist()")
            else:
                data = hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()
            node = {"ndarray": kind(value, path), "dtype": str(value.dtype),
                    "shape": list(value.shape), "writeable": bool(value.flags.writeable),
                    "data": data}
            based.append((node, chain))
            return node
        if np is not None and isinstance(value, np.generic):
            return {"scalar": named(t), "value": shown(value.item())}
        if pd is not None and isinstance(value, pd.DataFrame):
            return {"frame": kind(value, path), "dtypes": [str(d) for d in value.dtypes],
                    "data": canon(value.to_dict(orient="split"), f"{path}.to_dict()"),
                    "attrs": canon(value.attrs, f"{path}.attrs")}
        if pd is not None and isinstance(value, (pd.Series, pd.Index)):
            return {"series": kind(value, path), "dtype": str(value.dtype),
                    "name": canon(value.name, f"{path}.name"),
                    "index": canon(getattr(value, "index", value).tolist(), f"{path}.index"),
                    "values": canon(value.tolist(), f"{path}.tolist()")}
        if isinstance(value, (list, tuple)):
            node = {"seq": kind(value, path),
                    "items": [canon(v, f"{path}[{i}]") for i, v in enumerate(value)]}
            if hasattr(value, "__dict__"):
                node["state"] = canon(vars(value), f"vars({path})")
            return node
        if isinstance(value, dict):
            return {"map": kind(value, path), "items": items(value.items(), path)}
        if isinstance(value, (set, frozenset)):
            members = sorted(value, key=shown)
            return {"set": kind(value, path),
                    "items": [canon(v, f"{path}.<member {i}>") for i, v in enumerate(members)]}
        node = {"object": kind(value, path)}
        if notebooks(t):
            node["repr"] = shown(value)
        if hasattr(value, "__dict__"):
            node["state"] = canon(vars(value), f"vars({path})")
        elif not notebooks(t):
            node["repr"] = shown(value)
        return node

    names = {}
    for name in sorted(ns):
        value = ns[name]
        if name.startswith("_") or name in hidden or isinstance(value, types.ModuleType):
            continue
        names[name] = canon(value, name)
    for node, chain in based:
        node["base"] = next((first_met[i] for i in chain if i in first_met), None)
    print("PROBE-JSON" + json.dumps(names, default=shown))


_taskcell_probe()
del _taskcell_probe
"""


_NOTE = re.compile(r"^taskcell: .*\n?", re.M)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_TIMING = re.compile(r"^(CPU times|Wall time):.*$", re.M)


@dataclass(frozen=True)
class Example:
    """One generated notebook: a setup cell, the cell run plainly or as a task, a later plain
    cell; ``travel_less`` are the setup's names that cannot be sent to a worker."""

    setup: str
    cell: str
    later: str = ""
    travel_less: frozenset[str] = frozenset()

    def __str__(self) -> str:
        parts = [f"# setup\n{self.setup}", f"# cell (plain in L; %%task in T)\n{self.cell}"]
        if self.later:
            parts.append(f"# later plain cell\n{self.later}")
        return "\n".join(parts)


@dataclass
class Seen:
    """What one cell showed in one kernel, as a user compares it."""

    status: str
    #: What it printed on each stream, in the order written there, however the kernel chunked
    #: it. The two streams are compared apart: a plain kernel does not keep the order between
    #: them (ipykernel sends each of its own buffers on its own schedule).
    streams: tuple[tuple[str, str], ...]
    result: str | None
    error: tuple[str, str] | None
    error_text: str = field(default="", compare=False)
    notes: str = field(default="", compare=False)

    @classmethod
    def of(cls, out: Execution) -> Seen:
        errors = out.of_type("error")
        error = None
        if errors:
            content = errors[0]["content"]
            error = (content["ename"], _masked(content["evalue"]))
        return cls(
            status=out.status,
            streams=_streams(out),
            result=None if out.result is None else _masked(out.result),
            error=error,
            error_text=out.error_text,
            notes="".join(_NOTE.findall(out.stderr)),
        )

    @property
    def stdout(self) -> str:
        return "".join(text for name, text in self.streams if name == "stdout")


def _streams(out: Execution) -> tuple[tuple[str, str], ...]:
    def joined(chunks):
        runs: list[tuple[str, str]] = []
        for name, text in chunks:
            if runs and runs[-1][0] == name:
                runs[-1] = (name, runs[-1][1] + text)
            elif text:
                runs.append((name, text))
        return runs

    raw = joined((m["content"]["name"], m["content"]["text"]) for m in out.of_type("stream"))
    # taskcell's own lines go, whole (a chunk may end inside one), then each stream is joined
    runs = [(name, _masked(_NOTE.sub("", text))) for name, text in raw]
    return tuple(
        (stream, "".join(text for name, text in runs if name == stream))
        for stream in ("stdout", "stderr")
    )


def _masked(text: str) -> str:
    return _ADDRESS.sub(" at 0x…", _TIMING.sub("<timing>", text))


class Pair:
    """Two real kernels for the whole module: ``L`` runs cells plainly, ``T`` as ``%%task`` cells
    on the cluster at ``address``; each works in a folder of its own."""

    def __init__(self, address: str, folders: tuple[str, str]) -> None:
        self.address = address
        self.folders = folders
        self.plain: KernelSession | None = None
        self.task: KernelSession | None = None
        self.plain = self._start(folders[0], task=False)
        try:
            self.task = self._start(folders[1], task=True)
        except BaseException:
            self.stop()
            raise

    def _start(self, folder: str, task: bool) -> KernelSession:
        session = KernelSession(env={"DASK_TASKCELL__EMBEDDED_CLUSTER__START_EARLY": "False"})
        try:
            setup = f"import os\nos.chdir({folder!r})"
            if task:
                setup += f"\n%load_ext taskcell\n%task_cluster {self.address}"
            out = session.run(setup, timeout=CELL_TIMEOUT)
            assert out.status == "ok", out.error_text
        except BaseException:
            session.stop()
            raise
        return session

    def both(self, plain_code: str, task_code: str) -> tuple[Execution, Execution]:
        """Run the two cells at once, one in each kernel. A kernel that does not answer within
        :data:`CELL_TIMEOUT` is replaced by a fresh one (so the next example starts clean) and
        the check fails."""
        assert self.plain is not None and self.task is not None
        sessions = (self.plain, self.task)
        ids = [s.start(c) for s, c in zip(sessions, (plain_code, task_code), strict=True)]
        results: list[Execution] = []
        for index, (session, msg_id) in enumerate(zip(sessions, ids, strict=True)):
            try:
                results.append(session.wait(msg_id, timeout=CELL_TIMEOUT))
            except Exception as e:
                self._replace(index)
                if index == 0:  # the other kernel's cell is still running: replace it too
                    self._replace(1)
                raise AssertionError(
                    f"kernel {'LT'[index]} did not finish a cell within {CELL_TIMEOUT:g} s "
                    f"({type(e).__name__}); cell:\n{(plain_code, task_code)[index]}"
                ) from None
            session.log.clear()
        return results[0], results[1]

    def _replace(self, index: int) -> None:
        old = (self.plain, self.task)[index]
        if old is not None:
            old.stop()
        fresh = self._start(self.folders[index], task=index == 1)
        if index == 0:
            self.plain = fresh
        else:
            self.task = fresh

    def probes(self) -> tuple[dict, dict]:
        plain, task = self.both(PROBE, PROBE)
        return _probed(plain, "L"), _probed(task, "T")

    def stop(self) -> None:
        for session in (self.plain, self.task):
            if session is not None:
                session.stop()


def _probed(out: Execution, which: str) -> dict:
    assert out.status == "ok" and "PROBE-JSON" in out.stdout, (
        f"the setup or probe failed in kernel {which}: {out.error_text or out.stdout or out.stderr}"
    )
    return json.loads(out.stdout.split("PROBE-JSON", 1)[1])


def differences(left: Any, right: Any, path: str = "") -> Iterator[str]:
    """Where two probe descriptions differ, as ``path: left != right`` lines."""
    if type(left) is not type(right):
        yield f"{path or '<top>'}: L {_short(left)}  !=  T {_short(right)}"
    elif isinstance(left, dict):
        for key in list(left) + [k for k in right if k not in left]:
            if key not in right:
                yield f"{path}.{key}: only in L: {_short(left[key])}"
            elif key not in left:
                yield f"{path}.{key}: only in T: {_short(right[key])}"
            else:
                yield from differences(left[key], right[key], f"{path}.{key}")
    elif isinstance(left, list):
        if len(left) != len(right):
            yield f"{path}: L has {len(left)} items, T has {len(right)}"
        for i, (a, b) in enumerate(zip(left, right, strict=False)):
            yield from differences(a, b, f"{path}[{i}]")
    elif left != right:
        yield f"{path or '<top>'}: L {_short(left)}  !=  T {_short(right)}"


def _short(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "…"


def _report(what: str, lines: list[str], limit: int = 15) -> str:
    shown = "\n  ".join(lines[:limit])
    more = f"\n  … and {len(lines) - limit} more" if len(lines) > limit else ""
    return f"{what}:\n  {shown}{more}"


def _outputs_differ(step: str, plain: Seen, task: Seen) -> str | None:
    if plain == task:
        return None
    lines = [
        f"{k}: L {getattr(plain, k)!r}  !=  T {getattr(task, k)!r}"
        for k in ("status", "streams", "result", "error")
        if getattr(plain, k) != getattr(task, k)
    ]
    if task.error_text:
        lines.append("T's error: " + task.error_text.splitlines()[0][:500])
    if task.notes:
        lines.append("T's notes: " + task.notes.strip())
    return _report(f"the {step} shows something else", lines)


def _refused_by_name(task: Seen, example: Example) -> bool:
    return (
        task.status == "error"
        and task.stdout == ""
        and any(f"'{name}'" in task.error_text for name in example.travel_less)
    )


def check(pair: Pair, example: Example, refusal_allowed: bool = True) -> None:
    """Run ``example`` in both kernels; fail naming every difference the contract forbids.

    ``refusal_allowed``: a task cell refused before it ran, by an error naming one of the
    example's ``travel_less`` inputs, with the namespace unchanged, passes.
    """
    # One cell: a fresh namespace, the setup and the probe of what the setup made.
    start = f"%reset -f\n{PRELUDE}\n{example.setup}\n{PROBE}"
    started = pair.both(start, start)
    before = tuple(_probed(out, which) for out, which in zip(started, "LT", strict=True))
    setup_diff = list(differences(*before))
    assert not setup_diff, _report("the setup alone already differs (a harness bug)", setup_diff)

    plain, task = (Seen.of(o) for o in pair.both(example.cell, f"%%task\n{example.cell}"))
    after = pair.probes()
    if refusal_allowed and _refused_by_name(task, example) and after[1] == before[1]:
        return
    problems: list[str] = []
    if plain.status == "error":
        # A cell that raises changes nothing as a task; as a plain cell its changes stay.
        unchanged = list(differences(before[1], after[1]))
        if unchanged:
            problems.append(_report("the task cell raised but changed the notebook", unchanged))
    else:
        changed = list(differences(*after))
        if changed:
            problems.append(_report("the namespaces differ after the cell", changed))
    shown = _outputs_differ("cell", plain, task)
    if shown:
        problems.append(shown)
    if not problems and example.later and plain.status == "ok":
        later = tuple(Seen.of(o) for o in pair.both(example.later, example.later))
        shown = _outputs_differ("later plain cell", *later)
        if shown:
            problems.append(shown)
        final = list(differences(*pair.probes()))
        if final:
            problems.append(_report("the namespaces differ after the later cell", final))
    assert not problems, f"{example}\n\n" + "\n\n".join(problems)
