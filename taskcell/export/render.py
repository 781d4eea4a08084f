"""What the three targets render alike: the module's imports, and the driver's body."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from taskcell.export.codegen import comment, indent
from taskcell.export.flow import DriverStep, Namer, TaskStep, TextStep, Workflow

__all__ = ["ImportBlock", "driver_body", "task_function"]


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

    def module(self, name: str) -> str:
        """``import NAME``; returns how to refer to it."""
        line = f"import {name}"
        if line in self.notebook or line in self.plain:
            return name
        if name in self.namer.taken:
            alias = self.namer.fresh(f"{name}_", f"_{name}")
            self.plain[f"import {name} as {alias}"] = None
            return alias
        self.namer.taken.add(name)
        self.plain[line] = None
        return name

    def name(self, module: str, name: str, prefix: str) -> str:
        """``from MODULE import NAME``; returns how to refer to it."""
        names = self.from_.setdefault(module, {})
        if name in names:
            return names[name]
        if f"from {module} import {name}" in self.notebook:
            names[name] = name
            return name
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


def task_function(
    step: TaskStep,
    decorators: Iterable[str],
    annotation: str | None = None,
    returns: str | None = None,
) -> str:
    """A task cell as a function: its imports, its body, then the names it returns.

    ``annotation`` annotates every parameter; ``returns`` is the return annotation.
    """
    lines = list(decorators)
    params = ", ".join(f"{p}: {annotation}" if annotation else p for p in step.params)
    arrow = f" -> {returns}" if returns else ""
    lines.append(f"def {step.function}({params}){arrow}:")
    body = [*step.local_imports]
    if step.body.strip():
        body.append(step.body.strip("\n"))
    if step.returns:
        body.append(f"return {', '.join(step.returns)}")
    if not any(
        line.strip() and not line.lstrip().startswith("#") for line in "\n".join(body).splitlines()
    ):
        body.append("pass")
    lines.append(indent("\n".join(body)))
    return "\n".join(lines)


def driver_body(
    workflow: Workflow,
    call: Callable[[TaskStep], list[str]],
    gather: Callable[[str], str] | None = None,
) -> list[str]:
    """The driver's statements, cell by cell (unindented), separated by blank lines.

    Parameters
    ----------
    workflow
        The plan.
    call
        Renders a task step's call (with whatever it binds).
    gather
        Renders waiting for one future (``x = x.result()``); None where calls return values.
    """
    blocks: list[str] = []
    text: list[str] = []  # markdown waiting to introduce the next cell
    for step in workflow.steps:
        if isinstance(step, TextStep):
            text.append(comment(step.text))
            continue
        lines: list[str] = text
        text = []
        if gather is not None:
            lines += [gather(name) for name in step.gather]
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
