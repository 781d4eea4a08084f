"""The ``latch`` target: Latch SDK tasks carrying the notebook's requests in Latch's terms.

A cell that asked for one of Latch's presets, and nothing else, gets that decorator
(``@small_task``, ``@v100_x4_task``). Any other request becomes
``@custom_task(cpu=CORES, memory=GIB, storage_gib=GIB)`` in Latch's units: whole cores and whole
GiB, rounded up, taken from the limit of a ``(request, limit)`` range; a field left unset takes
``small_task``'s value (2 cores, 4 GiB), and a request for nothing is ``@small_task``. A request
over Latch's maxima (126 cores, 975 GiB memory, 4949 GiB storage) is refused.

``custom_task`` has no GPUs: a GPU request runs on the smallest GPU preset that holds it
(untyped or A10G GPUs on ``small_gpu_task`` / ``large_gpu_task``, V100s on ``v100_x*_task``,
L40s on ``g6e_*_task``), with a warning when it holds more GPUs than asked. Other GPU types,
MIG slices, TPUs and other devices cannot be expressed and are refused with an error naming
the cell. Shared memory and Dask abstract resources are left out with a warning.

Dynamic resources become Latch resource functions (``def allocate_cpu(files, **kwargs)``),
which convert the notebook's expression to Latch's units with taskcell's parsers (so the Latch
image needs taskcell installed). Tasks take and return ``typing.Any``; ``main()`` calls them in
the notebook's order with keyword arguments, as Latch requires. To run on Latch, register the
tasks (``latch register``) and call them from a ``@workflow``.
"""

from __future__ import annotations

import math
from fractions import Fraction

from taskcell.errors import SpecError
from taskcell.export.codegen import docstring, indent
from taskcell.export.flow import Namer, TaskStep, Workflow
from taskcell.export.notebook import ExportError
from taskcell.export.render import ImportBlock, driver_body, task_function
from taskcell.spec import BUILTIN_PRESETS, GPU, LATCH, Expression, Resources, check_limits

__all__ = ["latch_decorator", "render_latch"]

_GIB = 1024**3
#: Latch's GPU presets, smallest first, and the GPU type each holds (None: A10G-class, untyped).
_GPU_PRESETS = (
    "small_gpu_task",
    "large_gpu_task",
    "v100_x1_task",
    "v100_x4_task",
    "v100_x8_task",
    "g6e_xlarge_task",
    "g6e_2xlarge_task",
    "g6e_4xlarge_task",
    "g6e_8xlarge_task",
    "g6e_12xlarge_task",
    "g6e_16xlarge_task",
    "g6e_24xlarge_task",
)
_DEFAULT = BUILTIN_PRESETS["small_task"]


def _fits(preset: Resources, request: Resources) -> bool:
    gpu, have = request.gpu, preset.gpu
    if not isinstance(gpu, GPU) or not isinstance(have, GPU) or gpu.quantity > have.quantity:
        return False
    if gpu.device is not None and gpu.device != (have.device or "A10G"):
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
            f"{label}: Latch cannot express gpu={request.to_dict()['gpu']!r}: its tasks offer "
            f"whole A10G-class, V100 or L40s GPUs through presets, no MIG slices, TPUs or "
            f"other devices"
        )
    if gpu.device not in (None, "A10G", "V100", "L40s"):
        raise ExportError(
            f"{label}: Latch has no {gpu.device} GPUs; its GPU presets offer A10G-class "
            f"(small_gpu_task, large_gpu_task), V100 (v100_x1/x4/x8_task) and L40s "
            f"(g6e_*_task) GPUs"
        )
    for name in _GPU_PRESETS:
        preset = BUILTIN_PRESETS[name]
        if _fits(preset, request):
            if preset.gpu.quantity != gpu.quantity:
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


def latch_decorator(step: TaskStep, notes: list[str]) -> tuple[str, list[str], list[str]]:
    """A task's Latch decorator, the names it imports, and resource functions it needs.

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
    fixed = Resources(**{f: getattr(resources, f) for f in ("cpu", "memory", "disk")})
    try:
        check_limits(fixed, LATCH)
    except SpecError as e:
        raise ExportError(f"{label}: {e} (Latch's custom_task maxima)") from e
    arguments: dict[str, str] = {
        "cpu": str(_whole(fixed.cpu.limit if fixed.cpu else _DEFAULT.cpu.limit)),
        "memory": str(_whole(fixed.memory.limit if fixed.memory else _DEFAULT.memory.limit, _GIB)),
    }
    if fixed.disk is not None:
        arguments["storage_gib"] = str(_whole(fixed.disk.limit, _GIB))
    functions = []
    for field, expression in request.dynamic.items():
        argument = "storage_gib" if field == "disk" else field
        function = f"{'allocate_storage' if field == 'disk' else 'allocate_' + field}"
        function = f"{function}_for_{step.function}"
        params = [p for p in step.params if p in Expression(expression).names]
        if field == "cpu":
            value = f"math.ceil(parse_cpu({expression.strip()}))"
        else:
            value = f"math.ceil(parse_quantity({expression.strip()}, {field!r}) / 2**30)"
        unit = "cores" if field == "cpu" else "GiB"
        functions.append(
            f"def {function}({', '.join([*params, '**kwargs'])}) -> int:\n"
            f'    """{unit.capitalize()} for {step.function}: the notebook\'s --{field} '
            f'{expression.strip()!r}."""\n'
            f"    return {value}"
        )
        arguments[argument] = function
    call = f"custom_task({', '.join(f'{k}={v}' for k, v in arguments.items())}"
    call += "".join(f", {option}" for option in options) + ")"
    return call, ["custom_task"], functions


def render_latch(workflow: Workflow) -> tuple[str, list[str]]:
    """The ``latch`` target's module source (unformatted), and notes on what it left out."""
    notes: list[str] = []
    namer = Namer(workflow.names | {t.function for t in workflow.tasks})
    imports = ImportBlock(workflow, namer)
    any_ = imports.name("typing", "Any", "typing")
    main = namer.fresh("main", "workflow")
    functions = []
    helpers = []
    for step in workflow.tasks:
        decorator, names, resource_functions = latch_decorator(step, notes)
        for name in names:
            module = "latch" if name == "custom_task" else "latch.resources.tasks"
            alias = imports.name(module, name, "latch")
            decorator = decorator.replace(name, alias, 1)
        if resource_functions:
            math_ = imports.module("math")
            parse_cpu = imports.name("taskcell.spec", "parse_cpu", "taskcell")
            parse_quantity = imports.name("taskcell.spec", "parse_quantity", "taskcell")
            for function in resource_functions:
                helpers.append(
                    function.replace("math.ceil", f"{math_}.ceil")
                    .replace("parse_cpu(", f"{parse_cpu}(")
                    .replace("parse_quantity(", f"{parse_quantity}(")
                )
        returns = (
            "None"
            if not step.returns
            else (
                any_
                if len(step.returns) == 1
                else f"tuple[{', '.join(any_ for _ in step.returns)}]"
            )
        )
        functions.append(task_function(step, [f"@{decorator}"], any_, returns))

    def call(step: TaskStep) -> list[str]:
        arguments = ", ".join(f"{p}={p}" for p in step.params)
        invocation = f"{step.function}({arguments})"
        if not step.returns:
            return [invocation]
        return [f"{', '.join(step.returns)} = {invocation}"]

    body = driver_body(workflow, call)
    main_doc = (
        '"""Run the notebook\'s code cells and call its tasks in order (Latch runs a task on '
        'this\n    machine when it is called outside a workflow)."""'
    )
    main_source = f"def {main}() -> None:\n    {main_doc}\n" + "\n\n".join(map(indent, body))
    cli = f'if __name__ == "__main__":\n    {main}()\n'
    parts = [docstring(workflow.docstring), imports.render(), *helpers, *functions]
    parts += [main_source, cli]
    source = "\n\n\n".join(part.strip("\n") for part in parts if part.strip()) + "\n"
    return source, notes
