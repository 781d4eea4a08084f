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
environment, typed where the code makes a value's type certain (``int``, ``float``, ``str``,
``bool``, lists and dicts of them, ``pandas.DataFrame``: Flyte's own types) and pickled
otherwise (``Any``, as :func:`~taskcell.export.standalone.portable` hands it over: Flyte
refuses ``None``, and takes a returned tuple for several results). Where the notebook imports
numpy, pandas, matplotlib, scikit-learn or ``random``, a task also takes the process-wide state
(``state``) and gives it back when it may change it. The other cells become the driver, itself
a task (``main``) in a ``driver`` environment that depends on the others; it takes the changes a
task made to its objects in place (``update``), and awaits together the tasks in a row that do
not read each other's names or state (``asyncio.gather``). A dynamic resource expression becomes
``task.override(resources=...)`` at the call, evaluated with the driver's values, and, since
Flyte's override replaces the request, the override repeats the request's fixed fields beside
the computed ones.

The notebook's Dask ``Client(...)``/``LocalCluster(...)`` is, in each task that uses it, a real
client on a cluster of the task's own (:func:`~taskcell.export.carriers.local_dask`, the
decorator every task wears); Futures and persisted collections travel as they ended.

What Flyte cannot express is refused with :class:`~taskcell.export.ExportError` naming the cell
(more than 8 GPUs of a type, a MIG partition Flyte does not list) or left out with a warning
(Dask abstract resources, a disk range: Flyte takes one disk size, the limit is kept).
"""

from __future__ import annotations

import ast
import re
from fractions import Fraction

from taskcell.export.codegen import CellsCode, Namer, docstring, indent, module_source
from taskcell.export.flow import DriverStep, TaskStep, TextStep, Workflow
from taskcell.export.notebook import ExportError
from taskcell.export.render import (
    ImportBlock,
    driver_body,
    driver_globals,
    function,
    global_lines,
    helpers,
)
from taskcell.export.value_types import ANY, Type, has_path, is_known
from taskcell.spec import GPU, TPU, Device, Resources, format_quantity
from taskcell.spec.devices import DEVICES

__all__ = ["FLYTE_ACCELERATORS", "FLYTE_MIG", "flyte_resources", "render_flyte"]

#: Flyte's accelerator strings (flyte 2.12.1 ``Accelerators``): device -> the counts it takes,
#: from ``spec/devices.yaml``. Names are Flyte's; a request outside this table is written
#: ``flyte.GPU(...)``, ``flyte.TPU(...)`` or ``flyte.Device(...)`` instead.
FLYTE_ACCELERATORS: dict[str, tuple[int, ...]] = {
    device.flyte_name: device.flyte_counts for device in DEVICES.values() if device.flyte_counts
}
#: taskcell's spellings that Flyte writes otherwise (it still accepts ``"A100 80G"``, warning).
FLYTE_NAMES = {name: d.flyte_name for name, d in DEVICES.items() if d.flyte_name != name}
#: The MIG partitions Flyte accepts per GPU (flyte 2.12.1 ``A100Parts`` and siblings), keyed by
#: taskcell's name.
FLYTE_MIG = {name: device.flyte_mig for name, device in DEVICES.items() if device.flyte_mig}
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


def render_flyte(workflow: Workflow) -> tuple[str, list[str]]:
    """The ``flyte`` target's module source (unformatted), and notes on what it left out."""
    notes: list[str] = []
    namer = workflow.namer(t.function for t in workflow.tasks)
    imports = ImportBlock(workflow, namer)
    writer = _FlyteWriter(workflow, imports, namer)
    env_lines, env_of = _environments(workflow, writer.flyte, namer, notes)
    functions = [writer.task(step, env_of[step.function]) for step in workflow.tasks]
    driver_env = env_lines[-1].partition(" = ")[0]
    main_source = writer.driver(driver_env)
    flyte, argparse = writer.flyte, imports.module("argparse")
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
        f"        {flyte}.run({writer.main})\n"
        "    else:\n"
        f"        {flyte}.init_from_config()\n"
        f"        print({flyte}.run({writer.main}).url)\n"
    )
    start = [f"{workflow.helpers('ipython')}()"] if workflow.ipython else []
    if "portable" in workflow.helpers.names:  # in every process that imports the module
        start.append(f"{workflow.helpers('caches_by_value')}()")
    sources = helpers(workflow, imports, copy=True, target="flyte")
    parts = [docstring(workflow.docstring), imports.render(), *sources, *start]
    parts += ["\n".join(env_lines), *functions, main_source, cli]
    return module_source(parts), notes


def _environments(
    workflow: Workflow, flyte: str, namer: Namer, notes: list[str]
) -> tuple[list[str], dict[str, str]]:
    """One ``TaskEnvironment`` per distinct request, then the driver's: their lines, and each
    task's environment variable."""
    env_names: set[str] = set()
    envs: dict[str, str] = {}  # Resources(...) text -> variable
    env_of: dict[str, str] = {}
    lines: list[str] = []
    for step in workflow.tasks:
        request = step.request
        fixed = request.resources.without(*request.dynamic)
        text = ", ".join(
            f"{k}={v}" for k, v in flyte_resources(fixed, flyte, step.cell.label, notes).items()
        )
        if text not in envs:
            if step.environment is not None and request.own.is_empty() and not request.dynamic:
                preferred = step.environment.name
            elif request.pure_preset and request.preset:
                preferred = request.preset
            else:
                preferred = step.function if text else "tasks"
            name = _env_name(preferred, env_names)
            variable = namer.fresh(f"{name}_env" if not name.endswith("env") else name)
            envs[text] = variable
            resources = f", resources={flyte}.Resources({text})" if text else ""
            lines.append(f"{variable} = {flyte}.TaskEnvironment(name={name!r}{resources})")
        env_of[step.function] = envs[text]
    driver_env = namer.fresh("driver_env")
    depends = ", ".join(envs.values())
    lines.append(
        f"{driver_env} = {flyte}.TaskEnvironment(name={_env_name('driver', env_names)!r}"
        + (f", depends_on=[{depends}])" if depends else ")")
    )
    return lines, env_of


class _FlyteWriter:
    """Spells the tasks and the driver, with their Flyte types and the helpers they call."""

    def __init__(self, workflow: Workflow, imports: ImportBlock, namer: Namer) -> None:
        self.workflow, self.imports, self.namer = workflow, imports, namer
        self.flyte = imports.module("flyte")
        self.typing = imports.module("typing")
        self.main = namer.fresh("main", "workflow")
        self.state = namer.fresh("state") if workflow.carries_state else None
        self.helper = workflow.helpers
        self.dask_task = (
            f"{self.helper('local_dask')}({'task'!r})" if "local_dask" in self.helper.names else ""
        )
        """The decorator giving each task its own Dask cluster, where the notebook makes one."""

    def annotation(self, t: Type) -> str:
        """A value's annotation: Flyte's own types where the code makes them certain, else a
        pickle (``Any``, which the value reaches :func:`~taskcell.export.standalone.portable`:
        Flyte refuses ``None`` as ``Any``)."""
        if t.kind in ("int", "float", "str", "bool"):
            return t.kind
        if t.kind == "frame":
            return f"{self.imports.module('pandas')}.DataFrame"
        if (
            t.kind in ("list", "dict")
            and is_known(t)
            and not has_path(t)
            and "union" not in repr(t)
        ):
            item = self.annotation(t.args[0])
            return f"list[{item}]" if t.kind == "list" else f"dict[str, {item}]"
        return f"{self.typing}.Any"

    def task(self, step: TaskStep, env: str) -> str:
        """A task cell as a Flyte task: typed parameters and results, the process-wide state
        taken and given back, the values Flyte would refuse made portable."""
        params = [f"{p}: {self.annotation(step.types.get(p, ANY))}" for p in step.params]
        body = []
        if self.state:
            params.append(f"{self.state}: {self.typing}.Any")
            body.append(f"{self.helper('set_process_state')}({self.state})")
        body += [*step.star_imports, *step.local_imports, step.body]
        if _together(step):  # one pickle, so that the parts they share stay shared
            values, annotations = [_tupled(list(step.returns))], [f"{self.typing}.Any"]
        else:
            values = list(step.returns)
            annotations = [self.annotation(step.types.get(n, ANY)) for n in step.returns]
        if step.changes_state and self.state:
            values.append(f"{self.helper('process_state')}()")
            annotations.append(f"{self.typing}.Any")
        values = [  # untouched by Flyte, which would take a tuple for several outputs
            f"{self.helper('portable')}({value})" if annotation.endswith(".Any") else value
            for value, annotation in zip(values, annotations, strict=True)
        ]
        if values:
            body.append(f"return {', '.join(values)}")
        returns = (
            "None"
            if not annotations
            else annotations[0]
            if len(annotations) == 1
            else f"tuple[{', '.join(annotations)}]"
        )
        retries = f"(retries={step.request.retries})" if step.request.retries else ""
        decorators = [f"@{env}.task{retries}"] + ([f"@{self.dask_task}"] if self.dask_task else [])
        return function(step.function, params, body, decorators, returns)

    def driver(self, driver_env: str) -> str:
        """``main()``, the driver task: the code cells, and each task awaited where the notebook
        ran it (task cells in a row that do not read each other's names, together)."""
        groups = _groups(self.workflow)

        def call(step: TaskStep) -> list[str]:
            group = groups.get(id(step))
            if group is None:  # awaited with the first task of its group
                return []
            targets, after = [], []
            for member in group:
                names, lines = self._bindings(member)
                targets.append(names)
                after += lines
            calls = [self._invocation(member) for member in group]
            if len(group) == 1:
                bound = f"{targets[0]} = " if targets[0] else ""
                return [f"{bound}await {calls[0]}", *after]
            asyncio = self.imports.module("asyncio")
            bound = ", ".join(f"({t})" if "," in t else t or "_" for t in targets)
            return [f"{bound} = await {asyncio}.gather({', '.join(calls)})", *after]

        body = driver_body(self.workflow, call)
        body.insert(0, "\n".join(global_lines(driver_globals(self.workflow))))
        doc = '"""Run the notebook\'s workflow: its code cells here, its %%task cells as tasks."""'
        dask = f"@{self.dask_task}\n" if self.dask_task else ""
        head = f"@{driver_env}.task\n{dask}async def {self.main}() -> None:\n    {doc}\n"
        return CellsCode(head + "\n\n".join(map(indent, body)))

    def _bindings(self, step: TaskStep) -> tuple[str, list[str]]:
        """What a task's call binds, and the lines that take its changes in place and state."""
        names, lines, news = [], [], []
        together = _together(step)
        for name in step.returns:
            bound = self.namer.fresh(f"{name}_new") if name in step.updates else name
            names.append(bound)
            pickled = together or self.annotation(step.types.get(name, ANY)).endswith(".Any")
            if self.dask_task and pickled:
                # Its Futures, made again on the driver's own cluster.
                lines.append(f"{bound} = {self.helper('local_dask')}({'here'!r}, {bound})")
            if name in step.updates:
                news.append(bound)
        if news:  # taken as %%task takes them: in place, the outputs holding the notebook's
            olds = [n for n in step.returns if n in step.updates]
            outputs = [n for n in step.returns if n not in step.updates]
            lines.append(
                f"{_unpacked([*olds, *outputs])} = {self.helper('update')}("
                f"{_tupled(olds)}, {_tupled(news)}, {_tupled(outputs)})"
            )
        if together:
            results = self.namer.fresh(f"{step.function}_results")
            lines.insert(0, f"{_unpacked(names)} = {results}")
            names = [results]
        if step.changes_state and self.state:
            names.append(self.state)
            lines.append(f"{self.helper('set_process_state')}({self.state}, returned=True)")
        return ", ".join(names), lines

    def _invocation(self, step: TaskStep) -> str:
        args = [
            p
            if self.annotation(step.types.get(p, ANY)) != f"{self.typing}.Any"
            else f"{self.helper('portable')}({p})"
            for p in step.params
        ]
        if self.state:
            args.append(f"{self.helper('process_state')}()")
        if not step.request.dynamic:
            return f"{step.function}.aio({', '.join(args)})"
        fixed = step.request.resources.without(*step.request.dynamic, "extra")
        fields = flyte_resources(fixed, self.flyte, step.cell.label, [])
        for name, expression in step.request.dynamic.items():
            value = expression.strip()
            fields[name] = value if name in ("cpu", "gpu") else f"str({value})"
        text = ", ".join(f"{k}={v}" for k, v in fields.items())
        return (
            f"{step.function}.override(resources={self.flyte}.Resources({text}))"
            f".aio({', '.join(args)})"
        )


def _groups(workflow: Workflow) -> dict[int, list[TaskStep]]:
    """Runs of consecutive task steps that do not read each other's results or state, by first
    step.

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
        if (
            depends
            or step.deletes
            or step.needs
            or (current and (current[-1].deletes or any(s.changes_state for s in current)))
        ):
            close()
        current.append(step)
        positions.append(position)
    close()
    return groups


def _together(step: TaskStep) -> bool:
    """Whether a task's results travel in one pickle: it returns several, one bound to a part
    of another (``c = b["x"]``, ``b`` changed in place; ``alias = results``). Flyte carries
    each result on its own, so the part would come back as a copy of its own, and ``update``
    could not give the notebook's object back in its place."""
    returned = set(step.returns)
    if len(returned) < 2:
        return False
    for statement in ast.parse(step.body).body:
        if isinstance(statement, ast.Assign):
            bound = {t.id for t in statement.targets if isinstance(t, ast.Name)} & returned
            if bound and _part_of(statement.value, returned - bound):
                return True
    return False


def _part_of(value: ast.expr, names: set[str]) -> bool:
    """Whether ``value`` is one of ``names``, a part of one (``b["x"]``, ``m.weights``) or a
    display holding such (``[b, c]``): an object it shares, not a new one."""
    if isinstance(value, ast.Name):
        return value.id in names
    if isinstance(value, ast.Subscript | ast.Attribute):
        return _part_of(value.value, names)
    if isinstance(value, ast.List | ast.Tuple | ast.Set):
        return any(_part_of(item, names) for item in value.elts)
    if isinstance(value, ast.Dict):
        return any(_part_of(item, names) for item in value.values)
    return False


def _tupled(names: list[str]) -> str:
    """``names`` as a tuple's source: ``()``, ``(a,)``, ``(a, b)``."""
    return f"({names[0]},)" if len(names) == 1 else f"({', '.join(names)})"


def _unpacked(names: list[str]) -> str:
    """``names`` as the target of an unpacking: ``(a,)`` or ``a, b``."""
    return f"({names[0]},)" if len(names) == 1 else ", ".join(names)
