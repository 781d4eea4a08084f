"""Generated notebooks print, exported to every target, what they print in a kernel.

The examples of the kernel's differential check (``tests/generated_cells.py``: a setup cell, a
cell over the values it made, a later cell) become notebooks: per example a cell printing
``EXAMPLE-<n>``, the setup, the cell as ``%%task``, a probe, the later cell and the probe again.
The probe is :data:`~generated_cells.PROBE`'s description of every name the example has bound
there (the names a kernel's probe found when the example ran alone), so identity, aliases,
views, a class's state and a function's defaults, closure and globals are all printed. Several
examples share one notebook, after :data:`~generated_cells.PRELUDE`'s imports.

What is compared is what a user reads on stdout: the reference is the same notebook run top to
bottom in a real kernel, its ``%%task`` lines left out (the kernel differential shows that a
``%%task`` cell means what the cell means), each cell's stdout followed by its ``Out[]`` as
``text/plain`` and a newline, which is what an exported module prints for a cell's trailing
expression. stderr is not compared (the SDKs log there). Each target's module runs as its users
run it (``python workflow.py --scheduler ADDRESS``; ``--local`` in the Flyte SDK's venv; plainly
in the Latch SDK's venv), all at once, and prints exactly the reference.

An example export refuses (a value a target cannot carry) must be refused by an
:class:`~taskcell.export.ExportError` naming its cells before anything is written; it is then
left out of that target's notebook, so it hides no other example. Examples whose cells raise
in the kernel are left out: a raising cell ends a module, and every example after it with it.

Each example is a test per target. A difference found and not fixed yet is a rule in
:data:`KNOWN`, which marks the examples it covers ``xfail(strict=True)``.

``TASKCELL_EXPORT_DIFFERENTIAL_EXAMPLES=N`` draws N examples instead of :data:`EXAMPLES` (18
take about 75 s on two cores, 36 about 85 s).
"""

from __future__ import annotations

import contextlib
import difflib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest
from conftest import KernelSession
from generated_cells import FOCUSES, PRELUDE, PROBE, PROBE_FUNCTION, Example, examples
from hypothesis import HealthCheck, Phase, given, settings

from export.sdks import sdk_python
from taskcell.export import ExportError, ExportWarning, export_notebook, write_module

from .conftest import notebook

#: Examples drawn (deterministically); ``TASKCELL_EXPORT_DIFFERENTIAL_EXAMPLES`` for more.
EXAMPLES = int(os.environ.get("TASKCELL_EXPORT_DIFFERENTIAL_EXAMPLES", "18"))

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900 + 20 * EXAMPLES)]

TARGETS = ("dask", "flyte", "latch")

#: Seconds a kernel cell or a module may take before the test calls it a hang.
PATIENCE = 300


def drawn(count: int) -> list[Example]:
    """``count`` distinct examples, drawn the same way on every run: a few of each focus, taken
    in turns (each focus's second first: its first is hypothesis's simplest, the least varied)."""
    each = max(2, -(-count // len(FOCUSES)))
    per_focus: list[list[Example]] = []
    for focus in FOCUSES:
        per_focus.append([])

        @settings(
            max_examples=each + 1,
            deadline=None,
            derandomize=True,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(example=examples(focus))
        def collect(example: Example) -> None:
            if example not in per_focus[-1]:
                per_focus[-1].append(example)

        collect()
        found = per_focus[-1]
        per_focus[-1] = [*found[1:2], *found[:1], *found[2:]]
    turns = [found[i] for i in range(each + 1) for found in per_focus if i < len(found)]
    return list(dict.fromkeys(turns))[:count]


def probe(names: list[str]) -> str:
    """The probe cell of a module: :data:`PROBE_FUNCTION` over ``names``, read by name (so
    every target carries them to the cell) and the notebook's globals."""
    read = ", ".join(f"{name!r}: {name}" for name in names)
    return f"{PROBE_FUNCTION}\n_taskcell_probe({{{read}}}, globals())\ndel _taskcell_probe"


@dataclass(frozen=True)
class Drawn:
    """One example and its cells in a notebook (after the prelude), ``%%task`` on its cell."""

    number: int
    example: Example
    cells: tuple[str, ...]


def _mini(number: int, example: Example, names: list[list[str]]) -> Drawn:
    cells = [f"print('EXAMPLE-{number}')", example.setup, f"%%task\n{example.cell}"]
    cells.append(probe(names[0]))
    if example.later:
        cells += [example.later, probe(names[1])]
    return Drawn(number, example, tuple(cells))


def plain(cell: str) -> str:
    """The cell as a kernel without taskcell runs it: a ``%%task`` line left out."""
    return cell.split("\n", 1)[1] if cell.startswith("%%task") else cell


@contextlib.contextmanager
def kernel(folder: Path) -> Iterator[KernelSession]:
    session = KernelSession()
    try:
        out = session.run(f"import os\nos.chdir({str(folder)!r})", timeout=PATIENCE)
        assert out.status == "ok", out.error_text
        yield session
    finally:
        session.stop()


def kernel_printed(session: KernelSession, cells: tuple[str, ...]) -> str:
    """What the cells print in the kernel, run in order: each cell's stdout, then its Out[]."""
    printed = []
    for cell in cells:
        out = session.run(plain(cell), timeout=PATIENCE)
        assert out.status == "ok", f"the reference raised in:\n{cell}\n{out.error_text}"
        printed.append(out.stdout + ("" if out.result is None else out.result + "\n"))
    return "".join(printed)


def _raises_or_names(session: KernelSession, example: Example) -> list[list[str]] | None:
    """The names bound after the cell and after the later cell, the example run alone in a
    fresh namespace; None where one of its cells raises."""
    names = []
    for cell in (f"%reset -f\n{PRELUDE}\n{example.setup}", example.cell, example.later):
        out = session.run(cell, timeout=PATIENCE)
        if out.status != "ok":
            return None
        found = session.run(PROBE, timeout=PATIENCE)
        assert found.status == "ok", found.error_text
        names.append(sorted(json.loads(found.stdout.split("PROBE-JSON", 1)[1])))
    return names[1:]


@dataclass
class Refusal:
    message: str
    written: bool
    cells: int


@dataclass
class Run:
    """One target's module of the examples it exported, run, and the reference it matches."""

    reference: str
    finished: subprocess.CompletedProcess
    exported: dict[int, Drawn]
    refused: dict[int, Refusal]


@dataclass
class Runs:
    drawn: list[Example]
    raising: set[int]
    targets: dict[str, Run]


def _refused(drawn: Drawn, target: str, folder: Path) -> Refusal | None:
    """Export the example's notebook alone; how export refused it, if it did."""
    path = folder / f"example-{drawn.number}-{target}.ipynb"
    nbformat.write(notebook(PRELUDE, *drawn.cells), path)
    output = path.with_suffix(".py")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ExportWarning)
            write_module(path, output, target)
    except ExportError as e:
        return Refusal(str(e), output.exists(), len(drawn.cells) + 1)
    return None


@pytest.fixture(scope="module")
def runs(module_dask, tmp_path_factory) -> Runs:
    """Every target's module of the examples it exports, run at once; and the refusals."""
    folder = tmp_path_factory.mktemp("examples")
    examples_drawn = drawn(EXAMPLES)
    kept: list[Drawn] = []
    with kernel(tmp_path_factory.mktemp("alone")) as session:
        for number, example in enumerate(examples_drawn):
            names = _raises_or_names(session, example)
            if names is not None:  # a raising cell ends a module: see the module's docstring
                kept.append(_mini(number, example, names))
    raising = set(range(len(examples_drawn))) - {d.number for d in kept}
    exported: dict[str, dict[int, Drawn]] = {}
    refused: dict[str, dict[int, Refusal]] = {}
    for target in TARGETS:
        verdicts = [(d, _refused(d, target, folder)) for d in kept]
        exported[target] = {d.number: d for d, no in verdicts if no is None}
        refused[target] = {d.number: no for d, no in verdicts if no is not None}
    references: dict[tuple[int, ...], str] = {}
    for target in TARGETS:
        key = tuple(exported[target])
        if key and key not in references:
            cells = (PRELUDE, *(c for d in exported[target].values() for c in d.cells))
            with kernel(tmp_path_factory.mktemp("reference")) as session:
                references[key] = kernel_printed(session, cells)
    module_dask.worker()
    module_dask.wait_for_workers(1)
    options = {"dask": ["--scheduler", module_dask.address], "flyte": ["--local"], "latch": []}
    started: dict[str, subprocess.Popen] = {}
    done: dict[str, Run] = {}
    try:
        for target in TARGETS:
            if not exported[target]:
                continue
            python = Path(sys.executable) if target == "dask" else sdk_python(target)
            where = tmp_path_factory.mktemp(target)
            module = where / "workflow.py"
            cells = (PRELUDE, *(c for d in exported[target].values() for c in d.cells))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ExportWarning)
                module.write_text(export_notebook(notebook(*cells), target))
            env = {**os.environ, "PYTHONPATH": "", "LOG_LEVEL": "error", "TMPDIR": str(where)}
            started[target] = subprocess.Popen(
                [str(python), str(module), *options[target]],
                cwd=where,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,  # its cluster's processes end with it
            )
        for target, process in started.items():
            stdout, stderr = process.communicate(timeout=PATIENCE)
            finished = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
            reference = references[tuple(exported[target])]
            done[target] = Run(reference, finished, exported[target], refused[target])
    finally:
        for process in started.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    for target in TARGETS:
        if target not in done:
            nothing = subprocess.CompletedProcess([], 0, "", "")
            done[target] = Run("", nothing, {}, refused[target])
    return Runs(examples_drawn, raising, done)


_EXAMPLE = re.compile(r"^EXAMPLE-(\d+)$", re.M)


def _by_example(printed: str) -> dict[str, str]:
    parts = _EXAMPLE.split(printed)
    blocks = {"prelude": parts[0]}
    for number, text in zip(parts[1::2], parts[2::2], strict=True):
        blocks[number] = text
    return blocks


def _differences(left: Any, right: Any, path: str = "") -> Iterator[str]:
    """Where two probe descriptions differ, as ``path: notebook ... != module ...`` lines."""
    if type(left) is not type(right) or not isinstance(left, (dict, list)):
        if left != right:
            shown = (json.dumps(v)[:200] for v in (left, right))
            yield f"{path or '<top>'}: notebook {next(shown)} != module {next(shown)}"
    elif isinstance(left, dict):
        for key in sorted(set(left) | set(right)):
            parts = left.get(key, "<absent>"), right.get(key, "<absent>")
            yield from _differences(*parts, f"{path}.{key}")
    else:
        if len(left) != len(right):
            yield f"{path}: notebook has {len(left)} items, module {len(right)}"
        for i, (a, b) in enumerate(zip(left, right, strict=False)):
            yield from _differences(a, b, f"{path}[{i}]")


def _explained(drawn: Drawn, expected: str, got: str) -> str:
    """The example's cells and what differs in what it printed."""
    lines = [str(drawn.example)]
    left, right = expected.splitlines(), got.splitlines()
    for a, b in zip(left, right, strict=False):
        if a.startswith("PROBE-JSON") and b.startswith("PROBE-JSON") and a != b:
            found = _differences(json.loads(a[10:]), json.loads(b[10:]))
            lines += [f"  probe {d}" for d in itertools.islice(found, 12)]
    plain_lines = [line for line in left if not line.startswith("PROBE-JSON")]
    module_lines = [line for line in right if not line.startswith("PROBE-JSON")]
    diff = difflib.unified_diff(plain_lines, module_lines, "notebook", "module", lineterm="")
    lines += [f"  {line}" for line in diff]
    if len(left) != len(right):
        lines.append(f"  {len(left)} lines printed by the notebook, {len(right)} by the module")
    return "\n".join(lines)


@dataclass(frozen=True)
class Known:
    """A difference found and not fixed yet: examples whose ``part`` (``"cell"``, the
    ``%%task`` cell, or ``"setup"``) matches ``pattern`` print something else in ``targets``."""

    pattern: str
    targets: tuple[str, ...]
    reason: str
    part: str = "cell"


#: The differences this check found that remain, each a rule the modules do not keep yet.
KNOWN: list[Known] = [
    Known(
        r"^(def|class|@)",
        ("latch",),
        "Latch: a function or class a plain cell defines is local to that cell's task, and "
        "travels to later tasks by value: its __qualname__ reads cell_N.<locals>.NAME (a "
        "dataclass's repr too), its globals are a copy, the names it reads are closure cells",
        part="setup",
    ),
    Known(
        r"Registry\.",
        ("dask",),
        "a notebook class a task changes (a class attribute set, a classmethod appending to "
        "class state) is a definition, which the task never sends back (flow._gives)",
    ),
    Known(
        r"counter\(\)|acc\(",
        ("dask", "flyte"),
        "a call that changes a notebook function's own state (a closure cell: counter(); a "
        "mutable default: acc(2)) changes the task's copy: the analysis sees no change of "
        "the function to send back, where %%task compares what it sent with what it got",
    ),
    Known(
        r"lambda",
        ("dask",),
        "a function a task makes comes back (cloudpickle) with globals of its own, not the "
        "module's: it would not see a later rebinding of a notebook name",
    ),
    Known(
        r"held\.things|\bp\.x = ",
        ("flyte",),
        "Flyte: an instance of a notebook class coming back from a task: cloudpickle, loading "
        "the class by value where it was made, sets the notebook's class's attributes again "
        "from the copy, so its methods' globals become a copy of the module's (the dask "
        "runtime keeps the classes as they were, as %%task does)",
    ),
    Known(
        r"double\(",
        ("dask", "flyte"),
        "a call to a function a decorator made (double = logged(double)) that changes a "
        "notebook name (calls.append) is not seen as changing it: the task's change to "
        "calls stays in the task",
    ),
    Known(
        r"^view\[",
        ("latch",),
        "Latch: a view and its base travel between tasks as values of their own: a change "
        "through the view does not reach the base",
    ),
    Known(
        r"= rec\['y'\]",
        ("dask", "flyte"),
        "a view of an input that a task binds comes back as an array of its own "
        "(col.base is rec no longer holds), where %%task sends it back as a view",
    ),
]


def _known(example: Example, target: str) -> Known | None:
    def part(k: Known) -> str:
        return example.cell if k.part == "cell" else example.setup

    return next(
        (k for k in KNOWN if target in k.targets and re.search(k.pattern, part(k), re.M)), None
    )


@pytest.mark.parametrize("target", TARGETS)
def test_the_module_runs_to_its_end(runs, target):
    run = runs.targets[target]
    if not run.exported:
        pytest.skip(f"{target} refused every example")
    assert run.finished.returncode == 0, run.finished.stderr[-4000:]
    assert _by_example(run.finished.stdout)["prelude"] == _by_example(run.reference)["prelude"]


@pytest.mark.parametrize("number", range(EXAMPLES))
@pytest.mark.parametrize("target", TARGETS)
def test_an_example_prints_what_the_notebook_printed(runs, target, number, request):
    """Its block of the module's output (from ``EXAMPLE-<n>`` to the next) is the notebook's;
    or export refused it by an error naming its cells, and wrote nothing."""
    if number >= len(runs.drawn):
        pytest.skip(f"only {len(runs.drawn)} distinct examples were drawn")
    if number in runs.raising:
        pytest.skip("a cell of the example raises: a raising cell ends a module")
    run = runs.targets[target]
    refusal = run.refused.get(number)
    if refusal is not None:
        assert not refusal.written, refusal
        named = {int(n) for n in re.findall(r"\bcell (\d+)\b", refusal.message)}
        assert named and named <= set(range(1, refusal.cells + 1)), refusal
        return
    known = _known(runs.drawn[number], target)
    if known is not None:
        request.applymarker(pytest.mark.xfail(strict=True, reason=known.reason))
    expected = _by_example(run.reference)[str(number)]
    got = _by_example(run.finished.stdout).get(str(number), "<nothing: the module ended>")
    same = got == expected  # a bool: pytest's own diff of two long probe lines takes hours
    assert same, _explained(run.exported[number], expected, got)
