"""The ``flyte`` target: a Flyte 2 program with the notebook's requests in Flyte's own terms.

Each distinct request becomes one ``flyte.TaskEnvironment`` (named after the ``%task_env`` or
preset the cells used, else after its first task) with ``flyte.Resources`` spelled as Flyte
documents them: numbers of cores, ``"4Gi"`` strings, ``(request, limit)`` tuples, Flyte's
accelerator strings (``"A100:2"``, ``"A100_80G:1"``, ``"Trn1:4"``), ``flyte.GPU(...)`` for a MIG
slice or a count Flyte's strings do not list, ``flyte.TPU(...)``, and
``flyte.Device(quantity, device_class, device, partition)`` for any other device.

Flyte replaces a request whole (``task.override(resources=...)``, ``env.clone_with``), where
taskcell combines an environment and a cell's own fields field by field (see
:mod:`taskcell.spec.environment`). So every environment here carries its tasks' whole, already
combined request: a cell ``--env etl --memory 2Gi`` under ``etl = --cpu 1 --memory 1Gi`` gets an
environment of its own with ``cpu=1, memory="2Gi"``. Each ``%%task`` cell becomes a task of its
environment, taking and returning ``typing.Any`` (Flyte pickles such values). The other cells
become the driver, itself a task (``main``) in a ``driver`` environment that depends on the
others; consecutive tasks that do not read each other's names are awaited together with
``asyncio.gather``. A dynamic resource expression becomes ``task.override(resources=...)`` at the
call, evaluated with the driver's values, and, since Flyte's override replaces the request, the
override repeats the request's fixed fields beside the computed ones.

What Flyte cannot express is refused with :class:`~taskcell.export.ExportError` naming the cell
(more than 8 GPUs of a type, a MIG partition Flyte does not list) or left out with a warning
(Dask abstract resources, a disk range: Flyte takes one disk size, the limit is kept).
"""

from __future__ import annotations

import re
from fractions import Fraction

from taskcell.export.codegen import docstring, indent
from taskcell.export.flow import DriverStep, Namer, TaskStep, TextStep, Workflow
from taskcell.export.notebook import ExportError
from taskcell.export.render import ImportBlock, driver_body, task_function
from taskcell.spec import GPU, TPU, Device, Resources, format_quantity

__all__ = ["FLYTE_ACCELERATORS", "FLYTE_MIG", "flyte_resources", "render_flyte"]

_EIGHT = tuple(range(1, 9))
#: Flyte's accelerator strings (flyte 2.12.1 ``Accelerators``): device -> the counts it takes.
#: Names are Flyte's; a request outside this table is written ``flyte.GPU(...)`` or
#: ``flyte.Device(...)`` instead.
FLYTE_ACCELERATORS: dict[str, tuple[int, ...]] = {
    "A2": (1,),
    **dict.fromkeys(("A10", "A10G", "A100", "A100_80G", "B200", "H100", "H200"), _EIGHT),
    **dict.fromkeys(("L4", "L40s", "V100", "T4"), _EIGHT),
    "RTX_PRO_4500": (1,),
    "RTX_PRO_6000": (1, 2),
    "GB10": (1,),
    **dict.fromkeys(("T4 shared", "L4 shared", "A10G shared", "A10 shared", "L40S shared"), (1,)),
    **dict.fromkeys(("Trn1", "Trn1n", "Trn2", "Trn2u"), (1, 4, 8, 16)),
    "Inf1": tuple(range(1, 17)),
    "Inf2": tuple(range(1, 13)),
    **dict.fromkeys(
        ("MI100", "MI210", "MI250", "MI250X", "MI300A", "MI300X", "MI325X", "MI350X", "MI355X"),
        (1,),
    ),
    "Gaudi1": (1,),
    "AppleSilicon": (1,),
}
#: taskcell's spellings that Flyte writes otherwise (it still accepts ``"A100 80G"``, warning).
FLYTE_NAMES = {"A100 80G": "A100_80G"}
#: The MIG partitions Flyte accepts per GPU (flyte 2.12.1 ``A100Parts`` and siblings), keyed by
#: taskcell's name.
FLYTE_MIG = {
    "A100": ("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    "A100 80G": ("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H100": ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H200": ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
    "RTX_PRO_6000": ("1g.24gb", "2g.48gb", "4g.96gb"),
}
#: The most GPUs of a type ``flyte.GPU`` takes (its ``GPUQuantity``).
FLYTE_MAX_GPUS = 8


def _cores(value: Fraction) -> str:
    return str(int(value)) if value.denominator == 1 else repr(float(value))


def flyte_resources(
    resources: Resources, flyte: str, label: str, notes: list[str]
) -> dict[str, str]:
    """A request's ``flyte.Resources`` keyword arguments, as source text per field.

    Parameters
    ----------
    resources
        The request.
    flyte
        How the module refers to the ``flyte`` package.
    label
        The cell, for messages.
    notes
        Receives a sentence for each part left out.

    Raises
    ------
    ExportError
        For a GPU request Flyte cannot express.
    """
    out: dict[str, str] = {}
    if resources.cpu is not None:
        cpu = resources.cpu
        out["cpu"] = (
            _cores(cpu.request) if cpu.is_fixed else f"({_cores(cpu.request)}, {_cores(cpu.limit)})"
        )
    if resources.memory is not None:
        memory = resources.memory
        out["memory"] = (
            repr(format_quantity(memory.request))
            if memory.is_fixed
            else repr((format_quantity(memory.request), format_quantity(memory.limit)))
        )
    gpu = resources.gpu
    if gpu is not None:
        out["gpu"] = _gpu(gpu, flyte, label)
    if resources.disk is not None:
        disk = resources.disk
        if not disk.is_fixed:
            notes.append(f"{label}: Flyte takes one disk size; the limit of the range is kept")
        out["disk"] = repr(format_quantity(disk.limit))
    if resources.shm is not None:
        out["shm"] = repr(
            resources.shm if resources.shm == "auto" else format_quantity(resources.shm)
        )
    if resources.extra:
        notes.append(
            f"{label}: Dask abstract resources {dict(resources.extra)} have no Flyte equivalent; "
            f"left out"
        )
    return out


def _gpu(gpu: GPU | TPU | Device, flyte: str, label: str) -> str:
    """A ``gpu=`` value in Flyte's terms: its accelerator string where it has one."""
    if isinstance(gpu, TPU):
        partition = f", partition={gpu.partition!r}" if gpu.partition else ""
        return f"{flyte}.TPU(device={gpu.device!r}{partition})"
    if gpu.device is None:
        return str(gpu.quantity)
    name = FLYTE_NAMES.get(gpu.device, gpu.device)
    if gpu.partition is None and gpu.quantity in FLYTE_ACCELERATORS.get(name, ()):
        return repr(f"{name}:{gpu.quantity}")
    if isinstance(gpu, Device):
        partition = f", partition={gpu.partition!r}" if gpu.partition else ""
        return (
            f"{flyte}.Device(quantity={gpu.quantity}, device_class={gpu.device_class!r}, "
            f"device={name!r}{partition})"
        )
    return _flyte_gpu(gpu, name, flyte, label)


def _flyte_gpu(gpu: GPU, name: str, flyte: str, label: str) -> str:
    """``flyte.GPU(...)``: a MIG slice, or a count Flyte's accelerator strings do not list."""
    if gpu.quantity > FLYTE_MAX_GPUS:
        raise ExportError(
            f"{label}: asks for {gpu.quantity} {gpu.device} GPUs; Flyte requests 1 to "
            f"{FLYTE_MAX_GPUS} GPUs of a type"
        )
    known_parts = FLYTE_MIG.get(gpu.device or "", ())
    if gpu.partition is not None and gpu.partition not in known_parts:
        known = ", ".join(known_parts) or "none"
        raise ExportError(
            f"{label}: Flyte has no {gpu.device} MIG partition {gpu.partition!r} "
            f"(it knows: {known})"
        )
    partition = f", partition={gpu.partition!r}" if gpu.partition else ""
    return f"{flyte}.GPU(device={name!r}, quantity={gpu.quantity}{partition})"


def _env_name(text: str, taken: set[str]) -> str:
    """A Flyte environment name (snake_case), unique among ``taken``."""
    base = re.sub(r"[^a-z0-9_]+", "_", text.lower()).strip("_") or "tasks"
    name, i = base, 2
    while name in taken:
        name, i = f"{base}_{i}", i + 1
    taken.add(name)
    return name


def _annotation(step: TaskStep) -> str:
    if not step.returns:
        return "None"
    if len(step.returns) == 1:
        return "Any"
    return f"tuple[{', '.join('Any' for _ in step.returns)}]"


def render_flyte(workflow: Workflow) -> tuple[str, list[str]]:
    """The ``flyte`` target's module source (unformatted), and notes on what it left out."""
    notes: list[str] = []
    namer = Namer(workflow.names | {t.function for t in workflow.tasks})
    imports = ImportBlock(workflow, namer)
    argparse = imports.module("argparse")
    asyncio = imports.module("asyncio")
    any_ = imports.name("typing", "Any", "typing")
    flyte = imports.module("flyte")
    main = namer.fresh("main", "workflow")

    # One environment per distinct request.
    env_names: set[str] = set()
    envs: dict[str, tuple[str, str]] = {}  # Resources(...) text -> (variable, flyte name)
    env_of: dict[str, str] = {}  # task function -> environment variable
    env_lines: list[str] = []
    for step in workflow.tasks:
        request = step.request
        fixed = Resources(
            **{
                f: getattr(request.resources, f)
                for f in ("cpu", "memory", "gpu", "disk", "shm")
                if f not in request.dynamic
            },
            extra=request.resources.extra,
        )
        fields = flyte_resources(fixed, flyte, step.cell.label, notes)
        text = ", ".join(f"{k}={v}" for k, v in fields.items())
        if text not in envs:
            if step.environment is not None and request.own.is_empty() and not request.dynamic:
                preferred = step.environment.name
            elif request.pure_preset and request.preset:
                preferred = request.preset
            elif not text:
                preferred = "tasks"
            else:
                preferred = step.function
            name = _env_name(preferred, env_names)
            variable = namer.fresh(f"{name}_env" if not name.endswith("env") else name)
            envs[text] = (variable, name)
            resources = f", resources={flyte}.Resources({text})" if text else ""
            env_lines.append(f"{variable} = {flyte}.TaskEnvironment(name={name!r}{resources})")
        env_of[step.function] = envs[text][0]
    driver_env = namer.fresh("driver_env")
    depends = ", ".join(variable for variable, _ in envs.values())
    driver_name = _env_name("driver", env_names)
    env_lines.append(
        f"{driver_env} = {flyte}.TaskEnvironment(name={driver_name!r}"
        + (f", depends_on=[{depends}])" if depends else ")")
    )

    functions = [
        task_function(
            step,
            [
                f"@{env_of[step.function]}.task"
                + (f"(retries={step.request.retries})" if step.request.retries else "")
            ],
            annotation=any_,
            returns=_annotation(step).replace("Any", any_),
        )
        for step in workflow.tasks
    ]

    def invocation(step: TaskStep) -> str:
        if not step.request.dynamic:
            return f"{step.function}.aio({', '.join(step.params)})"
        fixed = Resources(
            **{
                f: getattr(step.request.resources, f)
                for f in ("cpu", "memory", "gpu", "disk", "shm")
                if f not in step.request.dynamic
            }
        )
        fields = flyte_resources(fixed, flyte, step.cell.label, [])
        for name, expression in step.request.dynamic.items():
            value = expression.strip()
            fields[name] = value if name in ("cpu", "gpu") else f"str({value})"
        text = ", ".join(f"{k}={v}" for k, v in fields.items())
        return (
            f"{step.function}.override(resources={flyte}.Resources({text}))"
            f".aio({', '.join(step.params)})"
        )

    def target(step: TaskStep) -> str:
        if not step.returns:
            return "_"
        if len(step.returns) == 1:
            return step.returns[0]
        return f"({', '.join(step.returns)})"

    groups = _groups(workflow)

    def call(step: TaskStep) -> list[str]:
        group = groups.get(id(step))
        if group is None:  # awaited with the first task of its group
            return []
        if len(group) == 1:
            bound = target(step).strip("()")
            prefix = f"{bound} = " if step.returns else ""
            return [f"{prefix}await {invocation(step)}"]
        targets = ", ".join(target(s) for s in group)
        calls = ", ".join(invocation(s) for s in group)
        return [f"{targets} = await {asyncio}.gather({calls})"]

    body = driver_body(workflow, call)
    main_doc = '"""Run the notebook\'s workflow: its code cells here, its %%task cells as tasks."""'
    main_source = (
        f"@{driver_env}.task\nasync def {main}() -> None:\n    {main_doc}\n"
        + "\n\n".join(map(indent, body))
    )
    cli = (
        'if __name__ == "__main__":\n'
        f"    parser = {argparse}.ArgumentParser(\n"
        f"        description=__doc__, formatter_class={argparse}.RawDescriptionHelpFormatter\n"
        "    )\n"
        "    parser.add_argument(\n"
        '        "--local",\n'
        '        action="store_true",\n'
        '        help="run on this machine instead of the cluster in Flyte\'s configuration",\n'
        "    )\n"
        "    if parser.parse_args().local:\n"
        f"        {flyte}.init()\n"
        "    else:\n"
        f"        {flyte}.init_from_config()\n"
        f"    print({flyte}.run({main}).url)\n"
    )
    parts = [docstring(workflow.docstring), imports.render(), "\n".join(env_lines)]
    parts += [*functions, main_source, cli]
    source = "\n\n\n".join(part.strip("\n") for part in parts if part.strip()) + "\n"
    return source, notes


def _groups(workflow: Workflow) -> dict[int, list[TaskStep]]:
    """Runs of consecutive task steps that do not read each other's results, by first step.

    Maps ``id(first step)`` to the run; later steps of a run are absent (they are awaited with
    the first).
    """
    groups: dict[int, list[TaskStep]] = {}
    current: list[TaskStep] = []
    positions: list[int] = []

    def close() -> None:
        if current:
            groups[id(current[0])] = list(current)
        current.clear()
        positions.clear()

    for position, step in enumerate(workflow.steps):
        if isinstance(step, (DriverStep, TextStep)):
            close()
            continue
        depends = set(step.after) & set(positions)
        if depends or step.deletes or (current and current[-1].deletes):
            close()
        current.append(step)
        positions.append(position)
    close()
    return groups
