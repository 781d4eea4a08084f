"""What the three targets render alike: imports, helpers, task functions and the driver's body."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from taskcell.export import standalone
from taskcell.export.carriers import carriers_source, inplace_source, local_dask
from taskcell.export.codegen import CellsCode, Namer, comment, indent, parses
from taskcell.export.flow import DriverStep, TaskStep, TextStep, Workflow
from taskcell.export.ipython_syntax import HELPER_SOURCES

__all__ = ["ImportBlock", "driver_body", "driver_globals", "function", "global_lines", "helpers"]


class ImportBlock:
    """The import lines a module needs, each name bound once and clashing with nothing.

    The notebook's own top-level imports come first, in its order; then the module's own
    machinery (what a target asks for with :meth:`module` and :meth:`name`), always under
    private names (``import flyte as _flyte``): a notebook's star import or assignment, run
    where its cell ran, never rebinds what the module itself calls.
    """

    def __init__(self, workflow: Workflow, namer: Namer) -> None:
        self.notebook = list(workflow.imports)
        self.namer = namer
        self.plain: dict[str, str] = {}  # module -> alias: "import argparse as _argparse"
        self.from_: dict[str, dict[str, str]] = {}  # module -> {name: alias}

    def module(self, name: str, alias: str | None = None) -> str:
        """``import NAME as ALIAS`` (private unless ``alias`` is given); how to refer to it."""
        if name not in self.plain:
            self.plain[name] = alias or self.namer.private(name.rpartition(".")[2])
        return self.plain[name]

    def name(self, module: str, name: str, alias: str | None = None) -> str:
        """``from MODULE import NAME as ALIAS`` (private unless ``alias`` is given); how to
        refer to it."""
        names = self.from_.setdefault(module, {})
        if name not in names:
            names[name] = alias or self.namer.private(name)
        return names[name]

    def render(self) -> str:
        lines = list(self.notebook)
        future = [line for line in lines if line.startswith("from __future__")]
        rest = [line for line in lines if line not in future]
        ours = [f"import {module} as {alias}" for module, alias in self.plain.items()]
        for module, names in self.from_.items():
            ours.append(
                f"from {module} import {', '.join(f'{n} as {a}' for n, a in names.items())}"
            )
        blocks = [block for block in (future, ours, rest) if block]
        return "\n\n".join("\n".join(block) for block in blocks)


#: Helpers copied from elsewhere than :mod:`taskcell.export.standalone`, by role.
_COPIED = {"local_dask": local_dask}


def helpers(workflow: Workflow, imports: ImportBlock, copy: bool, target: str = "") -> list[str]:
    """Bring in the helpers the module's code calls: imported (modules, IPython's classes, and
    taskcell's standalone functions unless ``copy``), or their source copied (returned; the
    process-wide state as :mod:`taskcell.runner.process_state` carries it, for ``target``, and
    changes in place as :mod:`taskcell.runner.inplace` makes them)."""
    sources = []
    state_roles = ("process_state", "set_process_state")
    if copy and any(role in workflow.helpers.names for role in state_roles):
        capture, apply = map(workflow.helpers, state_roles)
        modules = _imported(workflow)
        sources.append(carriers_source(capture, apply, modules, target, imports.namer.private))
    for role, name in workflow.helpers.names.items():
        origin = HELPER_SOURCES.get(role, "standalone")
        if copy and role in state_roles:
            continue
        if origin == "inplace":
            sources.append(inplace_source(name, imports.namer.private))
            continue
        if origin == "standalone" and copy:
            own = _COPIED.get(role) or getattr(standalone, role)
            sources.append(standalone.source(own, name))
        elif origin == "standalone":
            imports.name("taskcell.export.standalone", role, alias=name)
        elif origin.startswith("import "):
            imports.module(origin.removeprefix("import "), alias=name)
        else:
            module, _, imported = origin.removeprefix("from ").partition(" import ")
            imports.name(module, imported, alias=name)
    return sources


def _imported(workflow: Workflow) -> set[str]:
    """The modules the notebook's cells import."""
    cells = [step.cell for step in workflow.steps if isinstance(step, DriverStep | TaskStep)]
    return {module for cell in cells for module in cell.analysis.imports}


def function(
    name: str,
    params: Iterable[str],
    body: Iterable[str],
    decorators: Iterable[str] = (),
    returns: str | None = None,
    prefix: str = "def",
) -> str:
    """A function's source: decorators, signature, then the body's lines (``pass`` if they
    hold no code); what taskcell wrote is checked to parse."""
    lines = [line for part in body for line in part.strip("\n").splitlines() if part.strip()]
    if not any(line.strip() and not line.lstrip().startswith("#") for line in lines):
        lines.append("pass")
    arrow = f" -> {returns}" if returns else ""
    head = "\n".join([*decorators, f"{prefix} {name}({', '.join(params)}){arrow}:"])
    parses(f"{head}\n    pass")  # what taskcell wrote; the body is the cell's, read already
    return CellsCode(f"{head}\n" + indent("\n".join(lines)))


def driver_body(
    workflow: Workflow,
    call: Callable[[TaskStep], list[str]],
    before: Callable[[DriverStep | TaskStep], list[str]] = lambda step: [],
) -> list[str]:
    """The driver's statements, cell by cell (unindented), separated by blank lines.

    Parameters
    ----------
    workflow
        The plan.
    call
        Renders a task step's call (with whatever it binds).
    before
        Renders what must come before a step (waiting for earlier tasks).
    """
    blocks: list[str] = []
    text: list[str] = []  # markdown waiting to introduce the next cell
    for step in workflow.steps:
        if isinstance(step, TextStep):
            text.append(comment(step.text))
            continue
        lines: list[str] = [*before(step), *text]
        text = []
        if isinstance(step, DriverStep):
            lines += list(step.imports)
            if step.code.strip():
                lines.append(step.code.strip("\n"))
        else:
            lines += call(step)
            if step.deletes:
                lines.append(f"del {', '.join(step.deletes)}")
        if lines:
            blocks.append("\n".join(lines))
    if text:
        blocks.append("\n".join(text))
    return blocks


def driver_globals(workflow: Workflow) -> list[str]:
    """The notebook's names the driver binds or deletes, in order, for the driver function's
    ``global`` statements: they are module globals, as a notebook's names are, so a cell that
    reads ``sum`` before a later cell binds it reads the builtin, and a cell's function reads
    the names as they are when it is called."""
    names: dict[str, None] = {}
    for step in workflow.steps:
        if isinstance(step, DriverStep):
            names.update(dict.fromkeys([*step.cell.analysis.outputs, *step.cell.analysis.deleted]))
        elif isinstance(step, TaskStep):
            names.update(dict.fromkeys([*step.returns, *step.deletes]))
    return list(names)


def global_lines(names: list[str], per_line: int = 8) -> list[str]:
    """``global`` statements declaring ``names``, a few to a line."""
    return [f"global {', '.join(names[i : i + per_line])}" for i in range(0, len(names), per_line)]
