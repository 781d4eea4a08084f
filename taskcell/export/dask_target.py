"""The ``dask`` target: a module that runs the notebook's tasks on a Dask cluster with taskcell.

Each ``%%task`` cell becomes a function decorated with its request in taskcell's decorator API
(``@small_task``, ``@task(resources=Resources(...))``, ``@etl_env.task``). ``main()`` runs the
other cells in order and submits the tasks (:func:`taskcell.export.runtime.submit`): task cells
in a row run at the same time where they do not read each other's names, and the driver waits
for them before its next cell (``y = compute_y_call.result()``), showing their output then, in
notebook order, and taking the changes they made to its objects. ``main()`` returns the final
value of every name the notebook binds; ``python workflow.py [--scheduler ADDRESS]`` runs it.

A dynamic value (``--cpu "min(8, len(files))"``) becomes ``Expression("min(8, len(files))")``
in a ``ResourceTemplate``, evaluated for each call by the evaluator the magic uses, with the
task's arguments and the module's globals (its imports) as names.

``--retries N`` becomes the decorator's ``retries=N``; ``--bg`` needs nothing, since every
task call returns at once; ``--name`` names the function.
"""

from __future__ import annotations

from taskcell.export.codegen import CellsCode, docstring, indent, module_source
from taskcell.export.flow import DriverStep, TaskStep, Workflow
from taskcell.export.render import (
    ImportBlock,
    driver_body,
    driver_globals,
    function,
    global_lines,
    helpers,
)
from taskcell.spec import Resources

__all__ = ["render_dask"]


def _fields(resources: Resources) -> str:
    """``cpu=2, memory='4Gi'``: a request's keyword arguments, as its repr spells them."""
    return repr(resources)[len("Resources(") : -1]


def _request_code(step: TaskStep, imports: ImportBlock, relative: bool) -> str | None:
    """The ``resources=`` argument of a task's decorator; None when it asks for nothing."""
    request = step.request
    resources = request.own if relative else request.resources
    fixed = _fields(resources.without(*request.dynamic))
    if not request.dynamic:
        if resources.is_empty():
            return None
        return f"{imports.name('taskcell', 'Resources')}({fixed})"
    template = imports.name("taskcell.spec", "ResourceTemplate")
    expression = imports.name("taskcell.spec", "Expression")
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
        decorator = imports.name("taskcell", request.preset)
        return f"@{decorator}" + (f"({', '.join(options)})" if options else "")
    resources = _request_code(step, imports, relative=False)
    args = ([f"resources={resources}"] if resources else []) + options
    decorator = imports.name("taskcell", "task")
    line = f"@{decorator}" + (f"({', '.join(args)})" if args else "")
    if request.pure_preset and request.preset:
        line += f"  # the {request.preset!r} preset"
    return line


def render_dask(workflow: Workflow) -> tuple[str, list[str]]:
    """The ``dask`` target's module source (unformatted), and notes on what it left out."""
    namer = workflow.namer(t.function for t in workflow.tasks)
    imports = ImportBlock(workflow, namer)
    argparse = imports.module("argparse")
    results = imports.name("taskcell.export.runtime", "results")
    run = imports.name("taskcell.export.runtime", "run")
    submit = imports.name("taskcell.export.runtime", "submit") if workflow.tasks else ""
    main = namer.fresh("main", "workflow")
    if workflow.ipython:
        workflow.helpers("ipython")
    helpers(workflow, imports, copy=False)

    environments: dict = {}
    env_lines = []
    for env in workflow.environments:
        variable = namer.fresh(env.name if env.name.endswith("env") else f"{env.name}_env")
        environments[env] = variable
        cls = imports.name("taskcell", "TaskEnvironment")
        fields = f"{imports.name('taskcell', 'Resources')}({_fields(env.resources)})"
        env_lines.append(f"{variable} = {cls}({env.name!r}, resources={fields})")

    functions = [_task(step, imports, environments) for step in workflow.tasks]

    pending: dict[str, str] = {}  # name -> the expression of its future, until waited for
    waiting: list[tuple[TaskStep, str]] = []  # calls not waited for, in order

    def wait() -> list[str]:
        lines = []
        for step, call in waiting:
            olds = ", ".join(step.updates)
            if step.returns:
                lines.append(f"{', '.join(step.returns)} = {call}.result({olds})")
            else:
                lines.append(f"{call}.result()")
        waiting.clear()
        pending.clear()
        return lines

    def before(step: DriverStep | TaskStep) -> list[str]:
        return wait() if isinstance(step, DriverStep) or step.needs else []

    def call(step: TaskStep) -> list[str]:
        variable = namer.fresh(f"{step.function}_call")
        args = [pending.get(p, p) for p in step.params]
        if len(step.returns) > 1:
            args.append(f"returns={len(step.returns)}")
        if step.changes_state:
            args.append("changes_state=True")
        for i, name in enumerate(step.returns):
            pending[name] = f"{variable}[{i}]"
        waiting.append((step, variable))
        return [f"{variable} = {submit}({', '.join([step.function, *args])})"]

    names = driver_globals(workflow)
    body = ["\n".join(global_lines(names)), *driver_body(workflow, call, before)]
    body += ["\n".join([*wait(), f"return {results}(globals(), {tuple(names)!r})"])]
    main_doc = '"""Run the workflow; return the final value of every name the notebook binds."""'
    main_source = CellsCode(f"def {main}():\n    {main_doc}\n" + "\n\n".join(map(indent, body)))
    cli = (
        'if __name__ == "__main__":\n'
        f"    parser = {argparse}.ArgumentParser(\n"
        f"        description=__doc__, formatter_class={argparse}.RawDescriptionHelpFormatter\n"
        "    )\n"
        "    parser.add_argument(\n"
        '        "--scheduler",\n'
        '        metavar="ADDRESS",\n'
        "        help=\"the Dask scheduler to run on (default: the notebook's own Client(), "
        'else a cluster started on this machine)",\n'
        "    )\n"
        f"    {run}({main}, parser.parse_args().scheduler)\n"
    )
    start = [f"{workflow.helpers('ipython')}()"] if workflow.ipython else []
    parts = [docstring(workflow.docstring), imports.render(), *start, "\n".join(env_lines)]
    parts += [*functions, main_source, cli]
    return module_source(parts), []


def _task(step: TaskStep, imports: ImportBlock, environments: dict) -> str:
    """A task cell as a decorated function: its imports, its body, the names it returns."""
    body = [*step.local_imports, step.body]
    if step.returns:
        body.append(f"return {', '.join(step.returns)}")
    return function(step.function, step.params, body, [_decorator(step, imports, environments)])
