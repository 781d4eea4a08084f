"""The ``dask`` target: a module that runs the notebook's tasks on a Dask cluster with taskcell.

Each ``%%task`` cell becomes a function decorated with its request in taskcell's decorator API
(``@small_task``, ``@task(resources=Resources(...))``, ``@etl_env.task``); calling it submits it
and returns a future at once. ``main()`` runs the other cells in order and calls the tasks,
passing futures on, so a task waits only for the tasks whose names it reads; a cell that needs a
value waits for it there (``x = x.result()``). ``main()`` returns the final value of every name
the notebook binds; ``python workflow.py [--scheduler ADDRESS]`` runs it.

A dynamic value (``--cpu "min(8, len(files))"``) becomes ``Expression("min(8, len(files))")``
in a ``ResourceTemplate``, evaluated for each call by the evaluator the magic uses, with the
task's arguments and the module's globals (its imports) as names.

``--retries N`` becomes the decorator's ``retries=N``; ``--bg`` needs nothing, since every
task call returns at once; ``--name`` names the function.
"""

from __future__ import annotations

from collections.abc import Container

from taskcell.export.codegen import docstring, indent
from taskcell.export.flow import Namer, TaskStep, Workflow
from taskcell.export.render import ImportBlock, driver_body, task_function
from taskcell.spec import FIELDS, Resources

__all__ = ["render_dask"]


def _fields(resources: Resources, leave_out: Container[str] = ()) -> str:
    """``cpu=2, memory='4Gi'``: a request's keyword arguments, as its repr spells them."""
    kept = Resources(**{f: getattr(resources, f) for f in FIELDS if f not in leave_out})
    text = repr(kept)
    return text[len("Resources(") : -1]


def _request_code(step: TaskStep, imports: ImportBlock, relative: bool) -> str | None:
    """The ``resources=`` argument of a task's decorator; None when it asks for nothing."""
    request = step.request
    resources = request.own if relative else request.resources
    fixed = _fields(resources, request.dynamic)
    if not request.dynamic:
        if resources.is_empty():
            return None
        return f"{imports.name('taskcell', 'Resources', 'taskcell')}({fixed})"
    template = imports.name("taskcell.spec", "ResourceTemplate", "taskcell")
    expression = imports.name("taskcell.spec", "Expression", "taskcell")
    # The magic's own evaluator, not a lambda spliced from the text: the same value, the same
    # errors, and a trailing comment in the text cannot swallow the code after it.
    dynamic = [f"{name}={expression}({text.strip()!r})" for name, text in request.dynamic.items()]
    return f"{template}({', '.join(filter(None, [fixed, *dynamic]))})"


def _decorator(step: TaskStep, imports: ImportBlock, environments: dict) -> str:
    request = step.request
    options = [f"retries={request.retries}"] if request.retries else []
    if step.environment is not None:
        env = environments[step.environment]
        resources = _request_code(step, imports, relative=True)
        args = ([f"resources={resources}"] if resources else []) + options
        return f"@{env}.task" + (f"({', '.join(args)})" if args else "")
    if request.pure_preset and request.builtin_preset and request.preset:
        decorator = imports.name("taskcell", request.preset, "taskcell")
        return f"@{decorator}" + (f"({', '.join(options)})" if options else "")
    resources = _request_code(step, imports, relative=False)
    args = ([f"resources={resources}"] if resources else []) + options
    decorator = imports.name("taskcell", "task", "taskcell")
    line = f"@{decorator}" + (f"({', '.join(args)})" if args else "")
    if request.pure_preset and request.preset:
        line += f"  # the {request.preset!r} preset"
    return line


def render_dask(workflow: Workflow) -> tuple[str, list[str]]:
    """The ``dask`` target's module source (unformatted), and notes on what it left out."""
    namer = Namer(workflow.names | {t.function for t in workflow.tasks})
    imports = ImportBlock(workflow, namer)
    argparse = imports.module("argparse")
    results = imports.name("taskcell.export.runtime", "results", "taskcell")
    needs_unpack = any(len(t.returns) > 1 for t in workflow.tasks)
    unpack = imports.name("taskcell.export.runtime", "unpack", "taskcell") if needs_unpack else ""
    run = imports.name("taskcell.export.runtime", "run", "taskcell")
    main = namer.fresh("main", "workflow")

    environments: dict = {}
    env_lines = []
    for env in workflow.environments:
        variable = namer.fresh(env.name if env.name.endswith("env") else f"{env.name}_env")
        environments[env] = variable
        cls = imports.name("taskcell", "TaskEnvironment", "taskcell")
        fields = repr(env.resources)
        env_lines.append(f"{variable} = {cls}({env.name!r}, resources={fields})")
        imports.name("taskcell", "Resources", "taskcell")

    functions = [
        task_function(step, [_decorator(step, imports, environments)]) for step in workflow.tasks
    ]

    def call(step: TaskStep) -> list[str]:
        invocation = f"{step.function}({', '.join(step.params)})"
        if not step.returns:
            return [f"_{step.function} = {invocation}"]
        if len(step.returns) == 1:
            return [f"{step.returns[0]} = {invocation}"]
        return [f"{', '.join(step.returns)} = {unpack}({invocation}, {len(step.returns)})"]

    body = driver_body(workflow, call, lambda name: f"{name} = {name}.result()")
    body.append(f"return {results}(locals())")
    main_doc = '"""Run the workflow; return the final value of every name the notebook binds."""'
    main_source = f"def {main}():\n    {main_doc}\n" + "\n\n".join(map(indent, body))
    cli = (
        'if __name__ == "__main__":\n'
        f"    parser = {argparse}.ArgumentParser(\n"
        f"        description=__doc__, formatter_class={argparse}.RawDescriptionHelpFormatter\n"
        "    )\n"
        "    parser.add_argument(\n"
        '        "--scheduler",\n'
        '        metavar="ADDRESS",\n'
        '        help="the Dask scheduler to run on (default: start a cluster on this machine)",\n'
        "    )\n"
        f"    {run}({main}, parser.parse_args().scheduler)\n"
    )
    parts = [docstring(workflow.docstring), imports.render(), "\n".join(env_lines)]
    parts += [*functions, main_source, cli]
    return "\n\n\n".join(part.strip("\n") for part in parts if part.strip()) + "\n", []
