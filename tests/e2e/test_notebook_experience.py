"""What a user sees in the notebook itself, in a real browser: ``jupyter lab`` on 127.0.0.1 and
headless Chromium driven by Playwright, as in :mod:`test_sidebar` (whose server helpers this
reuses).

- The kernel's embedded cluster stopped from the sidebar (its Stop, after the dialog): the
  notebook's next ``%%task`` cell says that the cluster at its address was stopped, starts a new
  one, runs and succeeds, with none of Dask's reconnection traceback in its output.
- A failing ``%%task --bg`` cell: its output turns into a red error, as Jupyter shows one, with
  the exception's name and message, once the failure arrives (after the cell returned);
  ``%task_wait`` in a later cell raises it; and the notebook saved with Ctrl+S holds an
  ``error`` output for that cell on disk.
- A tqdm bar (``tqdm.auto``) in a ``%%task`` cell: one bar in the cell's output, updated in
  place to 50/50, not a stack of stderr blocks.

No check depends on how long something takes: each waits for what the user would see.
Screenshots go to ``test-artifacts/``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import DaskProcesses
from waiting import eventually

from . import test_sidebar
from .browser import ARTIFACTS, CHROMIUM, lab_page
from .test_sidebar import code_cell, notebook, open_sidebar

# A whole walk through the lab starts kernels and clusters: more than the suite's 120 s on a
# loaded machine, so the hang guard is longer here; each step has its own wait.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

lab = test_sidebar.lab  # the `jupyter lab` fixture, on tmp_path / "notebooks"

#: What a stderr output (an error's traceback, a red block) is rendered as in JupyterLab.
STDERR = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
#: Dask's words when a client loses its scheduler and tries again; never in a user's cell.
RECONNECT_NOISE = ("CommClosedError", "ConnectionRefusedError", "Traceback")


@pytest.fixture
def one_worker(dask_processes: DaskProcesses) -> Iterator[DaskProcesses]:
    """A scheduler and one worker that has joined it (a %%task on none is refused)."""
    dask_processes.worker(name="nb-worker")
    dask_processes.wait_for_workers(1)
    yield dask_processes


def needs_chromium() -> None:
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (apt-get install -y chromium)")


def code_cells(page):
    return page.locator(".jp-Notebook .jp-Cell.jp-CodeCell")


def run_cell(page, index: int) -> None:
    """Click into the code cell ``index`` and run it with Shift+Enter, as a user does."""
    code_cells(page).nth(index).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")


def wait_ran(page, index: int, timeout: float = 120_000) -> None:
    """Until the code cell ``index`` has run: its prompt ``[N]:``, not ``[*]:`` or ``[ ]:``."""
    from playwright.sync_api import expect

    prompt = code_cells(page).nth(index).locator(".jp-InputPrompt")
    expect(prompt).to_have_text(re.compile(r"^\[\d+\]:$"), timeout=timeout)


def wait_idle(page) -> None:
    from playwright.sync_api import expect

    expect(page.get_by_text(re.compile(r"\(ipykernel\) \| Idle$"))).to_be_visible(timeout=60_000)


def test_the_cell_after_the_embedded_cluster_was_stopped_from_the_sidebar_says_so_and_runs(
    tmp_path, lab
):
    needs_chromium()
    from playwright.sync_api import expect

    sources = [
        "%load_ext taskcell",
        "%%task\nfirst = 1",
        "%%task\nsecond = first + 1\nprint('second is', second)",
        "print('in the kernel', second)",
    ]
    body = {
        "cells": [code_cell(source) for source in sources],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (tmp_path / "notebooks" / "stopped.ipynb").write_text(json.dumps(body))
    with lab_page(
        lab, tmp_path / "chromium-profile", "stopped.ipynb", "e2e-stopped-failure.png"
    ) as page:
        sidebar = open_sidebar(page)
        wait_idle(page)
        run_cell(page, 0)
        wait_ran(page, 0)
        run_cell(page, 1)  # starts the kernel's embedded cluster
        expect(sidebar.locator(".jp-taskcell-status")).to_have_attribute(
            "data-status", "connected", timeout=180_000
        )
        wait_ran(page, 1, timeout=180_000)
        (cluster,) = json.loads(lab.get("taskcell/api/clusters")[1])["clusters"]
        assert cluster["sources"] == ["kernel"]
        address = cluster["address"]

        # Stopped from the sidebar, after its question.
        sidebar.locator(".jp-taskcell-stop").click()
        dialog = page.locator(".jp-Dialog")
        expect(dialog).to_contain_text("Stop the cluster at")
        dialog.locator("button", has_text="Stop").click()
        expect(dialog).to_have_count(0)
        expect(sidebar.locator(".jp-taskcell-message-empty")).to_contain_text(
            "No cluster yet", timeout=60_000
        )

        # The next %%task cell says what happened, starts a new cluster and runs on it.
        run_cell(page, 2)
        output = code_cells(page).nth(2).locator(".jp-OutputArea")
        expect(output).to_contain_text(f"the cluster at {address} was stopped", timeout=180_000)
        expect(output).to_contain_text("waiting for the embedded cluster to start")
        expect(output).to_contain_text("second is 2", timeout=180_000)
        wait_ran(page, 2, timeout=180_000)
        run_cell(page, 3)
        after = code_cells(page).nth(3).locator(".jp-OutputArea")
        expect(after).to_contain_text("in the kernel 2", timeout=60_000)
        wait_ran(page, 3)

        # Nothing of Dask's reconnection under the cells, and no error.
        for cell in (output, after):
            expect(cell.locator(STDERR)).to_have_count(0)
            text = cell.inner_text()
            for noise in RECONNECT_NOISE:
                assert noise not in text, f"{noise} in the cell's output:\n{text}"
        expect(sidebar.locator(".jp-taskcell-status")).to_have_attribute(
            "data-status", "connected", timeout=60_000
        )
        (again,) = json.loads(lab.get("taskcell/api/clusters")[1])["clusters"]
        assert again["address"] != address
        page.screenshot(path=str(ARTIFACTS / "e2e-notebook-after-stop.png"))


def saved_outputs(path: Path) -> list[list[dict]]:
    """The outputs of each code cell of the notebook at ``path``, as saved."""
    import nbformat

    saved = nbformat.read(path, as_version=4)
    return [cell.get("outputs", []) for cell in saved.cells if cell.cell_type == "code"]


def errors_in(outputs: list[dict]) -> list[dict]:
    return [o for o in outputs if o.get("output_type") == "error"]


def test_a_failed_background_cell_shows_and_is_saved_as_an_error(tmp_path, one_worker, lab):
    needs_chromium()
    from playwright.sync_api import expect

    failing = "%%task --bg --name broken\nprint('reading batch 7')\nraise ValueError('bad batch')"
    cells = [failing, "%task_wait"]
    name = notebook(tmp_path / "notebooks", "failed-bg.ipynb", one_worker.address, *cells)
    with lab_page(lab, tmp_path / "chromium-profile", name, "e2e-failed-bg-failure.png") as page:
        wait_idle(page)
        for index in range(3):  # %load_ext, %task_cluster, the --bg cell: it returns at once
            run_cell(page, index)
            wait_ran(page, index)
        output = code_cells(page).nth(2).locator(".jp-OutputArea")
        # The failure arrives after the cell returned: its output turns into a red error.
        error = output.locator(STDERR)
        expect(error).to_have_count(1, timeout=120_000)
        expect(error).to_contain_text(re.compile(r"broken: failed on tcp://"))
        expect(error).to_contain_text("ValueError: bad batch")
        expect(error).to_contain_text("reading batch 7")

        # %task_wait raises it where it is written, as an error of that cell.
        run_cell(page, 3)
        wait_ran(page, 3)
        raised = code_cells(page).nth(3).locator(".jp-OutputArea").locator(STDERR)
        expect(raised).to_have_count(1)
        expect(raised).to_contain_text("ValueError")
        expect(raised).to_contain_text("bad batch")
        # Both look alike: the background cell's failure is drawn as Jupyter draws an error.
        colour = "e => getComputedStyle(e).backgroundColor"
        assert error.evaluate(colour) == raised.evaluate(colour)
        page.screenshot(path=str(ARTIFACTS / "e2e-notebook-failed-bg.png"))

        # Saved with Ctrl+S: the %task_wait cell's error, then the background cell's.
        code_cells(page).nth(3).locator(".jp-InputArea-editor").click()
        page.keyboard.press("Control+s")
        path = tmp_path / "notebooks" / name
        outputs = eventually(
            lambda: saved_outputs(path),
            "the notebook saved with %task_wait's error",
            holds=lambda outs: len(outs) > 3 and errors_in(outs[3]),
        )
        (waited,) = errors_in(outputs[3])
        assert waited["ename"] == "ValueError" and "bad batch" in waited["evalue"]
        assert errors_in(outputs[2]), (
            "the failed --bg cell is saved with no output of output_type 'error'; its outputs: "
            + json.dumps(outputs[2], indent=1)
        )
        (saved,) = errors_in(outputs[2])
        assert saved["ename"] == "ValueError"
        assert "bad batch" in saved["evalue"]


def test_a_tqdm_bar_in_a_task_cell_is_one_bar_updated_in_place(tmp_path, one_worker, lab):
    needs_chromium()
    from playwright.sync_api import expect

    bar = (
        "%%task\nimport time\nfrom tqdm.auto import tqdm\n"
        "for i in tqdm(range(50)):\n    time.sleep(0.02)"
    )
    name = notebook(tmp_path / "notebooks", "tqdm.ipynb", one_worker.address, bar)
    with lab_page(lab, tmp_path / "chromium-profile", name, "e2e-tqdm-failure.png") as page:
        wait_idle(page)
        for index in range(3):
            run_cell(page, index)
            wait_ran(page, index)
        output = code_cells(page).nth(2).locator(".jp-OutputArea")
        # Its end: one bar, full, saying 50/50.
        progress = output.locator("progress")
        expect(progress).to_have_count(1)
        expect(progress).to_have_attribute("value", "50")
        expect(progress).to_have_attribute("max", "50")
        shown = output.locator(".jp-OutputArea-output", has_text="/50")
        expect(shown).to_have_count(1)
        expect(shown).to_contain_text("50/50")
        # Not tqdm's text bar on stderr: no red block, no "it/s" line besides the bar.
        expect(output.locator(STDERR)).to_have_count(0)
        assert output.inner_text().count("it/s") <= 1, output.inner_text()
        page.screenshot(path=str(ARTIFACTS / "e2e-notebook-tqdm.png"))
