"""What the three targets render alike: imports, helpers, task functions and the driver's body."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from taskcell.export import standalone
from taskcell.export.codegen import CellsCode, Namer, comment, indent, parses
from taskcell.export.flow import DriverStep, TaskStep, TextStep, Workflow
from taskcell.export.magics import HELPER_SOURCES

__all__ = ["ImportBlock", "driver_body", "function", "helpers"]


class ImportBlock:
    """The import lines a module needs, each name bound once and clashing with nothing.

    The notebook's own top-level imports come first, in its order; then the names a target
    asks for with :meth:`name`, grouped by module. A name the notebook already imports the same
    way is reused; one that clashes is imported under a prefixed alias.
    """

    def __init__(self, workflow: Workflow, namer: Namer) -> None:
        self.notebook = list(workflow.imports)
        self.namer = namer
        self.plain: dict[str, None] = {}  # "import argparse"
        self.from_: dict[str, dict[str, str]] = {}  # module -> {name: alias}

    def module(self, name: str, alias: str | None = None) -> str:
        """``import NAME`` (as ``alias`` when given); returns how to refer to it."""
        line = f"import {name}"
        if alias is not None and alias != name:
            self.plain[f"{line} as {alias}"] = None
            return alias
        if line in self.notebook or line in self.plain:
            return name
        for imported in self.notebook:  # the notebook's own alias: "import pandas as pd"
            if imported.startswith(f"{line} as "):
                return imported.rpartition(" as ")[2]
        if name in self.namer.taken:
            alias = self.namer.fresh(f"{name}_", f"_{name}")
            self.plain[f"import {name} as {alias}"] = None
            return alias
        self.namer.taken.add(name)
        self.plain[line] = None
        return name

    def name(self, module: str, name: str, prefix: str, alias: str | None = None) -> str:
        """``from MODULE import NAME`` (as ``alias`` when given); returns how to refer to it."""
        names = self.from_.setdefault(module, {})
        if name in names:
            return names[name]
        if alias is None and f"from {module} import {name}" in self.notebook:
            names[name] = name
            return name
        if alias is None:
            alias = name if name not in self.namer.taken else self.namer.fresh(f"{prefix}_{name}")
        self.namer.taken.add(alias)
        names[name] = alias
        return alias

    def render(self) -> str:
        lines = list(self.notebook)
        future = [line for line in lines if line.startswith("from __future__")]
        rest = [line for line in lines if line not in future]
        ours = list(self.plain)
        for module, names in self.from_.items():
            imported = [
                n if a == n else f"{n} as {a}"
                for n, a in names.items()
                if not (a == n and f"from {module} import {n}" in self.notebook)
            ]
            if imported:
                ours.append(f"from {module} import {', '.join(imported)}")
        blocks = [block for block in (future, ours, rest) if block]
        return "\n\n".join("\n".join(block) for block in blocks)


def helpers(workflow: Workflow, imports: ImportBlock, copy: bool) -> list[str]:
    """Bring in the helpers the module's code calls: imported (modules, IPython's classes, and
    taskcell's standalone functions unless ``copy``), or their source copied (returned)."""
    sources = []
    for role, name in workflow.helpers.names.items():
        origin = HELPER_SOURCES.get(role, "standalone")
        if origin == "standalone" and copy:
            sources.append(standalone.source(getattr(standalone, role), name))
        elif origin == "standalone":
            imports.name("taskcell.export.standalone", role, "taskcell", alias=name)
        elif origin.startswith("import "):
            imports.module(origin.removeprefix("import "), alias=name)
        else:
            module, _, imported = origin.removeprefix("from ").partition(" import ")
            imports.name(module, imported, "ipython", alias=name)
    return sources


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
