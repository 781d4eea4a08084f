"""The planner: from an input's size and a workload profile to the smallest preset that fits.

The need is the profile's per-byte factors times the input size (memory, scratch disk) plus
what the profile always needs (its base memory, GPUs, cores), in exact integer arithmetic so
that no size, however large, overflows. Presets are tried from the cheapest, ordered by
cores, then memory, then GPUs; the first whose memory, cores and GPUs cover the need wins, with
``--disk`` added when the work needs scratch the preset does not set. A CPU profile is never
given a GPU preset. When live workers are known, the answer says which can run it and what the
others lack, and a smaller preset that no live worker can run gives way to the smallest one that
some worker can. When no preset fits, the answer says why and offers the custom request.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterator, Mapping, Sequence, ValuesView
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from taskcell.cluster.feasibility import shortfalls
from taskcell.cluster.mapping import WorkerCapacity, dask_resources
from taskcell.errors import LimitError, SpecError
from taskcell.planner.codec import worker_capacity
from taskcell.planner.schema import SuggestionInfo, WorkerVerdict
from taskcell.planner.sizing import input_size
from taskcell.planner.workloads import Profile, get_profile
from taskcell.spec import GPU, Resources, check_limits, format_gpu
from taskcell.spec._util import MAX_AMOUNT, shown
from taskcell.spec.amounts import shortfall, show_bytes

if TYPE_CHECKING:
    from distributed import Client

_GiB = 1 << 30
_MiB = 1 << 20


#: The requests people write below 1 GiB; anything smaller is asked as the first.
_SMALL_REQUESTS = (256 * _MiB, 512 * _MiB)


def round_up(nbytes: int) -> int:
    """Bytes rounded up to a request people write: 256Mi, 512Mi, then whole GiB (0 stays 0)."""
    if nbytes <= 0:
        return 0
    for request in _SMALL_REQUESTS:
        if nbytes <= request:
            return request
    return -(-nbytes // _GiB) * _GiB


def times(nbytes: int, factor: float) -> int:
    """``nbytes * factor`` rounded up, exactly: a float product overflows for huge sizes."""
    return math.ceil(Fraction(factor) * nbytes)


def profile_need(nbytes: int, profile: Profile) -> tuple[int, int]:
    """The memory and scratch disk ``profile`` needs for ``nbytes`` of input."""
    memory = max(profile.base_memory + times(nbytes, profile.memory_per_byte), profile.min_memory)
    return memory, times(nbytes, profile.scratch_per_byte)


def cost(request: Resources) -> tuple[float, int, int]:
    """Sort key of a request, cheapest first: cores, then memory, then GPUs."""
    cpu = float(request.cpu.request) if request.cpu else 0.0
    memory = request.memory.request if request.memory else 0
    gpus = getattr(request.gpu, "quantity", 1) if request.gpu is not None else 0
    return cpu, memory, gpus


def gpu_covers(have: Any, need: GPU | None) -> bool:
    """Whether a request's accelerator ``have`` gives what ``need`` asks (None: asks none)."""
    if need is None:
        return True
    if not isinstance(have, GPU) or have.partition is not None or have.quantity < need.quantity:
        return False
    return need.device is None or have.device == need.device


def covers(request: Resources, *, memory: int = 0, cpu: float = 0, gpu: GPU | None = None) -> bool:
    """Whether ``request`` asks for at least this much memory, these cores and these GPUs."""
    if memory > 0 and (request.memory is None or request.memory.request < memory):
        return False
    if cpu > 0 and (request.cpu is None or request.cpu.request < cpu):
        return False
    return gpu_covers(request.gpu, gpu)


@dataclass(frozen=True, kw_only=True)
class Suggestion:
    """The planner's answer: a preset (or why none fits), its ``%%task`` line, and who can run it.

    Its JSON is :class:`~taskcell.planner.schema.SuggestionInfo` (:meth:`to_dict`): the same
    fields by name, plus ``gpu``, the profile's accelerator spelled out; deliberately not the
    same types where the wire needs plain values (``profile`` and ``request`` are objects here,
    a name and a dict there), so neither record is derived from the other.
    ``tests/planner/test_suggest.py`` keeps the names in step.

    Attributes
    ----------
    size : int
        The input's size in bytes.
    profile : Profile
    memory, disk : int
        The memory and scratch disk the work needs, in bytes.
    preset : str or None
        The smallest preset that fits; None when none does.
    request : Resources or None
        What the line asks for: the preset, with ``--disk`` where scratch is needed; a custom
        request when no preset fits but the need can be asked for directly.
    line : str or None
        The ``%%task`` line to put at the top of the cell.
    fits : bool
        Whether a preset fits.
    message : str
        One paragraph for people: what was needed, what was chosen, and why.
    workers : tuple of WorkerVerdict
        Each live worker checked: whether it can run ``request``, and what it lacks.
    """

    size: int
    profile: Profile
    memory: int
    disk: int
    preset: str | None
    request: Resources | None
    line: str | None
    fits: bool
    message: str
    workers: tuple[WorkerVerdict, ...] = field(default_factory=tuple)

    @property
    def able(self) -> list[str]:
        """Addresses of the live workers that can run the suggestion."""
        return [w["address"] for w in self.workers if w["able"]]

    @property
    def unable(self) -> dict[str, str]:
        """Address -> what that live worker lacks to run the suggestion."""
        return {w["address"]: w["reason"] for w in self.workers if not w["able"]}

    def to_dict(self) -> SuggestionInfo:
        """The suggestion as JSON (:class:`~taskcell.planner.schema.SuggestionInfo`)."""
        gpu = self.profile.accelerator
        return SuggestionInfo(
            size=self.size,
            profile=self.profile.name,
            memory=self.memory,
            disk=self.disk,
            gpu=format_gpu(gpu) if gpu is not None else None,
            preset=self.preset,
            request=self.request.to_dict() if self.request is not None else None,
            line=self.line,
            fits=self.fits,
            message=self.message,
            workers=list(self.workers),
        )

    def __str__(self) -> str:
        lines = [self.message]
        if self.line:
            lines.append(self.line)
        if self.workers:
            lines.append(_workers_summary(self.workers))
        return "\n".join(lines)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))

    def _repr_html_(self) -> str:
        esc = html.escape
        parts = [f"<div class='jp-taskcell-suggestion'><p>{esc(self.message)}</p>"]
        if self.line:
            parts.append(f"<pre style='margin:4px 0'>{esc(self.line)}</pre>")
        if self.workers:
            parts.append(f"<p>{esc(_workers_summary(self.workers))}</p>")
            unable = [w for w in self.workers if not w["able"]]
            if unable:
                rows = "".join(
                    f"<li><code>{esc(w['name'])}</code> ({esc(w['address'])}): "
                    f"{esc(w['reason'])}</li>"
                    for w in unable[:20]
                )
                more = f"<li>and {len(unable) - 20} more</li>" if len(unable) > 20 else ""
                parts.append(
                    "<details><summary>Workers that cannot</summary>"
                    f"<ul>{rows}{more}</ul></details>"
                )
        parts.append("</div>")
        return "".join(parts)


def _workers_summary(workers: Sequence[WorkerVerdict]) -> str:
    able = [w for w in workers if w["able"]]
    n = len(workers)
    if not able:
        return (
            "The one live worker cannot run it."
            if n == 1
            else f"None of the {n} live workers can run it."
        )
    names_ = ", ".join(w["name"] for w in able[:5]) + (", ..." if len(able) > 5 else "")
    return f"{len(able)} of {n} live workers can run it ({names_})."


def verdicts(request: Resources, workers: Sequence[WorkerCapacity]) -> tuple[WorkerVerdict, ...]:
    """Whether each worker can run ``request``, and what it lacks (from cluster.feasibility)."""
    resources = dask_resources(request, workers)
    out = []
    for w in workers:
        lacks = shortfalls(request, resources, w)
        reason = (
            "; ".join(shortfall(s.resource, s.asked, s.has) for s in lacks)
            if lacks
            else "can run it"
        )
        out.append(WorkerVerdict(address=w.address, name=w.name, able=not lacks, reason=reason))
    return tuple(out)


_WORKERS = (
    "a distributed Client, a snapshot (taskcell.planner.snapshot()), or a list of its "
    "workers' records or of WorkerCapacity"
)


def _live_workers(workers: Any) -> list[WorkerCapacity] | None:
    """The workers to check: given ones, a client's, or those of a client already connected."""
    if workers is None:
        client = _existing_client()
        if client is None:
            return None
        workers = client
    if hasattr(workers, "scheduler_info"):  # a distributed.Client
        from taskcell.cluster.connect import live_workers

        return live_workers(workers)
    if isinstance(workers, Mapping) and "workers" in workers:  # a Snapshot
        workers = workers["workers"]
    if not isinstance(workers, list | tuple | set | frozenset | ValuesView | Iterator):
        raise SpecError(f"workers= must be {_WORKERS}, got {shown(workers)}")
    return [_capacity(w) for w in workers]


def _capacity(worker: object) -> WorkerCapacity:
    """One worker given to :func:`suggest`, checked: a WorkerCapacity, or a snapshot's record."""
    if isinstance(worker, WorkerCapacity):
        return worker
    if isinstance(worker, Mapping) and _is_record(worker):
        return worker_capacity(worker)  # type: ignore[arg-type]
    raise SpecError(
        f"workers= must be {_WORKERS}; a worker's record has address, name, nthreads and "
        f"resources (each with resource and total), got {shown(worker)}"
    )


def _is_record(worker: Mapping[Any, Any]) -> bool:
    """Whether ``worker`` has what :func:`~taskcell.planner.codec.worker_capacity` reads."""
    if not all(key in worker for key in ("address", "name", "nthreads", "resources")):
        return False
    usage, limit = worker["resources"], worker.get("memory_limit", 0)
    return (
        isinstance(worker["address"], str)
        and isinstance(worker["name"], str)
        and _amount(worker["nthreads"])
        and _amount(limit)
        and isinstance(usage, list | tuple)
        and all(
            isinstance(u, Mapping)
            and isinstance(u.get("resource"), str)
            and _amount(u.get("total"))
            for u in usage
        )
    )


def _amount(value: object) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= MAX_AMOUNT
    )


def _catalogue(presets: object) -> dict[str, Resources]:
    """The presets given to :func:`suggest`, checked; every one a user can name by default."""
    from taskcell import config

    if presets is None:
        return dict(config.presets())
    if not isinstance(presets, Mapping) or not all(
        isinstance(k, str) and isinstance(v, Resources) for k, v in presets.items()
    ):
        raise SpecError(
            "presets= must map preset names to Resources, as taskcell.config.presets() "
            f"does, got {shown(presets)}"
        )
    return dict(presets)


def _existing_client() -> Client | None:
    """A client taskcell or the user already has; never starts a cluster to plan."""
    from taskcell.cluster import connect

    return connect.existing_client()


def _platform_ok(request: Resources) -> str | None:
    """None when the configured platform (``taskcell.platform``) accepts ``request``, else why."""
    from taskcell import config

    platform = config.platform()
    if platform is None:
        return None
    try:
        check_limits(request, platform)
    except LimitError as e:
        return str(e)
    return None


def suggest(
    size: Any,
    profile: str | Profile = "default",
    workers: Any = None,
    presets: Mapping[str, Resources] | None = None,
) -> Suggestion:
    """Suggest the smallest preset for an input and a kind of work.

    Parameters
    ----------
    size : int, str, path, DataFrame, array or list
        The input: ``"12 GiB"``, a number of bytes, file paths or globs (sizes summed), a pandas
        DataFrame (``memory_usage(deep=True)``), a numpy array (``nbytes``). See
        :func:`~taskcell.planner.sizing.input_size`.
    profile : str or Profile
        ``"default"`` (160 MiB plus 4x the input in memory, 1x scratch), ``"light"``,
        ``"heavy"``, ``"streaming"``, ``"python-objects"``, ``"numpy"``, ``"gpu-training"``,
        ``"gpu-inference"``, or one defined under ``taskcell.profiles`` in Dask's config
        (``describe_profile(name)`` says what each needs).
    workers : Client, Snapshot, list of WorkerSnapshot or of WorkerCapacity, optional
        The live workers to check the suggestion against; by default those of a client that is
        already connected (no cluster is started to plan), else none.
    presets : mapping, optional
        The presets to choose from; every preset you can name (``taskcell.presets()``) by
        default.

    Returns
    -------
    Suggestion
        With ``preset``, ``line`` (``%%task small_task``), ``message`` and, per live worker,
        whether it can run it. When nothing fits, ``preset`` is None and ``message`` says why.

    Raises
    ------
    SpecError
        For a size, profile, ``workers=`` or ``presets=`` that cannot be read, or a
        ``taskcell.platform`` option that names no platform; nothing is planned.

    Examples
    --------
    >>> suggest("500 MiB").line
    '%%task small_task --disk 512Mi'
    >>> suggest("1 GiB", "light").line
    '%%task small_task'
    """
    from taskcell import config

    nbytes = input_size(size)
    prof = get_profile(profile)
    catalogue = _catalogue(presets)
    config.platform()  # checked before anything is planned, though read only if nothing fits
    memory, disk = profile_need(nbytes, prof)
    gpu = prof.accelerator
    cpu = float(prof.cpu or 0)
    live = _live_workers(workers)

    def fitting(allow_gpu: bool) -> list[tuple[str, Resources]]:
        out = []
        for name, preset in catalogue.items():
            if gpu is None and preset.gpu is not None and not allow_gpu:
                continue
            if covers(preset, memory=memory, cpu=cpu, gpu=gpu):
                out.append((name, _with_disk(preset, disk)))
        return sorted(out, key=lambda item: (cost(item[1]), item[0]))

    candidates = fitting(allow_gpu=False)
    need = _need_text(nbytes, prof, memory, disk)
    if not candidates:
        return _nothing_fits(nbytes, prof, memory, disk, need, catalogue, live, fitting(True))
    name, request = candidates[0]
    note = ""
    checked = verdicts(request, live) if live is not None else ()
    if live and not any(v["able"] for v in checked):
        for other, other_request in candidates[1:]:
            other_checked = verdicts(other_request, live)
            if any(v["able"] for v in other_checked):
                note = f" {name} is smaller, but no live worker can run it."
                name, request, checked = other, other_request, other_checked
                break
    line = _line(name, request, catalogue[name])
    message = f"{name} fits: {need}; {name} has {_has_text(catalogue[name])}.{note}"
    return Suggestion(
        size=nbytes,
        profile=prof,
        memory=memory,
        disk=disk,
        preset=name,
        request=request,
        line=line,
        fits=True,
        message=message,
        workers=checked,
    )


def _with_disk(preset: Resources, disk: int) -> Resources:
    if disk <= 0 or (preset.disk is not None and preset.disk.request >= disk):
        return preset
    return preset.override(Resources(disk=round_up(disk)))


def _line(name: str, request: Resources, preset: Resources) -> str:
    extra = Resources(disk=request.disk) if request.disk != preset.disk else None
    return f"%%task {name}" + (f" {extra.to_options()}" if extra is not None else "")


def _need_text(nbytes: int, prof: Profile, memory: int, disk: int) -> str:
    parts = [f"{show_bytes(memory)} of memory"]
    if disk:
        parts.append(f"{show_bytes(disk)} of scratch disk")
    if prof.accelerator is not None:
        parts.append(f"GPU {format_gpu(prof.accelerator)}")
    if prof.cpu:
        parts.append(f"{prof.cpu:g} cores")
    return f"{show_bytes(nbytes)} of input with profile {prof.name!r} needs " + ", ".join(parts)


def _has_text(preset: Resources) -> str:
    parts = []
    if preset.cpu is not None:
        parts.append(f"{float(preset.cpu.request):g} cpus")
    if preset.memory is not None:
        parts.append(show_bytes(preset.memory.request))
    if preset.gpu is not None:
        parts.append(f"GPU {format_gpu(preset.gpu)}")
    return ", ".join(parts) or "no fixed resources"


def _nothing_fits(
    nbytes: int,
    prof: Profile,
    memory: int,
    disk: int,
    need: str,
    catalogue: Mapping[str, Resources],
    live: list[WorkerCapacity] | None,
    with_gpus: list[tuple[str, Resources]],
) -> Suggestion:
    gpu = prof.accelerator
    kind = [p for p in catalogue.items() if gpu_covers(p[1].gpu, gpu) and (gpu or not p[1].gpu)]
    largest = max(kind, key=lambda p: p[1].memory.request if p[1].memory else 0, default=None)
    biggest = (
        f"the largest {'GPU' if gpu else 'CPU'} preset, {largest[0]}, has {_has_text(largest[1])}"
        if largest
        else "no preset offers that kind of resource"
    )
    message = f"No preset fits: {need}; {biggest}."
    if with_gpus:
        message += f" ({with_gpus[0][0]} has the memory, but carries GPUs this work does not need.)"
    custom: Resources | None = None
    line: str | None = None
    checked: tuple[WorkerVerdict, ...] = ()
    try:
        custom = Resources(
            cpu=prof.cpu if prof.cpu else None,
            memory=round_up(memory) or None,
            disk=round_up(disk) or None,
            gpu=gpu,
        )
    except SpecError as e:  # more than any request can ask for
        message += f" It cannot be asked for directly either: {e}."
    refused = _platform_ok(custom) if custom is not None else None
    if refused:
        message += f" Asking for it directly is refused too: {refused}."
        custom = None
    if custom is not None:
        line = f"%%task {custom.to_options()}"
        checked = verdicts(custom, live) if live is not None else ()
        message += " Ask for what it needs directly with the line below."
    return Suggestion(
        size=nbytes,
        profile=prof,
        memory=memory,
        disk=disk,
        preset=None,
        request=custom,
        line=line,
        fits=False,
        message=message,
        workers=checked,
    )
