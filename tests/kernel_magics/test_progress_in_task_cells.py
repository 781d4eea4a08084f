"""Progress bars in a ``%%task`` cell as in a plain one: ``tqdm.notebook`` and ``tqdm.auto``
draw one bar, shown once under a ``display_id`` and updated in place to its end; plain
``tqdm.tqdm`` is the text bar on stderr whose ``\\r`` redraws a notebook draws over one
another. A real kernel against real scheduler and worker processes.

Nothing here depends on how often the bar is redrawn or how the output is chunked: only on
the first display, the last update and the text as a terminal would leave it.
"""

from __future__ import annotations

import textwrap

import pytest

pytest.importorskip("tqdm")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def nb(kernel, module_dask):
    """The module's kernel pointed at one worker process with one thread."""
    module_dask.worker("--nthreads", "1", name="progress")
    module_dask.wait_for_workers(1)
    out = kernel.run(f"%task_cluster {module_dask.address}")
    assert out.status == "ok", out.error_text
    return kernel


def loop(imports: str, bar: str) -> str:
    return textwrap.dedent(f"""
        %%task
        import time
        {imports}
        for i in {bar}:
            time.sleep(0.01)
        """).strip("\n")


def bar_messages(out) -> dict[str, list[dict]]:
    """The displays of 50-step bars, by display_id, in the order they came."""
    bars: dict[str, list[dict]] = {}
    for m in out.of_type("display_data", "update_display_data"):
        display_id = m["content"].get("transient", {}).get("display_id")
        if "/50" in m["content"]["data"].get("text/plain", "") and display_id:
            bars.setdefault(display_id, []).append(m)
    return bars


def as_a_terminal_shows(text: str) -> list[str]:
    """``text``'s lines as a terminal leaves them: each line what its last ``\\r`` began."""
    return [line.rsplit("\r", 1)[-1] for line in text.split("\n")]


@pytest.mark.parametrize(
    "imports, bar",
    [
        ("from tqdm.auto import tqdm", "tqdm(range(50))"),
        ("from tqdm.auto import trange", "trange(50)"),
        ("from tqdm.notebook import tqdm", "tqdm(range(50))"),
        ("from tqdm.notebook import tnrange", "tnrange(50)"),
        ("from tqdm.autonotebook import tqdm", "tqdm(range(50))"),
    ],
    ids=["auto", "auto-trange", "notebook", "notebook-tnrange", "autonotebook"],
)
def test_a_notebook_bar_is_one_display_updated_to_its_end(nb, imports, bar):
    out = nb.run(loop(imports, bar), timeout=120)
    assert out.status == "ok", out.error_text
    bars = bar_messages(out)
    assert len(bars) == 1, bars
    (messages,) = bars.values()
    first, *updates = messages
    assert first["msg_type"] == "display_data"
    assert updates and all(m["msg_type"] == "update_display_data" for m in updates)
    last = updates[-1]["content"]["data"]
    assert "50/50" in last["text/plain"]
    assert 'value="50" max="50"' in last["text/html"]
    assert "it/s" not in out.stderr + out.stdout  # no text bar besides


def test_a_bar_stopped_by_an_error_stays_where_it_stopped(nb):
    code = loop("from tqdm.auto import tqdm", "tqdm(range(50))") + "\n    assert i < 7"
    out = nb.run(code, timeout=120)
    assert out.status == "error"
    (messages,) = bar_messages(out).values()
    last = messages[-1]["content"]["data"]
    assert "7/50" in last["text/plain"]
    assert 'value="7" max="50"' in last["text/html"]


def test_a_text_bar_redraws_on_stderr_as_in_a_terminal(nb):
    out = nb.run(loop("from tqdm import tqdm", "tqdm(range(50))"), timeout=120)
    assert out.status == "ok", out.error_text
    assert not bar_messages(out)
    assert "\r" in out.stderr  # passed through for the notebook to draw over
    shown = [line for line in as_a_terminal_shows(out.stderr) if line.strip()]
    assert len(shown) == 1, shown
    assert "50/50" in shown[0]
