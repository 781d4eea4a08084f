"""``%%task`` and friends: parse the line, hand the cell to :mod:`taskcell.runner`."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import (
    Magics,
    cell_magic,
    line_magic,
    magics_class,
    no_var_expand,
    output_can_be_silenced,
)
from IPython.display import clear_output, display, publish_display_data

from taskcell.errors import Interrupted, SpecError
from taskcell.runner.history import kernel_history
from taskcell.runner.task_line import PARSER, TaskLine, build_request, parse_task_line
from taskcell.spec import Environment

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from taskcell.planner.auto import AutoChoice
    from taskcell.planner.probe import ProbePlan
    from taskcell.runner.cell_task import CellSource

# Dask and the runner are imported when a magic first runs, so `%load_ext taskcell` stays fast.


class _StatusLine:
    """One line under the cell that says what the task is doing, updated in place."""

    def __init__(self) -> None:
        self._handle: Any = None
        self._text = ""

    def __call__(self, text: str) -> None:
        if text == self._text:
            return
        self._text = text
        bundle = {"text/plain": f"taskcell: {text}"}
        if self._handle is None:
            self._handle = display(bundle, raw=True, display_id=True)
        else:
            self._handle.update(bundle, raw=True)


class _CellDisplays:
    """Shows what a task cell displays; the figures it leaves open once it ends are shown
    after its ``Out[]``, as the inline backend shows them (on ``post_execute``)."""

    def __init__(self, shell: Any) -> None:
        self._later: list[dict] = []
        shell.events.register("post_execute", self._show_later)

    def __call__(self, event: dict) -> None:
        if event.get("after_cell"):
            self._later.append(event)
        else:
            _publish(event)

    def _show_later(self) -> None:
        later, self._later = self._later, []
        for event in later:
            _publish(event)


def _publish(event: dict) -> None:
    publish_display_data(
        event["data"],
        event.get("metadata") or {},
        transient=event.get("transient"),
        update=event.get("update", False),
    )


def _escalation(error: BaseException, request: Any, attempt: int, held: int | None) -> Any:
    """The planner's next request after a failed attempt (imported only when one fails)."""
    from taskcell import config
    from taskcell.planner.escalation import next_attempt

    return next_attempt(error, request, attempt, held, presets=config.presets())


def _cell_number(shell: Any) -> int:
    """The N of this cell's ``In[N]``: IPython 9 counts up before a cell runs, 8 after, and
    both have stored the cell's input by now."""
    return len(shell.history_manager.input_hist_raw) - 1 or shell.execution_count


@magics_class
class TaskMagics(Magics):
    """The magics ``%load_ext taskcell`` registers."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.history = kernel_history()
        self.environments: dict[str, Environment] = {}
        self._displays = _CellDisplays(shell)
        #: An interrupt came while the cell waited, before it ran, for the imports that loading
        #: the extension began (set before each cell until those are done).
        self.interrupted_before_start = False

    @property
    def _ipython(self) -> InteractiveShell:
        """The shell: ``Magics`` types it optional, but a registered magic always has one."""
        assert self.shell is not None
        return self.shell

    @no_var_expand
    @output_can_be_silenced
    @cell_magic
    def task(self, line: str, cell: str) -> Any:
        if self.interrupted_before_start:
            self.interrupted_before_start = False
            raise Interrupted("the cell was interrupted before it started")
        from taskcell import config
        from taskcell.cluster import connect
        from taskcell.planner.auto import note_run
        from taskcell.runner.cell_task import Display, print_stream
        from taskcell.runner.execution import run_cell_task

        ns = self._ipython.user_ns
        try:
            parsed = parse_task_line(line)
            presets = config.presets
            if parsed.preset == "auto":
                presets = self._auto_presets(parsed, line, cell, ns)
            request = build_request(parsed, presets, self.environments, ns)
        except SpecError as e:
            raise UsageError(str(e)) from None
        if parsed.preset != "auto":  # every run teaches auto, whatever it asks for
            note_run(self._ipython.transform_cell(cell), ns, self._ipython.transform_cell)
        count = _cell_number(self._ipython)
        if parsed.graph:
            from taskcell.runner.graph_cell import run_graph_cell

            return run_graph_cell(
                connect.current_client(),
                request,
                lambda: self._run_here(cell, count),
                name=parsed.name or f"cell-{count}",
                source=self._ipython.transform_cell(cell),
                history=self.history,
                status=_StatusLine(),
                retries=parsed.retries,
            )
        source = self._source(line, cell, count)
        out = Display(
            stream=print_stream, display=self._displays, status=_StatusLine(), clear=clear_output
        )
        try:
            return run_cell_task(
                connect.current_client(),
                source,
                ns,
                request,
                name=parsed.name or f"cell-{count}",
                history=self.history,
                out=None if parsed.background else out,
                retries=parsed.retries,
                escalate=_escalation,
            )
        except SpecError as e:  # a request over the platform's limits: nothing ran
            raise UsageError(str(e)) from None

    task.__doc__ = PARSER.format_help()

    def _run_here(self, cell: str, count: int) -> Any:
        """Run ``cell`` in this kernel as IPython runs a cell (as ``%%time`` does): its last
        expression's value is returned, to be the cell's ``Out[]``."""
        shell = self._ipython
        transformed = shell.transform_cell(cell)
        filename = shell.compile.cache(transformed, count, raw_code=cell)
        tree = shell.transform_ast(shell.compile.ast_parse(transformed, filename=filename))
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(shell.compile(tree, filename, "exec"), shell.user_ns)
        if last is None:
            return None
        expression = ast.Expression(last.value)
        return eval(shell.compile(expression, filename, "eval"), shell.user_ns)

    def _source(self, line: str, cell: str, count: int) -> CellSource:
        """The cell as a task runs it: its body after IPython's transforms, as the user wrote
        it, and the name its traceback gives it."""
        from taskcell.runner.cell_task import CellSource

        return CellSource(
            body=self._ipython.transform_cell(cell),
            shown=f"%%task {line}\n{cell}",
            filename=f"<cell In[{count}]>",
            transform=self._ipython.transform_cell,
            count=count,
        )

    def _auto_presets(self, parsed: TaskLine, line: str, cell: str, ns: dict) -> Any:
        """``--preset auto``: the presets, with ``auto`` the request that past runs of this
        cell (same ``--name`` or same source), scaled to what it reads now, or with none the
        planner's estimate of what it reads, choose. What it reads: the notebook values it
        uses and the files it opens, compressed ones by their size decompressed. With
        ``--probe``, the cell's peak measured on samples of its inputs chooses
        (:mod:`taskcell.planner.probe`)."""
        from taskcell import config
        from taskcell.planner.auto import auto_preset, note_input
        from taskcell.planner.estimate import cell_input, estimate_memory
        from taskcell.planner.probe import plan_probe

        transform = self._ipython.transform_cell
        body = transform(cell)
        plan = plan_probe(body, ns, transform) if parsed.probe else None  # refused: nothing ran
        estimate = estimate_memory(cell_input(body, ns, transform))
        choice: AutoChoice | SpecError
        try:
            choice = auto_preset(self.history, name=parsed.name, source=body, estimate=estimate)
        except SpecError as unsized:
            if plan is None:
                raise
            choice = unsized  # nothing holds the estimate: the probe may find less
        note_input(body, estimate.size)  # this run's record takes it: later runs scale from it
        if plan is not None:
            choice = self._probed(plan, choice, parsed, line, cell, ns)
        assert not isinstance(choice, SpecError)
        chosen = choice.preset or choice.request.to_options()
        print(f"taskcell: --preset auto chose {chosen}: {choice.reason}")
        request = choice.request
        return lambda: {**config.presets(), "auto": request}

    def _probed(
        self,
        plan: ProbePlan,
        static: AutoChoice | SpecError,
        parsed: TaskLine,
        line: str,
        cell: str,
        ns: dict,
    ) -> AutoChoice:
        """``--probe``: auto's choice from the cell's peak on samples of its inputs, each run as
        a task with the request sized for its largest sample (``probe_request``); where the
        probe finds nothing, one line says why and the choice made without it stands
        (``static``, or the SpecError that found none)."""
        from taskcell import config
        from taskcell.cluster import connect
        from taskcell.planner.probe import probe_request, probed_choice
        from taskcell.runner.execution import measure_cell

        count = _cell_number(self._ipython)
        source = self._source(line, cell, count)
        asked = probe_request(plan, static, source.body, ns, source.transform)
        presets = lambda: {**config.presets(), "auto": asked}  # noqa: E731
        request = build_request(parsed, presets, self.environments, ns)
        status = _StatusLine()

        def run(namespace: dict, label: str) -> int | None:
            return measure_cell(
                connect.current_client(),
                source,
                namespace,
                request,
                name=f"{parsed.name or f'cell-{count}'}-probe",
                status=lambda text: status(f"probe on {label}: {text}"),
            )

        choice, why_not = probed_choice(plan, static, ns, run)
        if why_not is not None:
            print(why_not)
        return choice

    @line_magic
    def task_env(self, line: str) -> Environment | None:
        """Define a named environment: ``%task_env training --gpu A100:1 --memory 32Gi``.

        ``%%task --env training`` then starts from these fields; the cell's own options replace
        them field by field. ``%task_env`` alone lists the environments.
        """
        from taskcell import config

        name, _, rest = line.strip().partition(" ")
        if not name:
            for env in self.environments.values():
                print(f"{env.name}: {env.resources!r}")
            return None
        try:
            parsed = parse_task_line(rest)
            request = build_request(parsed, config.presets, self.environments, {})
        except SpecError as e:
            raise UsageError(str(e)) from None
        self.environments[name] = Environment(name, request)
        return self.environments[name]

    @line_magic
    def task_cancel(self, line: str) -> None:
        """Cancel background cells: ``%task_cancel NAME`` (a ``--name`` or ``cell-N``) or
        ``%task_cancel all``. Each stops on its worker, frees its resources and binds nothing."""
        from taskcell.runner.execution import cancel_background

        which = line.strip()
        if not which:
            raise UsageError("%task_cancel takes a cell's name (its --name, or cell-N) or all")
        cancelled = cancel_background(which)
        if not cancelled:
            raise UsageError(f"no background cell named {which!r} is running")
        print(f"taskcell: cancelling {', '.join(h.record.cell for h in cancelled)}")

    @line_magic
    def task_wait(self, line: str) -> None:
        """Wait for the background cells not waited for yet (``%task_wait``), or one
        (``%task_wait NAME``), and raise the first failure here: a notebook run by nbclient or
        papermill then fails at this line."""
        from taskcell.runner.execution import wait_background

        which = line.strip() or "all"
        waited = wait_background(which)
        if not waited and which != "all":
            raise UsageError(f"no background cell named {which!r} is waiting")
        print(f"taskcell: {len(waited)} background cell{'s' if len(waited) != 1 else ''} done")

    @line_magic
    def task_cluster(self, line: str) -> str:
        """Show the cluster ``%%task`` uses, or point it at one: ``%task_cluster tcp://host:8786``."""
        from taskcell.cluster import connect

        address = line.strip()
        client = connect.use_address(address) if address else connect.current_client()
        workers = connect.live_workers(client, refresh=True)
        return f"{client.scheduler.address} ({len(workers)} workers)"

    @line_magic
    def tasks(self, line: str) -> Any:
        """This kernel's tasks as a table: cell, request, worker, state, wall time (as the
        cell showed it), cores and peak memory used, and a right-sizing hint where a task
        asked for far more than it used or ran near its limit; each cell's name opens its full
        record. ``.frame`` (or ``taskcell.tasks_frame()``) is the pandas DataFrame."""
        from taskcell.kernel_magics.task_table import TaskTable

        return TaskTable(self.history)

    @line_magic
    def task_panel(self, line: str) -> Any:
        """Show the live resource panel: every worker's resources (running and assigned), the
        tasks that wait and why, right-sizing hints, and a planner. ``.close()`` stops it."""
        from taskcell.cluster import connect
        from taskcell.widgets import panel

        return panel(connect.current_client(), self.history)
