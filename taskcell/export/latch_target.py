"""The ``latch`` target: a Latch workflow, registrable with ``latch register``.

The module holds one ``@workflow`` whose typed parameters are the notebook's literal inputs and
whose tasks are its cells (see :mod:`taskcell.export.latch_plan` for how cells become tasks,
parameters and module-level code, and :mod:`taskcell.export.value_types` for the types). It
imports the Latch SDK and the notebook's own imports, never taskcell: what it needs of taskcell
(Latch's units for a computed request) is copied in as source (:mod:`taskcell.export.standalone`).

Each ``%%task`` cell's request is spelled in Latch's terms. A cell that asked for one of Latch's
presets, and nothing else, gets that decorator (``@small_task``, ``@v100_x4_task``). Any other
request becomes ``@custom_task(cpu=CORES, memory=GIB, storage_gib=GIB)`` in Latch's units: whole
cores and whole GiB, rounded up, taken from the limit of a ``(request, limit)`` range; a field
left unset takes ``small_task``'s value (2 cores, 4 GiB), and a request for nothing is
``@small_task``. A request over Latch's maxima (126 cores, 975 GiB memory, 4949 GiB storage) is
refused. A code cell's task is a ``@small_task``.

``custom_task`` has no GPUs: a GPU request runs on the smallest GPU preset that holds it
(untyped or A10G GPUs on ``small_gpu_task`` / ``large_gpu_task``, V100s on ``v100_x*_task``,
L40s on ``g6e_*_task``: the ``latch`` lists of ``spec/devices.yaml``), with a warning when it
holds more GPUs than asked. Other GPU types, MIG slices, TPUs and other devices cannot be
expressed and are refused with an error naming the cell. Shared memory and Dask abstract
resources are left out with a warning.

The notebook's Dask ``Client(...)``/``LocalCluster(...)`` is, in each task that uses it (every cell
is a task), a real client on a cluster of the task's own
(:func:`~taskcell.export.carriers.local_dask`, the decorator every task wears); Futures and
persisted collections travel between cells as they ended.

Dynamic resources become Latch resource functions (``def allocate_cpu_for_f(files, **kwargs)``),
which Latch calls with the task's inputs before it starts the task; they turn the notebook's
expression into Latch's units. Run the module with ``python`` to run the workflow on this
machine (Latch's local execution) with the notebook's values, and print its results.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from fractions import Fraction

from taskcell.errors import SpecError
from taskcell.export.codegen import CellsCode, Namer, docstring, module_source, parses
from taskcell.export.flow import TaskStep, Workflow
from taskcell.export.latch_plan import LatchPlan, LatchTask, Param, listed, plan_latch
from taskcell.export.notebook import ExportError
from taskcell.export.render import ImportBlock, function, helpers
from taskcell.export.value_types import ANY, Type, has_path, path_shape
from taskcell.spec import BUILTIN_PRESETS, GPU, LATCH, Expression, Resources, check_limits
from taskcell.spec.devices import DEVICES

__all__ = ["latch_decorator", "render_latch"]

_GIB = 1024**3
_DEFAULT = BUILTIN_PRESETS["small_task"]


def _preset_gpus() -> dict[str, str]:
    """Latch's GPU presets, smallest first (the catalogue's order), and the GPU type each holds:
    the device whose ``latch`` list in ``spec/devices.yaml`` names it."""
    holds = {preset: name for name, device in DEVICES.items() for preset in device.latch}
    return {preset: holds[preset] for preset in BUILTIN_PRESETS if preset in holds}


_GPU_PRESETS = _preset_gpus()


def _offered() -> str:
    """Latch's GPU types and the presets offering each, for messages:
    ``"A10G (small_gpu_task to large_gpu_task), V100 (v100_x1_task to v100_x8_task), ..."``."""
    by_type: dict[str, list[str]] = {}
    for preset, device in _GPU_PRESETS.items():
        by_type.setdefault(device, []).append(preset)
    return ", ".join(
        f"{device} ({' to '.join(dict.fromkeys([presets[0], presets[-1]]))})"
        for device, presets in by_type.items()
    )


def _fits(name: str, request: Resources) -> bool:
    """Whether Latch's GPU preset ``name`` holds ``request``: GPU type and count, cores, memory."""
    preset = BUILTIN_PRESETS[name]
    gpu, have = request.gpu, preset.gpu
    if not isinstance(gpu, GPU) or not isinstance(have, GPU) or gpu.quantity > have.quantity:
        return False
    if gpu.device is not None and gpu.device != _GPU_PRESETS[name]:
        return False
    for field in ("cpu", "memory"):
        asked, offered = getattr(request, field), getattr(preset, field)
        if asked is not None and (offered is None or asked.limit > offered.limit):
            return False
    return True


def _gpu_preset(request: Resources, label: str, notes: list[str]) -> str:
    gpu = request.gpu
    if not isinstance(gpu, GPU) or gpu.partition is not None:
        raise ExportError(
            f"{label}: Latch cannot express gpu={request.to_dict()['gpu']!r}: its GPU presets "
            f"offer whole {_offered()} GPUs, no MIG slices, TPUs or other devices"
        )
    if gpu.device is not None and gpu.device not in _GPU_PRESETS.values():
        raise ExportError(
            f"{label}: Latch has no {gpu.device} GPUs; its GPU presets offer {_offered()} GPUs"
        )
    for name in _GPU_PRESETS:
        preset = BUILTIN_PRESETS[name]
        if _fits(name, request):
            if isinstance(preset.gpu, GPU) and preset.gpu.quantity != gpu.quantity:
                notes.append(
                    f"{label}: asks for {request!r}; Latch's smallest GPU preset that holds it "
                    f"is {name} ({preset!r})"
                )
            if request.disk is not None:
                notes.append(f"{label}: Latch's GPU presets take no storage size; disk left out")
            return name
    raise ExportError(
        f"{label}: no Latch GPU preset holds {request!r}; the largest are v100_x8_task "
        f"({BUILTIN_PRESETS['v100_x8_task']!r}) and g6e_24xlarge_task "
        f"({BUILTIN_PRESETS['g6e_24xlarge_task']!r})"
    )


def _whole(value: Fraction | int, unit: int = 1) -> int:
    return math.ceil(Fraction(value) / unit)


def latch_decorator(
    step: TaskStep,
    notes: list[str],
    units: Mapping[str, str],
    task: LatchTask | None = None,
) -> tuple[str, list[str], list[str]]:
    """A task's Latch decorator, the names it imports, and resource functions it needs.

    Parameters
    ----------
    step
        The ``%%task`` cell.
    notes
        Receives a sentence for each part left out.
    units
        How the module refers to the standalone converters: ``{"cores": ..., "gib": ...}``.

    Returns
    -------
    tuple
        ``("small_task", ["small_task"], [])`` or
        ``("custom_task(cpu=4, memory=16)", ["custom_task"], [])``; the decorator without ``@``.

    Raises
    ------
    ExportError
        For a request Latch cannot express or one over its maxima, naming the cell.
    """
    request, label = step.request, step.cell.label
    options = [f"retries={request.retries}"] if request.retries else []
    resources = request.resources
    if resources.shm is not None:
        notes.append(f"{label}: Latch has no shared-memory option; shm left out")
    if resources.extra:
        notes.append(
            f"{label}: Dask abstract resources {dict(resources.extra)} have no Latch equivalent; "
            f"left out"
        )
    if "gpu" in request.dynamic or "shm" in request.dynamic:
        field = "gpu" if "gpu" in request.dynamic else "shm"
        raise ExportError(f"{label}: Latch cannot compute --{field} when the task runs")
    if request.pure_preset and request.builtin_preset and request.preset:
        call = request.preset + (f"({', '.join(options)})" if options else "")
        return call, [request.preset], []
    if resources.gpu is not None:
        if request.dynamic:
            raise ExportError(
                f"{label}: Latch's GPU presets have fixed sizes; --{next(iter(request.dynamic))} "
                f"cannot be computed when the task runs"
            )
        name = _gpu_preset(resources, label, notes)
        return name + (f"({', '.join(options)})" if options else ""), [name], []
    if resources.is_empty() and not request.dynamic:
        return "small_task" + (f"({', '.join(options)})" if options else ""), ["small_task"], []
    fixed = resources.without("gpu", "shm", "extra")
    try:
        check_limits(fixed, LATCH)
    except SpecError as e:
        raise ExportError(f"{label}: {e} (Latch's custom_task maxima)") from e
    cpu, memory = fixed.cpu or _DEFAULT.cpu, fixed.memory or _DEFAULT.memory
    assert cpu is not None and memory is not None  # small_task sets both
    arguments = {"cpu": str(_whole(cpu.limit)), "memory": str(_whole(memory.limit, _GIB))}
    if fixed.disk is not None:
        arguments["storage_gib"] = str(_whole(fixed.disk.limit, _GIB))
    functions = [
        _resource_function(step, field, expression, units, task)
        for field, expression in request.dynamic.items()
    ]
    for (field, _), (name, _) in zip(request.dynamic.items(), functions, strict=True):
        arguments["storage_gib" if field == "disk" else field] = name
    call = f"custom_task({', '.join(f'{k}={v}' for k, v in arguments.items())}"
    call += "".join(f", {option}" for option in options) + ")"
    return call, ["custom_task"], [source for _, source in functions]


def _resource_function(
    step: TaskStep,
    field: str,
    expression: str,
    units: Mapping[str, str],
    task: LatchTask | None,
) -> tuple[str, str]:
    """A Latch resource function computing ``field`` from the task's inputs (a bundle it
    takes unpacked): name, source."""
    name = f"allocate_{'storage' if field == 'disk' else field}_for_{step.function}"
    names = Expression(expression).names
    inputs = [p for p, _ in task.params] if task is not None else list(step.params)
    params = [p for p in inputs if p in names]
    unpack = []
    for bundle, members in task.bundles if task is not None else ():
        if names & set(members):
            params.append(bundle)
            unpack.append(f"    {listed(members)} = {bundle}\n")
    unit = "Cores" if field == "cpu" else "GiB"
    convert = units["cores" if field == "cpu" else "gib"]
    source = (
        f"def {name}({', '.join([*params, '**kwargs'])}) -> int:\n"
        f'    """{unit} for {step.function}: the notebook\'s --{field} '
        f'{expression.strip()!r}."""\n'
        + "".join(unpack)
        + f"    return {convert}({expression.strip()})"
    )
    return name, source


class _LatchWriter:
    """Spells types, helpers and tasks, importing what each needs once."""

    def __init__(self, workflow: Workflow, namer: Namer) -> None:
        self.imports = ImportBlock(workflow, namer)
        self.namer = namer
        self.typing = self.imports.module("typing")
        self.helper = workflow.helpers
        self.state = namer.fresh("state") if workflow.carries_state else ""
        self.dask_task = (
            f"{self.helper('local_dask')}({'task'!r})" if "local_dask" in self.helper.names else ""
        )
        """The decorator giving each task its own Dask cluster, where the notebook makes one."""

    def path_class(self, kind: str) -> str:
        if kind == "file":
            return self.imports.name("latch.types.file", "LatchFile")
        return self.imports.name("latch.types.directory", "LatchDir")

    def annotation(self, t: Type) -> str:
        """The annotation of a value of type ``t``, as Flyte reads it."""
        if t.kind in ("int", "float", "str", "bool"):
            return t.kind
        if t.kind in ("file", "dir"):
            return self.path_class(t.kind)
        args = ", ".join(self.annotation(a) for a in t.args)
        generic = {"list": "List", "dict": "Dict", "union": "Union"}.get(t.kind)
        if generic is None:
            return f"{self.typing}.Any"
        return f"{self.typing}.{generic}[{'str, ' if t.kind == 'dict' else ''}{args}]"

    def returns(self, task: LatchTask) -> str:
        types = [t for _, t in task.returns] + ([ANY] if task.gives_state else [])
        if not types:
            return "None"
        if len(types) == 1:
            return self.annotation(types[0])
        return f"{self.typing}.Tuple[{', '.join(self.annotation(t) for t in types)}]"

    def task(self, task: LatchTask, decorator: str) -> str:
        """A task's source: decorator, typed signature, the process-wide state taken, imports,
        path conversions, code, and what it returns (untyped values made portable: Latch
        carries no ``None`` as a pickle)."""
        params = [f"{name}: {self.annotation(t)}" for name, t in task.params]
        lines = []
        if task.takes_state:
            params.append(f"{self.state}: {self.typing}.Any")
            lines.append(f"{self.helper('set_process_state')}({self.state})")
        lines += [*task.imports, *self._paths(task.params), task.code]
        values = [
            f"{self.helper('portable')}({name})" if t == ANY else name for name, t in task.returns
        ]
        if task.gives_state:
            values.append(f"{self.helper('portable')}({self.helper('process_state')}())")
        if values:
            lines.append(f"return {', '.join(values)}")
        decorators = [f"@{decorator}"] + ([f"@{self.dask_task}"] if self.dask_task else [])
        return function(task.function, params, lines, decorators, self.returns(task))

    def _paths(self, params: tuple[tuple[str, Type], ...]) -> list[str]:
        """Lines turning LatchFile/LatchDir inputs back into the notebook's ``pathlib.Path``."""
        lines = []
        for name, t in params:
            shape = path_shape(t) if has_path(t) else None
            if shape is None:
                continue
            path = f"{self.imports.module('pathlib')}.Path"
            lines.append(
                {
                    "one": f"{name} = {path}({name})",
                    "list": f"{name} = [{path}(p) for p in {name}]",
                    "dict": f"{name} = {{k: {path}(p) for k, p in {name}.items()}}",
                }[shape]
            )
        return lines

    def local_value(self, param: Param) -> str:
        """A parameter's value for a run on this machine: its paths as LatchFile/LatchDir."""
        node = ast.parse(param.default, mode="eval").body
        shape = path_shape(param.type)
        kind = self.path_class(param.type.kind if shape == "one" else param.type.args[0].kind)
        where = self.helper("on_this_machine")
        if isinstance(node, ast.List):
            paths = [_path_text(item) for item in node.elts]
            return f"[{where}(p, {kind}) for p in {paths!r}]"
        if isinstance(node, ast.Dict):
            keys = [str(ast.literal_eval(k)) for k in node.keys if k is not None]
            named = dict(zip(keys, map(_path_text, node.values), strict=True))
            return f"{{k: {where}(p, {kind}) for k, p in {named!r}.items()}}"
        return f"{where}({_path_text(node)!r}, {kind})"


def _path_text(node: ast.expr | None) -> str:
    """The string in a ``Path("...")`` literal."""
    assert isinstance(node, ast.Call)  # a path parameter's value: see value_types.literal_type
    return str(ast.literal_eval(node.args[0]))


def _title(text: str) -> str:
    """The workflow's one-line title: the first line of the notebook's first markdown cell."""
    first = next((line for line in text.splitlines() if line.strip()), "Exported notebook")
    return first.lstrip("#").strip().replace("\\", "\\\\").replace('"""', "'''")


def render_latch(workflow: Workflow) -> tuple[str, list[str]]:
    """The ``latch`` target's module source (unformatted), and notes on what it left out."""
    notes: list[str] = []
    namer = workflow.namer(t.function for t in workflow.tasks)
    writer = _LatchWriter(workflow, namer)
    plan = plan_latch(workflow, namer)
    dynamic = {f for task in plan.tasks if task.step for f in task.step.request.dynamic}
    units: dict[str, str] = {}
    if "cpu" in dynamic:
        units["cores"] = workflow.helpers("cores")
    if dynamic & {"memory", "disk"}:
        units["gib"] = workflow.helpers("gib")
    resource_functions: list[str] = []
    tasks = []
    made: dict[int, tuple[str, list[str], list[str]]] = {}  # fixed requests, shared by cells
    for task in plan.tasks:
        if task.step is None:
            decorator = writer.imports.name("latch.resources.tasks", "small_task")
        else:
            request = task.step.request
            if id(request) in made:
                decorator, names, functions = made[id(request)]
            else:
                before = len(notes)
                decorator, names, functions = latch_decorator(task.step, notes, units, task)
                if not request.dynamic and len(notes) == before:  # nothing said of this cell
                    made[id(request)] = decorator, names, functions
            for name in names:
                module = "latch" if name == "custom_task" else "latch.resources.tasks"
                decorator = decorator.replace(name, writer.imports.name(module, name), 1)
            resource_functions += functions
        tasks.append(writer.task(task, decorator))
    workflow_source = _workflow(plan, writer, namer, workflow)
    start = [f"{workflow.helpers('ipython')}()"] if workflow.ipython else []
    if "portable" in workflow.helpers.names:  # in every process that imports the module
        start.append(f"{workflow.helpers('caches_by_value')}()")
    sources = helpers(workflow, writer.imports, copy=True, target="latch")
    # The imports last: every other part may have asked for one.
    parts = [
        docstring(workflow.docstring),
        writer.imports.render(),
        *sources,
        *start,
    ]
    parts += [*plan.module_code, *resource_functions, *tasks, *workflow_source]
    return module_source(parts), notes


def _workflow(plan: LatchPlan, writer: _LatchWriter, namer: Namer, workflow: Workflow) -> list[str]:
    """The ``@workflow`` (with its Results type) and the lines that run it on this machine."""
    main = namer.fresh("main", "workflow")
    decorator = writer.imports.name("latch", "workflow")
    params = sorted(plan.params, key=lambda p: not has_path(p.type))
    signature = ", ".join(
        f"{p.name}: {writer.annotation(p.type)}" + ("" if has_path(p.type) else f" = {p.default}")
        for p in params
    )
    parts = []
    returns = "None"
    if plan.outputs:
        results = namer.fresh("Results")
        fields = ", ".join(f"({name!r}, {writer.annotation(t)})" for name, t in plan.outputs)
        parts.append(f"{results} = {writer.typing}.NamedTuple({results!r}, [{fields}])")
        returns = results
    lines = [
        f'"""{_title(workflow.docstring)}',
        "",
        "The notebook's code cells and %%task cells as Latch tasks (exported by taskcell).",
        '"""',
    ]
    for item in plan.body:
        if isinstance(item, str):
            lines.append(item)
            continue
        names = [n for n, _ in item.params] + ([writer.state] if item.takes_state else [])
        call = f"{item.function}({', '.join(f'{n}={n}' for n in names)})"
        bound = [name for name, _ in item.returns] + ([writer.state] if item.gives_state else [])
        lines.append(f"{', '.join(bound)} = {call}" if bound else call)
    if plan.outputs:
        lines.append(f"return {', '.join(name for name, _ in plan.outputs)}")
    head = f"@{decorator}\ndef {main}({signature}) -> {returns}:"
    parses(f"{head}\n    pass")
    # Each line is a call, a comment or the docstring taskcell wrote: indented as they are.
    parts.append(CellsCode(head + "\n" + "\n".join(f"    {line}".rstrip() for line in lines)))
    arguments = ", ".join(f"{p.name}={writer.local_value(p)}" for p in params if has_path(p.type))
    parts.append(
        'if __name__ == "__main__":\n'
        "    # Latch's local execution: every task runs here, in this process.\n"
        f"    {main}({arguments})\n"
    )
    return parts
