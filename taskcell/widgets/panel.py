"""The live resource panel in the notebook (``taskcell.panel()``, ``%task_panel``).

It shows what every worker has and holds (with each resource's last five minutes and a link to
the Dask dashboard), the workers the pools started and their states, the tasks that wait and
why, the tasks that ended last and each worker's tasks on a timeline, a control that cancels a
running or waiting task, right-sizing hints from this kernel's finished tasks, and a planner box.
Durations are measured on the scheduler's clock (its offset from the kernel's is measured once,
when the panel opens), as the sidebar measures them. It is kept current by an
:class:`~taskcell.planner.feed.OccupancyFeed`, whose updates arrive on the Dask client's event
loop, and redrawn by a thread of its own at most four times a second and at least once a
second. Neither needs the kernel's main thread, so the panel moves while a blocking ``%%task``
cell runs. :meth:`Panel.close` (or its x button) stops both.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from taskcell.widgets import panel_html

if TYPE_CHECKING:
    from distributed import Client

    from taskcell.planner.feed import OccupancyFeed
    from taskcell.planner.suggestion import Suggestion

logger = logging.getLogger(__name__)

#: Fewest seconds between two redraws, and most seconds without one.
MIN_REDRAW = 0.25
MAX_REDRAW = 1.0
#: Rows wrap rather than run past a notebook's width.
_ROW = {"flex_flow": "row wrap", "align_items": "center"}

_open: list[Panel] = []


def scheduler_offset(client: Client) -> float:
    """Seconds to add to this machine's clock to read the scheduler's: its time, asked once,
    against the middle of the round trip."""
    from taskcell.planner.view import clock_offset

    sent = time.time()
    remote = client.run_on_scheduler(time.time)
    return clock_offset(sent, float(remote), time.time())


def _shell() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


class Panel:
    """An ipywidgets panel over one cluster. Display it; call :meth:`close` when done.

    Parameters
    ----------
    client : distributed.Client, optional
        The cluster to show; the one ``%%task`` uses by default.
    history : list of TaskRecord, optional
        Finished tasks to draw right-sizing hints from; this kernel's (``%tasks``) by default.

    Attributes
    ----------
    widget : ipywidgets.VBox
        What is displayed.
    feed : OccupancyFeed
        The live snapshot behind it; ``panel.feed.snapshot()`` is what it shows.
    offset : float
        Seconds from this machine's clock to the scheduler's, which durations are measured on.
    redraws : int
        How many times it has redrawn (tests and benchmarks read it).
    """

    def __init__(self, client: Client | None = None, history: list | None = None) -> None:
        import ipywidgets as w

        from taskcell.planner.feed import OccupancyFeed
        from taskcell.planner.workloads import DEFAULT_PROFILE, describe_profile, profile_names
        from taskcell.runner.history import kernel_history
        from taskcell.widgets.frontend import Frontend

        self._shell = _shell()
        # The list itself, not a copy, so tasks run after the panel opened show up.
        self._history = history if history is not None else kernel_history()
        self.redraws = 0
        self.suggestion: Suggestion | None = None
        self._changed = threading.Event()
        self._stop = threading.Event()

        self.title = w.HTML()
        self.close_button = w.Button(
            description="×", tooltip="Close the panel", layout=w.Layout(width="32px")
        )
        self.totals = w.HTML()
        self.workers = w.HTML(layout=w.Layout(max_height="340px", overflow="auto"))
        self.pools = w.HTML(layout=w.Layout(max_height="180px", overflow="auto"))
        self.queue = w.HTML(layout=w.Layout(max_height="180px", overflow="auto"))
        self.ended = w.HTML(layout=w.Layout(max_height="180px", overflow="auto"))
        self.timeline = w.HTML(layout=w.Layout(max_height="220px", overflow="auto"))
        self.cancel_choice = w.Dropdown(
            options=[], description="Task", layout=w.Layout(width="100%", max_width="420px")
        )
        self.cancel_button = w.Button(
            description="Cancel task",
            icon="stop",
            button_style="warning",
            tooltip="Stop the chosen task on its worker, or cancel it if it has not started",
            disabled=True,
        )
        self.cancel_status = w.HTML()
        self.hints = w.HTML()
        self.size = w.Text(
            placeholder="12 GiB, data/*.parquet, or a variable (df)",
            description="Input",
            continuous_update=False,
            layout=w.Layout(width="100%", max_width="340px"),
        )
        names = profile_names()
        self.profile = w.Dropdown(
            options=[(f"{n}: {describe_profile(n)}", n) for n in names],
            value=DEFAULT_PROFILE if DEFAULT_PROFILE in names else names[0],
            description="Profile",
            layout=w.Layout(width="100%", max_width="420px"),
        )
        self.suggest_button = w.Button(description="Suggest", icon="lightbulb-o")
        self.advice = w.HTML()
        self.insert_button = w.Button(
            description="Insert %%task cell below", icon="plus", disabled=True
        )
        self.line = w.Text(
            description="Line", disabled=False, layout=w.Layout(width="100%", max_width="560px")
        )
        self.line.layout.display = "none"
        planner = w.VBox(
            [
                w.HTML("<b>Planner</b>"),
                w.HBox([self.size, self.profile, self.suggest_button], layout=w.Layout(**_ROW)),
                self.advice,
                w.HBox([self.insert_button, self.line], layout=w.Layout(**_ROW)),
            ]
        )
        self.widget = w.VBox(
            [
                w.HBox(
                    [self.title, self.close_button],
                    layout=w.Layout(justify_content="space-between"),
                ),
                self.totals,
                self.workers,
                self.pools,
                self.queue,
                w.HBox(
                    [self.cancel_choice, self.cancel_button, self.cancel_status],
                    layout=w.Layout(**_ROW),
                ),
                self.ended,
                self.timeline,
                self.hints,
                planner,
            ],
            layout=w.Layout(
                border="1px solid rgba(127,127,127,0.35)", padding="6px", max_width="100%"
            ),
        )
        self.close_button.on_click(lambda _: self.close())
        self.suggest_button.on_click(lambda _: self.plan())
        self.size.observe(lambda _: self.plan(), names="value")
        self.profile.observe(lambda _: self.plan(), names="value")
        self.insert_button.on_click(lambda _: self.insert())
        self.cancel_button.on_click(lambda _: self.cancel())

        self.frontend = Frontend()
        self.feed: OccupancyFeed = OccupancyFeed(client, on_update=lambda _: self._changed.set())
        self.feed.start()
        self.offset = scheduler_offset(self.feed.client)
        self.render()
        self._thread = threading.Thread(target=self._run, name="taskcell-panel", daemon=True)
        self._thread.start()
        _open.append(self)

    # -- drawing -----------------------------------------------------------------------------

    def _run(self) -> None:
        last = 0.0
        while not self._stop.is_set():
            self._changed.wait(MAX_REDRAW)
            pause = MIN_REDRAW - (time.monotonic() - last)
            if pause > 0 and self._stop.wait(pause):
                break
            if self._stop.is_set():
                break
            self._changed.clear()
            try:
                self.render()
            except Exception:
                logger.exception("taskcell: the panel failed to redraw")
            last = time.monotonic()

    def render(self) -> None:
        """Redraw from the feed's latest snapshot (any thread)."""
        from taskcell.planner.rightsize import latest_hints
        from taskcell.planner.view import snapshot_view

        snap = self.feed.snapshot()
        view = snapshot_view(snap, time.time() + self.offset)
        status = self.feed.client.status
        state = "live" if status == "running" else f"client {status}; not updating"
        title = (
            f"<b>taskcell</b> · {panel_html.esc(snap['scheduler'])} · "
            f"<span style='opacity:0.8'>{state} · update {snap['seq']}</span>"
        )
        self._set(self.title, title)
        self._set(self.totals, panel_html.totals_html(view))
        self._set(self.workers, panel_html.workers_html(view))
        self._set(self.pools, panel_html.pools_html(view))
        self._set(self.queue, panel_html.queue_html(view))
        self._set(self.ended, panel_html.ended_html(view))
        self._set(self.timeline, panel_html.timeline_html(view))
        self._set_choices(panel_html.live_tasks(view))
        try:
            hints = latest_hints(list(self._history))
        except Exception:  # a malformed record must not stop the panel
            logger.debug("taskcell: right-sizing review failed", exc_info=True)
            hints = []
        self._set(self.hints, panel_html.hints_html(hints))
        self.redraws += 1

    @staticmethod
    def _set(widget: Any, value: str) -> None:
        if widget.value != value:  # unchanged values send nothing to the frontend
            widget.value = value

    def _set_choices(self, choices: list[tuple[str, str]]) -> None:
        """The tasks the cancel control offers, keeping the one chosen while it is listed."""
        if list(self.cancel_choice.options) == choices:
            return
        chosen = self.cancel_choice.value
        self.cancel_choice.options = choices
        if chosen in (key for _, key in choices):
            self.cancel_choice.value = chosen
        self.cancel_button.disabled = not choices

    # -- cancelling --------------------------------------------------------------------------

    def cancel(self, key: str | None = None) -> threading.Thread | None:
        """Stop the task ``key`` (the one chosen in the panel by default): interrupted on its
        worker if it runs, else cancelled, its resources freed either way. A cell of this
        kernel then shows it cancelled. Runs in a thread, which is returned (None when no task
        is chosen); the panel says how it went."""
        from taskcell.runner.stopping import cancel_task

        key = key or self.cancel_choice.value
        if not key:
            return None
        client = self.feed.client
        self.cancel_status.value = panel_html.esc(f"cancelling {key}…")

        def stop() -> None:
            try:
                running = client.sync(cancel_task, client, key)
            except Exception as e:  # the cluster went away: say so, in the panel
                self.cancel_status.value = panel_html.failure(f"could not cancel {key}: {e}")
                return
            how = "interrupted on its worker" if running else "cancelled before it started"
            self.cancel_status.value = panel_html.esc(f"{key}: {how}")

        thread = threading.Thread(target=stop, name=f"taskcell-cancel-{key}", daemon=True)
        thread.start()
        return thread

    # -- planner -----------------------------------------------------------------------------

    def _size(self) -> Any:
        text = self.size.value.strip()
        ns = getattr(self._shell, "user_ns", {}) or {}
        if text.isidentifier() and text in ns:
            return ns[text]
        return text

    def plan(self) -> Suggestion | None:
        """Suggest a preset for the planner box's input and profile, and show it."""
        from taskcell.errors import SpecError
        from taskcell.planner.suggestion import suggest

        if not self.size.value.strip():
            self.advice.value = ""
            self.insert_button.disabled = True
            return None
        try:
            self.suggestion = suggest(
                self._size(), self.profile.value, workers=self.feed.snapshot()
            )
        except SpecError as e:
            self.suggestion = None
            self.advice.value = panel_html.failure(str(e))
            self.insert_button.disabled = True
            return None
        self.advice.value = self.suggestion._repr_html_()
        self.insert_button.disabled = self.suggestion.line is None
        return self.suggestion

    def insert(self) -> bool:
        """Put the suggested ``%%task`` line into a new cell below; False if it could not."""
        if self.suggestion is None or self.suggestion.line is None:
            return False
        line = self.suggestion.line + "\n"
        self.line.value = self.suggestion.line
        self.line.layout.display = ""
        if self.frontend.insert_cell_below(line):
            self.line.description = "Inserted"
            return True
        self.line.description = "Copy"
        self.line.tooltip = (
            "taskcell's JupyterLab extension inserts this for you; without it, copy the line "
            "to the top of a new cell"
        )
        return False

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._stop.is_set()

    def close(self) -> None:
        """Stop updating and remove the panel. Safe to call twice."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._changed.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(5)
        self.feed.close()
        self.frontend.close()
        for widget in _descendants(self.widget):
            widget.close()
        if self in _open:
            _open.remove(self)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


def _descendants(widget: Any) -> list:
    """``widget`` and every widget inside it, innermost first (closing frees their comms)."""
    inner = [d for child in getattr(widget, "children", ()) for d in _descendants(child)]
    return [*inner, widget]


def panel(client: Client | None = None, history: list | None = None) -> Panel:
    """Show the live resource panel: workers, what they hold, what waits, and a planner.

    Parameters
    ----------
    client : distributed.Client, optional
        The cluster to show; the one ``%%task`` uses by default.
    history : list of TaskRecord, optional
        Finished tasks for right-sizing hints; this kernel's by default.

    Returns
    -------
    Panel
        Displayed when it is a cell's last value; ``.close()`` stops it.
    """
    return Panel(client, history)
