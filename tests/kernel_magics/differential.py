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
from generated_cells import PRELUDE, PROBE, Example

#: Seconds one cell may take before the check calls it a hang (never a judgement of speed).
CELL_TIMEOUT = float(os.environ.get("TASKCELL_DIFFERENTIAL_CELL_TIMEOUT", "240"))


_NOTE = re.compile(r"^taskcell: .*\n?", re.M)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_TIMING = re.compile(r"^(CPU times|Wall time):.*$", re.M)


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
