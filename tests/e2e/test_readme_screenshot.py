"""The README's picture of the sidebar, taken by a browser test: ``jupyter lab`` on 127.0.0.1,
a real Dask scheduler and a worker advertising ``GPU=2``, headless Chromium driven by
Playwright, as in :mod:`test_sidebar` (whose server helpers this reuses).

The notebook runs the README's first-screen cells: ``%load_ext taskcell``, a cluster, one
``%%task`` cell that finishes, and a ``--bg`` GPU cell that is still running. Once the sidebar
shows the cluster, the finished task and the running one, the window is saved as a PNG: to
``docs/sidebar.png`` (tracked, shown by the README) when ``TASKCELL_SCREENSHOT=1``, else to the
test's tmp dir, so an ordinary ``make test`` never rewrites a tracked file::

    TASKCELL_SCREENSHOT=1 .venv/bin/python -m pytest tests/e2e/test_readme_screenshot.py
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

import pytest

from . import test_sidebar
from .browser import CHROMIUM, REPO, lab_page
from .test_sidebar import gpu_bar, notebook, open_sidebar, run_all_cells

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

lab = test_sidebar.lab  # the `jupyter lab` fixture, on tmp_path / "notebooks"
gpu_cluster = test_sidebar.gpu_cluster  # a scheduler and the worker gpu-box, GPU=2

#: Where the README's picture lives; written only when TASKCELL_SCREENSHOT=1.
README_SHOT = REPO / "docs" / "sidebar.png"
VIEWPORT = (1400, 900)  # lab_page's window
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

#: The cells after %load_ext and %task_cluster: the README's %%task cell (as in
#: demo_notebooks/02-task-magic.ipynb) and a GPU cell that runs until the test cancels it.
CELLS = [
    "import numpy as np\n\ndata = np.arange(1_000_000)\nstep = 7",
    "%%task --cpu 1 --memory 1Gi\nkept = data[data % step == 0]\n"
    'print("kept", len(kept), "values")\ntotal = int(kept.sum())\ntotal',
    "%%task --gpu 1 --bg --name train\nimport time\n\ntime.sleep(600)",
]


def screenshot_path(tmp_path: Path) -> Path:
    """``docs/sidebar.png`` when asked for with ``TASKCELL_SCREENSHOT=1``, else a tmp file."""
    if os.environ.get("TASKCELL_SCREENSHOT") == "1":
        README_SHOT.parent.mkdir(exist_ok=True)
        return README_SHOT
    return tmp_path / "sidebar.png"


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's header (its IHDR chunk comes first)."""
    assert data[:8] == PNG_SIGNATURE, f"not a PNG: {data[:8]!r}"
    assert data[12:16] == b"IHDR", f"no IHDR chunk first: {data[12:16]!r}"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_the_readme_screenshot_shows_a_cluster_a_finished_and_a_running_task(
    tmp_path, gpu_cluster, lab
):
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (apt-get install -y chromium)")
    from playwright.sync_api import expect

    name = notebook(tmp_path / "notebooks", "taskcell.ipynb", gpu_cluster.address, *CELLS)
    shot = screenshot_path(tmp_path)
    with lab_page(lab, tmp_path / "chromium-profile", name, "e2e-readme-failure.png") as page:
        sidebar = open_sidebar(page)
        # The file browser closed, to give the notebook and the sidebar the room.
        page.locator(".lm-TabBar-tab[data-id='filebrowser']").click()
        expect(page.locator("#filebrowser")).to_be_hidden()
        run_all_cells(page)

        # The %%task cell ran on the worker: its print, its status line and its Out[].
        output = page.locator(".jp-Notebook .jp-Cell.jp-CodeCell").nth(3).locator(".jp-OutputArea")
        expect(output).to_contain_text("kept 142858 values", timeout=60_000)
        expect(output).to_contain_text(re.compile(r"ran on \S+ in \d+\.\d\d s"))
        expect(output).to_contain_text("71428928571")

        # The sidebar: the cluster, that task finished, the GPU cell running on gpu-box.
        expect(sidebar.locator(".jp-taskcell-status")).to_have_attribute(
            "data-status", "connected", timeout=30_000
        )
        finished = sidebar.locator(".jp-taskcell-ended-task[data-state='finished']")
        expect(finished.locator(".jp-taskcell-task-name")).to_have_text(["cell-4"], timeout=30_000)
        gpu = gpu_bar(sidebar)
        expect(gpu).to_have_attribute("data-running", "1", timeout=60_000)
        expect(gpu.locator(".jp-taskcell-resource-label")).to_have_text("1 of 2 GPU in use")
        running = sidebar.locator(".jp-taskcell-worker .jp-taskcell-task-running")
        expect(running.locator(".jp-taskcell-task-name")).to_have_text("train")

        page.screenshot(path=str(shot))
        data = shot.read_bytes()
        assert png_size(data) == VIEWPORT
        assert len(data) > 10_000, f"{shot} is only {len(data)} bytes: a blank page?"

        # Cancelled from the sidebar, so nothing outlives the test on the worker.
        running.locator(".jp-taskcell-cancel").click()
        expect(gpu).to_have_attribute("data-running", "0", timeout=30_000)
