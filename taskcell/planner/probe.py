"""``%%task auto --probe``: a cell's memory measured on samples of its input, not guessed.

Where the code gives the planner no basis (a function it does not know, a pairwise product
written with broadcasting, a list built row by row), ``--probe`` measures instead. The cell's
large sliceable inputs (pandas DataFrames and Series, numpy arrays, lists and tuples of
:data:`SLICED_FROM` bytes or more) are cut to their first rows (:func:`plan_probe`), and the
cell runs as a task on each sample, smallest first, each twice the last, until the last one's
memory grew over the one before by :data:`GROWN` (enough to stand above the measurement's
noise) or the samples reach half the input or :data:`SAMPLE_CAP` bytes. Nothing the cell binds
is written back, and the notebook's names stay as they were. Each run's peak is the one the
cell's process measures for any task (:mod:`taskcell.runner.peak_memory`). The last three
peaks give how the memory grows (:func:`extrapolate`): as the input (so many bytes per input
byte), or as a power of it (a pairwise product grows as its square), which decides the peak at
full size. Each probe asks for what auto would choose for the cell on the largest sample
(:func:`probe_request`), not for the whole input: samples wait for no large worker.

A probe runs the cell three times or more, so a cell with effects outside its names is refused
before anything runs (:func:`effects`): one that writes or removes files, runs shell
commands, or uses Dask (whose work runs on other workers, which the probe does not measure).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from taskcell.errors import SpecError
from taskcell.planner.auto import AutoChoice, auto_preset, fit_line, from_probe
from taskcell.planner.estimate import FLOOR, cell_input, estimate_memory
from taskcell.runner import crossing
from taskcell.runner.analysis import analyze_cell, dotted
from taskcell.runner.cell_dask import uses_dask
from taskcell.runner.changes import is_data
from taskcell.runner.remote_value import RemoteValue
from taskcell.spec import Resources
from taskcell.spec.amounts import show_bytes
from taskcell.spec.resources import FIELDS

KiB = 1 << 10
MiB = 1 << 20
#: An input smaller than this travels whole to each probe: a parameter, a lookup table.
SLICED_FROM = 64 * KiB
#: An input with fewer rows than this is too short to sample.
MIN_ROWS = 16
#: The most bytes the largest sample of the sliced inputs holds, all of them together (unless
#: that would leave the smallest sample no row).
SAMPLE_CAP = 64 * MiB
#: The largest sample, as a fraction of the input: 1/2.
LARGEST = 2
#: The most samples a probe runs, each twice the one before; it runs three at least.
SAMPLES = 6
#: A probe stops once its last sample's peak grew this much over the one before.
GROWN = 32 * MiB
#: Growth between two probes under this is taken as the measurement's noise, not the cell's.
NOISE = 4 * MiB
#: The powers of the input a cell's memory may grow as: a measured one within a quarter of
#: one of these is taken as it; faster growth than the largest counts as the largest.
POWERS = (1, 2, 3)

#: Calls that write, move or remove files, by the last part of their name (``df.to_csv``,
#: ``np.save``, ``fig.savefig``); ``to_*`` and ``dump`` only with a path or file to write to.
_WRITERS = frozenset(
    {
        "to_csv", "to_parquet", "to_json", "to_pickle", "to_excel", "to_hdf", "to_feather",
        "to_sql", "to_stata", "to_orc", "to_netcdf", "to_zarr", "to_html", "to_latex",
        "to_markdown", "to_xml", "savefig", "save", "savez", "savez_compressed", "savetxt",
        "tofile", "write_text", "write_bytes", "touch", "mkdir", "unlink", "rmdir", "dump",
        "write_table", "write_dataset", "write_feather", "imwrite", "imsave",
    }
)  # fmt: skip
#: Calls of these modules that act outside the cell's process, by their last part.
_MODULE_EFFECTS = {
    "os": frozenset(
        {"remove", "unlink", "rename", "replace", "makedirs", "mkdir", "rmdir", "removedirs",
         "system", "popen", "kill", "symlink", "link", "truncate", "chmod", "chown"}
    ),
    "shutil": frozenset({"copy", "copy2", "copyfile", "copytree", "move", "rmtree"}),
    "subprocess": frozenset({"run", "call", "check_call", "check_output", "Popen"}),
    "requests": frozenset({"post", "put", "patch", "delete"}),
}  # fmt: skip
#: Magics a probe runs as the cell would, with nothing outside the cell's names.
_HARMLESS_MAGICS = frozenset({"%time", "%%time", "%timeit", "%%timeit", "%prun", "%%prun"})
_HARMLESS_MAGICS |= {"%%capture"}


@dataclass(frozen=True)
class Sliced:
    """An input a probe samples: its name, bytes and rows at full size."""

    name: str
    size: int
    rows: int


@dataclass(frozen=True)
class ProbePlan:
    """What a probe of a cell may run on: the inputs it samples, each at ``1/d`` of its rows
    for each ``d`` of ``fractions`` (the smallest sample first), the others sent whole."""

    sliced: tuple[Sliced, ...]
    fractions: tuple[int, ...]

    @property
    def size(self) -> int:
        """The sampled inputs' bytes at full size."""
        return sum(s.size for s in self.sliced)

    def names(self) -> str:
        return ", ".join(s.name for s in self.sliced)


def refused(why: str) -> SpecError:
    return SpecError(f"%%task auto --probe: {why}; nothing ran. Use %%task auto without --probe")


def effects(source: str, transform: Callable[[str], str] | None = None) -> list[str]:
    """What the cell does outside its names, which each probe would do again: the files it
    writes or removes and what else it starts outside its process (by the call that does it,
    as written, anywhere in the cell), the shell commands and magics it runs."""
    analysis = analyze_cell(source, transform)
    found = [f"runs {m}" for m in analysis.magics if m not in _HARMLESS_MAGICS]
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return found
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (what := _effect(node)) is not None:
            found.append(what)
    return list(dict.fromkeys(found))


def _effect(call: ast.Call) -> str | None:
    """``writes a file (df.to_csv)`` where ``call`` acts outside the cell's process."""
    func = call.func
    name = dotted(func)
    last = name.rpartition(".")[2]
    module = name.partition(".")[0]
    if last == "open" or name.endswith("Path(...).open"):
        mode = _mode(call, 0 if isinstance(func, ast.Attribute) else 1)
        if mode is not None and set(mode) & set("wax+"):
            return f"writes a file ({name}(..., {mode!r}))"
        return None
    if module in _MODULE_EFFECTS and "." in name and last in _MODULE_EFFECTS[module]:
        return f"acts outside its process ({name})"
    if isinstance(func, ast.Attribute) and last in _WRITERS:
        if (last.startswith("to_") or last == "dump") and not (call.args or _path_keyword(call)):
            return None  # df.to_csv() returns the text; json.dumps is not dump
        return f"writes a file ({name})"
    return None


def _mode(call: ast.Call, position: int) -> str | None:
    node = next((k.value for k in call.keywords if k.arg == "mode"), None)
    if node is None and len(call.args) > position:
        node = call.args[position]
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _path_keyword(call: ast.Call) -> bool:
    return any(k.arg in ("path", "path_or_buf", "excel_writer", "buf", "fname", "file", "fp")
               for k in call.keywords)  # fmt: skip


def _rows(value: Any) -> int | None:
    """How many rows a probe can cut ``value`` to; None where it cannot."""
    if type(value).__module__.partition(".")[0] == "pandas" and hasattr(value, "iloc"):
        return len(value)
    if type(value).__module__ == "numpy" and getattr(value, "ndim", 0) >= 1:
        return int(value.shape[0])
    if isinstance(value, (list, tuple)):
        return len(value)
    return None


def sample(value: Any, rows: int) -> Any:
    """``value``'s first ``rows`` rows, a new object: the notebook's stays as it is."""
    if hasattr(value, "iloc"):
        return value.iloc[:rows].copy()
    if hasattr(value, "shape"):
        return value[:rows].copy()
    return value[:rows]  # a list's or tuple's slice is a new one


def plan_probe(
    source: str, namespace: Mapping[str, Any], transform: Callable[[str], str] | None = None
) -> ProbePlan:
    """The inputs a probe of ``source`` samples and at which fractions; a :class:`SpecError`
    naming why where the cell cannot be probed (effects outside its names, or no input to
    sample), before anything runs."""
    done = effects(source, transform)
    analysis = analyze_cell(source, transform)
    values = {n: namespace[n] for n in analysis.inputs if n in namespace}
    if uses_dask(analysis, source, values.values()):
        done.append("uses Dask, whose work runs on other workers, which a probe does not measure")
    if done:
        raise refused(f"the cell {'; '.join(done)}, which each probe would do again")
    sliced: list[Sliced] = []
    why_not: list[str] = []
    for name, value in values.items():
        if not is_data(value):
            continue
        kind = type(value).__name__
        rows = None if isinstance(value, RemoteValue) else _rows(value)
        size = value.nbytes if isinstance(value, RemoteValue) else crossing.size_of(value)
        if isinstance(value, RemoteValue):
            why_not.append(f"{name} is kept on a worker, which a probe would not fetch")
        elif rows is None:
            why_not.append(f"{name} ({kind}) is not a DataFrame, Series, array or list")
        elif size < SLICED_FROM:
            why_not.append(f"{name} ({kind}) holds {show_bytes(size)}, under the "
                           f"{show_bytes(SLICED_FROM)} a probe samples")  # fmt: skip
        elif rows < MIN_ROWS:
            why_not.append(f"{name} ({kind}) has {rows} rows, under the {MIN_ROWS} a probe cuts")
        else:
            sliced.append(Sliced(name, size, rows))
    if not sliced:
        reasons = "; ".join(why_not) if why_not else "it reads no notebook value"
        raise refused(f"the cell has no input a probe can sample ({reasons})")
    total = sum(s.size for s in sliced)
    largest = LARGEST  # three samples of a row at least: MIN_ROWS is over 4 * LARGEST
    fewest = min(s.rows for s in sliced)
    while total / largest > SAMPLE_CAP and fewest >= largest * 8:
        largest *= 2
    fractions = [largest << n for n in range(SAMPLES) if fewest >= largest << n]
    return ProbePlan(tuple(sliced), tuple(reversed(fractions)))


def samples(plan: ProbePlan, namespace: Mapping[str, Any], fraction: int) -> dict[str, Any]:
    """The sampled inputs at ``1/fraction`` of their rows (at least one each)."""
    return {s.name: sample(namespace[s.name], max(1, s.rows // fraction)) for s in plan.sliced}


def _head(value: Any, rows: int) -> Any:
    """``value``'s first ``rows`` rows without copying them where it can (to size a sample)."""
    return value.iloc[:rows] if hasattr(value, "iloc") else value[:rows]


def probe_request(
    plan: ProbePlan,
    static: AutoChoice | SpecError,
    source: str,
    namespace: Mapping[str, Any],
    transform: Callable[[str], str] | None = None,
    presets: Mapping[str, Resources] | None = None,
) -> Resources:
    """What each probe of ``source`` asks for: auto's choice for the planner's estimate of the
    cell on the largest sample of ``plan`` (the same margin, the same rungs), so that samples
    wait for no worker sized for the whole input; auto's choice at full size (``static``)
    where that is no more, and no request where neither holds the cell."""
    largest = plan.fractions[-1]
    heads = {s.name: _head(namespace[s.name], max(1, s.rows // largest)) for s in plan.sliced}
    estimate = estimate_memory(cell_input(source, {**namespace, **heads}, transform))
    try:
        small: Resources | None = auto_preset([], estimate=estimate, presets=presets).request
    except SpecError:
        small = None
    full = None if isinstance(static, SpecError) else static.request
    if small is None or (full is not None and _memory(full) <= _memory(small)):
        return full or Resources()
    if full is None:
        return small
    # Only memory shrinks with the sample: the GPU and cores the cell needs stay.
    return full.override(small.without(*(f for f in FIELDS if f != "memory")))


def _memory(request: Resources) -> int:
    """The memory ``request`` asks for; 0 where it names none."""
    return request.memory.request if request.memory is not None else 0


@dataclass(frozen=True, kw_only=True)
class Growth:
    """How a cell's memory grew over its probes, and its peak at full size.

    ``power`` is the power of the input it grows as (1: in proportion); ``per_byte`` the bytes
    of memory each byte of input adds at full size (the slope, for ``power`` 1).
    """

    peak: int
    power: int
    measured_power: float | None
    per_byte: float

    def describe(self) -> str:
        if self.power == 1:
            grows = f"about {self.per_byte:.1f}x per input byte"
        else:
            which = {2: "its square", 3: "its cube"}.get(self.power, f"its {self.power}th power")
            seen = f" (measured {self.measured_power:.2f})" if self.measured_power else ""
            grows = f"growing as {which}{seen}"
        return f"{grows}, {show_bytes(self.peak)} at full size"


def extrapolate(points: Sequence[tuple[int, int]], full: int) -> Growth:
    """The peak at ``full`` bytes of input from probes' ``(input bytes, peak)``: the power of
    the input that the growth between them shows (:data:`POWERS`; 1 where it is within
    :data:`NOISE`), then the least squares line of the peaks over the input to that power,
    taken at ``full``; never under the largest probe's peak."""
    points = sorted(points)
    xs = [x for x, _ in points]
    if len(points) < 2 or xs[0] == xs[-1] or full <= 0:
        raise ValueError(f"extrapolate needs probes of two sizes or more, not {points}")
    measured = _power(points)
    power = 1 if measured is None else _snapped(measured)
    scaled = [((x / full) ** power, float(p)) for x, p in points]
    slope, intercept = fit_line(scaled)
    peak = max(math.ceil(intercept + slope), points[-1][1], FLOOR)
    per_byte = slope * power / full  # d(peak)/d(input) at full size
    return Growth(peak=peak, power=power, measured_power=measured, per_byte=per_byte)


def _power(points: Sequence[tuple[int, int]]) -> float | None:
    """The power of the input that the growth over the last three probes shows; None where
    either step grew within :data:`NOISE`."""
    if len(points) < 3:
        return None
    (x1, p1), (x2, p2), (x3, p3) = points[-3:]
    first, second = p2 - p1, p3 - p2
    if first < NOISE or second < NOISE:
        return None
    ratio = second / first

    def steps(k: float) -> float:  # growth over the second step over that of the first
        a, b, c = (x1 / x3) ** k, (x2 / x3) ** k, 1.0
        return (c - b) / (b - a)

    low, high = 0.25, max(POWERS) + 1.0
    if ratio <= steps(low):
        return low
    if ratio >= steps(high):
        return high
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if steps(middle) < ratio else (low, middle)
    return (low + high) / 2


def _snapped(power: float) -> int:
    """The power of :data:`POWERS` ``power`` stands for: the nearest, or the next above where it
    lies between two (growth under 1 counts as 1, over the largest as the largest)."""
    for k in POWERS:
        if power <= k + 0.25:
            return k
    return max(POWERS)


@dataclass(frozen=True, kw_only=True)
class Probed:
    """What a probe found: its ``growth``, and the words for it."""

    growth: Growth
    reason: str


def probe(
    plan: ProbePlan,
    namespace: Mapping[str, Any],
    run: Callable[[dict[str, Any], str], int | None],
) -> Probed | str:
    """Run the cell on the samples of ``plan``, smallest first, until the last one grew
    :data:`GROWN` over the one before (``run(namespace, label)`` runs it on that namespace and
    returns its measured peak, or None where it cannot be measured); what it found, or one
    line that says why it found nothing."""
    points: list[tuple[int, int]] = []
    ran: list[int] = []
    for fraction in plan.fractions:
        if len(points) >= 3 and points[-1][1] - points[-2][1] >= GROWN:
            break
        label = f"1/{fraction} of {plan.names()}"
        sampled = samples(plan, namespace, fraction)
        try:
            peak = run({**namespace, **sampled}, label)
        except Exception as e:  # the cell failed on a sample (it may need the full data)
            first = (str(e).strip().splitlines() or [""])[0]
            what = type(e).__name__ + (f": {first}" if first else "")
            return f"the probe on {label} failed ({what})"
        if peak is None:
            return "the cell's process cannot measure its own peak here, so a probe cannot"
        points.append((sum(crossing.size_of(v) for v in sampled.values()), peak))
        ran.append(fraction)
    try:
        growth = extrapolate(points[-3:], plan.size)
    except ValueError:  # the samples came to the same size
        return f"the samples of {plan.names()} came to the same size, so a probe cannot tell"
    shares = ", ".join(f"1/{f}" for f in ran[-3:])
    shares = " and ".join(shares.rsplit(", ", 1))
    return Probed(
        growth=growth, reason=f"probed on {shares} of {plan.names()}: {growth.describe()}"
    )


def probed_choice(
    plan: ProbePlan,
    static: AutoChoice | SpecError,
    namespace: Mapping[str, Any],
    run: Callable[[dict[str, Any], str], int | None],
) -> tuple[AutoChoice, str | None]:
    """``%%task auto --probe``: the choice from the cell's peak on samples of its inputs (see
    :func:`probe`), and None; where the probe found nothing, the choice made without it
    (``static``) and the line that says why.

    Raises
    ------
    SpecError
        Where nothing was chosen without the probe either (``static``), saying both.
    """
    found = probe(plan, namespace, run)
    if not isinstance(found, str):
        return from_probe(found.growth.peak, found.reason), None
    if isinstance(static, SpecError):
        raise SpecError(f"{static} (--probe: {found})")
    return static, f"taskcell: --probe: {found}; auto chooses without it"
