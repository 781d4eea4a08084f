"""The Resources sidebar in a real browser: ``jupyter lab`` on 127.0.0.1, a real Dask scheduler
and a worker advertising ``GPU=2``, headless Chromium driven by Playwright.

A copy of the ``%%task`` demo notebook is opened, pointed at the cluster with
``%task_cluster``, and a ``%%task --gpu 1 --bg`` cell is run from the page; the sidebar, which
knew no cluster before, must show one of the worker's two GPUs in use, the task's age growing
between the server's answers, then none in use when the task ends, in the words the notebook
panel uses for the same snapshot; the planner field keeps its focus and text through updates,
measures a variable through the notebook's kernel, and its suggestion is put atop the active
cell. The task sleeps until the test, having seen it running, writes a file (at most
:data:`TASK_SECONDS`), so a slow machine cannot make it end unseen. Screenshots are saved under
``test-artifacts/``.

Later tests: a failing cell's output and the timeline; a pool's worker, and one started from
the sidebar; cancelling; the legend, the counts and the dashboard through the Jupyter server
with its plots as panels; a cluster started, scaled and stopped from the sidebar, one started
there and attached to a notebook that then runs a cell on it, and a kernel's embedded cluster
scaled and stopped there. No check depends on how long something takes:
each waits for what the user would see.
"""

from __future__ import annotations

import copy
import json
import os
import re
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import DaskProcesses
from waiting import eventually

from .browser import ARTIFACTS, CHROMIUM, REPO, lab_page, palette_search

# A whole walk through the lab starts kernels and clusters: more than the suite's 120 s on a
# loaded machine, so the hang guard is longer here; each step has its own wait.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

DEMO = REPO / "demo_notebooks" / "02-task-magic.ipynb"
TASK_SECONDS = 60


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def seconds(text: str) -> int:
    """``"1m15s"`` -> 75, as the sidebar writes a duration."""
    found = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text.strip())
    assert found and text.strip(), f"not a duration: {text!r}"
    h, m, s = (int(g or 0) for g in found.groups())
    return h * 3600 + m * 60 + s


def cluster_version(lab) -> int:
    """The version of the (one) cluster's state the server holds now."""
    (cluster,) = json.loads(lab.get("taskcell/api/clusters")[1])["clusters"]
    return json.loads(lab.get(f"taskcell/api/clusters/{cluster['id']}")[1])["version"]


def code_cell(source: str) -> dict:
    return {
        "cell_type": "code",
        "id": secrets.token_hex(4),
        "metadata": {},
        "source": source,
        "outputs": [],
        "execution_count": None,
    }


def demo_copy(folder: Path, address: str, release: Path) -> str:
    """The demo notebook with, after its ``%load_ext taskcell``, the cells this test runs."""
    notebook = json.loads(DEMO.read_text())
    cells = [copy.deepcopy(c) for c in notebook["cells"]]
    for cell in cells:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    first_code = next(i for i, c in enumerate(cells) if c["cell_type"] == "code")
    assert "".join(cells[first_code]["source"]).strip() == "%load_ext taskcell"
    cells[first_code + 1 : first_code + 1] = [
        code_cell(f"%task_cluster {address}"),
        code_cell("frame = __import__('numpy').zeros(1 << 20)"),
        code_cell(
            "%%task --gpu 1 --bg --name gpu-sleep\nimport os, time\n"
            f"deadline = time.time() + {TASK_SECONDS}\n"
            f"while not os.path.exists({str(release)!r}) and time.time() < deadline:\n"
            "    time.sleep(0.05)"
        ),
    ]
    notebook["cells"] = cells
    (folder / DEMO.name).write_text(json.dumps(notebook, indent=1))
    return DEMO.name


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


class Lab:
    """``jupyter lab`` in its own process, on 127.0.0.1, with throwaway config and state."""

    def __init__(self, root: Path, state: Path) -> None:
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
        # These notebooks choose their cluster with %task_cluster: no embedded one meanwhile.
        env["DASK_TASKCELL__EMBEDDED_CLUSTER__START_EARLY"] = "False"
        env.update(
            JUPYTER_CONFIG_DIR=str(state / "config"),
            JUPYTER_RUNTIME_DIR=str(state / "runtime"),
            JUPYTERLAB_SETTINGS_DIR=str(state / "settings"),
            JUPYTERLAB_WORKSPACES_DIR=str(state / "workspaces"),
        )
        # No "get notified about Jupyter news?" toast over the screenshots.
        notification = state / "settings" / "@jupyterlab" / "apputils-extension"
        notification.mkdir(parents=True)
        (notification / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
        self.log = state / "lab.log"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyterlab",
                "--no-browser",
                "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={self.port}",
                "--ServerApp.port_retries=0",
                f"--ServerApp.root_dir={root}",
                f"--IdentityProvider.token={self.token}",
                "--ServerApp.allow_root=True",  # CI machines run tests as root
                "--LabApp.news_url=None",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            ],
            env=env,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )

    def get(self, path: str, token: bool = True) -> tuple[int, bytes]:
        """GET ``path`` with the server's token (or none), redirects not followed."""
        headers = {"Authorization": f"token {self.token}"} if token else {}
        request = urllib.request.Request(f"{self.url}/{path}", headers=headers)
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            with opener.open(request, timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def wait_ready(self) -> None:
        eventually(self._answers, "jupyter lab answering api/status", seen=self.log.read_text)

    def _answers(self) -> bool:
        assert self.proc.poll() is None, f"jupyter lab exited:\n{self.log.read_text()}"
        try:
            return self.get("api/status")[0] == 200
        except OSError:
            return False

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def gpu_cluster(dask_processes):
    dask_processes.worker("--resources", "GPU=2", name="gpu-box")
    return dask_processes


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    root = tmp_path / "notebooks"
    root.mkdir()
    server = Lab(root, tmp_path)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def test_the_sidebar_follows_a_gpu_task_from_start_to_end(tmp_path, gpu_cluster, lab):
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (apt-get install -y chromium)")
    from playwright.sync_api import expect

    from taskcell.planner import suggest
    from taskcell.planner.view import snapshot_view

    status, body = lab.get("taskcell/api/clusters")
    assert status == 200, (
        f"the taskcell server extension is not enabled (pip install -e .): {body!r}"
    )
    assert json.loads(body) == {"clusters": []}
    release = tmp_path / "release"
    name = demo_copy(tmp_path / "notebooks", gpu_cluster.address, release)

    with lab_page(lab, tmp_path / "chromium-profile", name, "e2e-sidebar-failure.png") as page:
        # The kernel has started and connected ("No Kernel | Initializing" until then).
        expect(page.get_by_text(re.compile(r"\(ipykernel\) \| Idle$"))).to_be_visible(
            timeout=45_000
        )

        tab = page.locator(".lm-TabBar-tab[data-id='taskcell-resources']")
        expect(tab, "the lab extension is not installed or not loaded").to_be_visible()
        tab.click()
        sidebar = page.locator("#taskcell-resources")
        expect(sidebar).to_be_visible()
        expect(sidebar.locator(".jp-taskcell-message-empty")).to_contain_text("No cluster yet")

        # Run %load_ext and %task_cluster as a user does, Shift+Enter each: the kernel
        # records its cluster, and the sidebar follows the notebook's cluster.
        cells = page.locator(".jp-Notebook .jp-Cell.jp-CodeCell")
        cells.nth(0).locator(".jp-InputArea-editor").click()
        for _ in range(3):  # %load_ext, %task_cluster, frame = ...
            page.keyboard.press("Shift+Enter")
        gpu = sidebar.locator(".jp-taskcell-worker[data-name='gpu-box']").locator(
            ".jp-taskcell-resource[data-resource='GPU']"
        )
        expect(gpu).to_have_attribute("data-running", "0", timeout=30_000)
        expect(gpu.locator(".jp-taskcell-resource-label")).to_have_text("0 of 2 GPU in use")

        # The GPU cell, in the background.
        page.keyboard.press("Shift+Enter")
        expect(gpu).to_have_attribute("data-running", "1", timeout=30_000)
        expect(gpu).to_have_attribute("data-total", "2")
        expect(gpu.locator(".jp-taskcell-resource-label")).to_have_text("1 of 2 GPU in use")
        expect(sidebar.locator(".jp-taskcell-task-running")).to_contain_text("gpu-sleep")
        expect(sidebar.locator(".jp-taskcell-status")).to_have_attribute("data-status", "connected")
        selected = sidebar.locator(".jp-taskcell-cluster-select option:checked")
        expect(selected).to_have_text(f"{name} (this notebook)")
        expect(selected).to_have_attribute("title", gpu_cluster.address)
        expect(sidebar.locator(".jp-taskcell-status-address")).to_have_text(gpu_cluster.address)
        page.screenshot(path=str(ARTIFACTS / "e2e-sidebar-gpu-busy.png"))

        # Its age grows while nothing changes on the cluster (the server answers no new
        # snapshot): the sidebar ticks it from the scheduler's clock.
        age = sidebar.locator(".jp-taskcell-task-running .jp-taskcell-task-waited")
        for _ in range(5):  # until a change of age is seen with no new state in between
            version, before = cluster_version(lab), age.inner_text()
            expect(age).not_to_have_text(before, timeout=10_000)
            assert seconds(age.inner_text()) > seconds(before)
            if cluster_version(lab) == version:
                break
        else:
            raise AssertionError("the cluster's state changed at every tick seen")

        # Focus and text in the planner field survive the updates the task's end brings.
        field = sidebar.locator(".jp-taskcell-size")
        field.click()
        field.type("frame")
        release.touch()
        expect(gpu).to_have_attribute("data-running", "0", timeout=15_000)
        expect(gpu.locator(".jp-taskcell-resource-label")).to_have_text("0 of 2 GPU in use")
        expect(sidebar.locator(".jp-taskcell-task-running")).to_have_count(0)
        expect(field).to_be_focused()
        expect(field).to_have_value("frame")
        page.screenshot(path=str(ARTIFACTS / "e2e-sidebar-gpu-idle.png"))

        # The sidebar words the snapshot as the notebook panel does (taskcell.planner.view).
        (cluster,) = json.loads(lab.get("taskcell/api/clusters")[1])["clusters"]
        snap = json.loads(lab.get(f"taskcell/api/clusters/{cluster['id']}")[1])["snapshot"]
        view = snapshot_view(snap, time.time())
        expect(sidebar.locator(".jp-taskcell-summary")).to_have_text(view["summary"])
        expect(sidebar.locator(".jp-taskcell-group-title")).to_have_text(
            [g["title"] for g in view["groups"]]
        )
        expect(sidebar.locator(".jp-taskcell-worker-head")).to_have_text(
            [w["name"] for g in view["groups"] for w in g["workers"]]
        )
        expect(sidebar.locator(".jp-taskcell-resource-label")).to_have_text(
            [b["label"] for b in view["totals"]]
            + [b["label"] for g in view["groups"] for w in g["workers"] for b in w["bars"]]
        )

        # The planner: a variable of the notebook, measured by its kernel (8 MiB of zeros).
        sidebar.locator(".jp-taskcell-suggest").click()
        summary = sidebar.locator(".jp-taskcell-suggestion-summary")
        expect(summary).to_contain_text("8 MiB of input", timeout=30_000)
        # A size in, a preset out, its line put atop the active cell; a slip gets the spec's
        # own words.
        field.fill("12Gb")
        sidebar.locator(".jp-taskcell-suggest").click()
        expect(sidebar.locator(".jp-taskcell-planner-error")).to_contain_text("'Gb' means bits")
        field.fill("1 GiB")
        sidebar.locator(".jp-taskcell-suggest").click()
        line = sidebar.locator(".jp-taskcell-task-line")
        expect(line).to_have_text(suggest(2**30).line)
        expect(sidebar.locator(".jp-taskcell-fit-count")).to_have_text(
            re.compile(r"^\d+ of 1 live workers can run it$")
        )
        sidebar.locator(".jp-taskcell-insert").click()
        active = page.locator(".jp-Notebook .jp-Cell.jp-mod-active .cm-content")
        expect(active).to_contain_text(line.inner_text() + "import numpy as np")
        page.screenshot(path=str(ARTIFACTS / "e2e-sidebar-planner.png"))


# -- tasks that end, cancelling, the legend and the counts ------------------------------------

#: Text-bearing parts of the sidebar that must never be cut off or run past its edge.
OVERFLOW_CHECK = """
root => {
  const edge = root.getBoundingClientRect().right + 0.5;
  return [...root.querySelectorAll('*')]
    .filter(e => e.getClientRects().length && !['SELECT', 'OPTION'].includes(e.tagName))
    .filter(e => e.getBoundingClientRect().right > edge
      || (e.children.length === 0 && e.scrollWidth > e.clientWidth + 1))
    .map(e => `${e.tagName}.${e.className}: ${e.textContent.slice(0, 40)}`);
}
"""


#: The notebook panel's controls whose right edge runs past its output area.
PANEL_FITS = """
panel => {
  const edge = panel.closest('.jp-OutputArea-output').getBoundingClientRect().right + 0.5;
  return [...panel.querySelectorAll('.widget-hbox > *, .widget-text, .widget-dropdown')]
    .filter(e => e.getClientRects().length && e.getBoundingClientRect().right > edge)
    .map(e => `${e.className}: ${e.textContent.slice(0, 40)}`);
}
"""


@pytest.fixture
def dashboard_cluster() -> Iterator[DaskProcesses]:
    cluster = DaskProcesses(dashboard=True)
    try:
        cluster.worker("--resources", "GPU=2", name="gpu-box")
        yield cluster
    finally:
        cluster.stop()


def held_cell(name: str, gpus: int | str, release: Path) -> str:
    """A ``--bg`` cell that holds ``gpus`` GPUs (``2``, ``A100:1``) until ``release`` exists
    (or TASK_SECONDS)."""
    return (
        f"%%task --gpu {gpus} --bg --name {name}\nimport os, time\n"
        f"deadline = time.time() + {TASK_SECONDS}\n"
        f"while not os.path.exists({str(release)!r}) and time.time() < deadline:\n"
        "    time.sleep(0.05)"
    )


def notebook(folder: Path, name: str, address: str, *cells: str) -> str:
    """A notebook that loads taskcell, points it at ``address`` and has ``cells`` after."""
    sources = ["%load_ext taskcell", f"%task_cluster {address}", *cells]
    body = {
        "cells": [code_cell(source) for source in sources],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (folder / name).write_text(json.dumps(body, indent=1))
    return name


def run_all_cells(page) -> None:
    """Wait for the kernel, then run every cell from the first, Shift+Enter each."""
    from playwright.sync_api import expect

    expect(page.get_by_text(re.compile(r"\(ipykernel\) \| Idle$"))).to_be_visible(timeout=60_000)
    cells = page.locator(".jp-Notebook .jp-Cell.jp-CodeCell")
    cells.nth(0).locator(".jp-InputArea-editor").click()
    for _ in range(cells.count()):
        page.keyboard.press("Shift+Enter")


def open_sidebar(page):
    from playwright.sync_api import expect

    page.locator(".lm-TabBar-tab[data-id='taskcell-resources']").click()
    sidebar = page.locator("#taskcell-resources")
    expect(sidebar).to_be_visible()
    return sidebar


def gpu_bar(sidebar):
    return sidebar.locator(".jp-taskcell-worker[data-name='gpu-box']").locator(
        ".jp-taskcell-resource[data-resource='GPU']"
    )


def assert_nothing_cut_off(sidebar) -> None:
    assert sidebar.evaluate(OVERFLOW_CHECK) == []


#: Local pools of one-thread workers with one A100 or one T4, which no worker of the cluster
#: has: the cells use the first, the sidebar starts a worker of the second.
POOL_CELL = (
    "import dask\ndask.config.set({'taskcell.pools': {'a100': "
    "{'shape': {'cpu': 1, 'memory': '1Gi', 'gpu': 'A100:1'}, 'idle-timeout': '10 minutes'}, "
    "'spare': {'shape': {'cpu': 1, 'memory': '1Gi', 'gpu': 'T4:1'}, "
    "'idle-timeout': '10 minutes'}}})"
)


def test_a_failing_cell_and_a_pools_worker_show_in_the_sidebar(tmp_path, gpu_cluster, lab):
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (apt-get install -y chromium)")
    from playwright.sync_api import expect

    release = tmp_path / "release"
    failing = (
        "%%task --bg --name broken\nprint('reading batch 7')\n"
        "print('step 1/2\\rstep 2/2 \\x1b[31mred\\x1b[0m')\nraise ValueError('bad batch')"
    )
    cells = [failing, POOL_CELL, held_cell("pooled", "A100:1", release)]
    name = notebook(tmp_path / "notebooks", "failing.ipynb", gpu_cluster.address, *cells)
    with lab_page(lab, tmp_path / "chromium-profile", name, "e2e-sidebar-failed.png") as page:
        sidebar = open_sidebar(page)
        run_all_cells(page)
        output = page.locator(".jp-Notebook .jp-Cell.jp-CodeCell").nth(2).locator(".jp-OutputArea")
        expect(output).to_contain_text(re.compile(r"broken: failed on tcp://"), timeout=60_000)
        expect(output).to_contain_text("ValueError: bad batch")

        ended = sidebar.locator(".jp-taskcell-ended-task[data-state='failed']")
        expect(ended).to_have_count(1, timeout=30_000)
        expect(ended.locator(".jp-taskcell-task-name")).to_have_text("broken")
        expect(ended.locator(".jp-taskcell-ended-error")).to_have_text("ValueError: bad batch")
        expect(ended.locator(".jp-taskcell-ended-detail")).to_contain_text("gpu-box · ")
        expect(sidebar.locator(".jp-taskcell-ended .jp-taskcell-heading")).to_have_text("Ended: 1")
        page.screenshot(path=str(ARTIFACTS / "e2e-sidebar-failed-cell.png"))

        # The timeline shows it on its worker, in its cell's colour, named in the legend.
        row = sidebar.locator(".jp-taskcell-timeline-row[data-worker='gpu-box']")
        span = row.locator(".jp-taskcell-span[data-cell='broken']")
        expect(span).to_have_count(1)
        swatch = sidebar.locator(".jp-taskcell-timeline-legend [data-cell='broken'] span").first
        expect(swatch).to_be_visible()
        colour = "e => getComputedStyle(e).backgroundColor"
        assert span.evaluate(colour) == swatch.evaluate(colour)
        # Its output and error, opened from its line.
        ended.locator(".jp-taskcell-output").click()
        dialog = page.locator(".jp-Dialog")
        # As a terminal shows it: the \r redraw over the line, the ANSI colour as a colour.
        text = dialog.locator(".jp-taskcell-output-text")
        expect(text).to_have_text("reading batch 7\nstep 2/2 red\n")
        expect(text.locator(".ansi-red-fg")).to_have_text("red")
        expect(dialog.locator(".jp-taskcell-output-error")).to_contain_text("ValueError: bad batch")
        page.screenshot(path=str(ARTIFACTS / "e2e-sidebar-output.png"))
        dialog.locator("button", has_text="Close").click()
        expect(dialog).to_have_count(0)

        # The held cell asks for an A100: the pool starts a worker for it, which runs it.
        pool = sidebar.locator(".jp-taskcell-pool[data-name='a100']")
        expect(pool.locator(".jp-taskcell-pool-title")).to_have_text("a100 · local", timeout=30_000)
        expect(pool.locator(".jp-taskcell-pool-shape")).to_have_text(
            "CPU=1, MEMORY=1 GiB, GPU=1, GPU-A100=1"
        )
        worker = pool.locator(".jp-taskcell-pool-worker")
        expect(worker).to_have_attribute("data-state", "running", timeout=60_000)
        expect(worker.locator(".jp-taskcell-pool-worker-state")).to_have_text("running")
        expect(pool.locator(".jp-taskcell-pool-detail")).to_have_text(
            "1 of 1 worker · 0 tasks waiting"
        )
        expect(sidebar.locator(".jp-taskcell-task-running")).to_contain_text("pooled")
        page.screenshot(path=str(ARTIFACTS / "e2e-sidebar-pool.png"))
        assert_nothing_cut_off(sidebar)

        release.touch()
        expect(worker.locator(".jp-taskcell-pool-worker-state")).to_have_text(
            re.compile(r"^idle \d+s$"), timeout=30_000
        )

        # One more worker of a pool, asked from the sidebar: none past its max-workers, and no
        # question asked, since nothing stops.
        expect(pool.locator(".jp-taskcell-start-worker")).to_be_disabled()
        spare = sidebar.locator(".jp-taskcell-pool[data-name='spare']")
        expect(spare.locator(".jp-taskcell-pool-detail")).to_have_text(
            "0 of 1 worker · 0 tasks waiting"
        )
        spare.locator(".jp-taskcell-start-worker").click()
        expect(page.locator(".jp-Dialog")).to_have_count(0)
        started = spare.locator(".jp-taskcell-pool-worker")
        expect(started).to_have_attribute("data-state", "running", timeout=60_000)
        expect(spare.locator(".jp-taskcell-pool-detail")).to_have_text(
            "1 of 1 worker · 0 tasks waiting"
        )
        expect(spare.locator(".jp-taskcell-start-worker")).to_be_disabled()
        name = started.get_attribute("data-name")
        assert name and name.startswith("spare-")
        expect(sidebar.locator(f".jp-taskcell-worker[data-name='{name}']")).to_have_count(1)
        page.screenshot(path=str(ARTIFACTS / "e2e-sidebar-pool-started.png"))


def test_cancelling_from_the_sidebar_ends_the_tasks_and_frees_the_gpus(tmp_path, gpu_cluster, lab):
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (apt-get install -y chromium)")
    from playwright.sync_api import expect

    release = tmp_path / "release"  # never created: only a cancel ends these cells
    cells = [held_cell("hog", 2, release), held_cell("waiter", 1, release)]
    name = notebook(tmp_path / "notebooks", "cancel.ipynb", gpu_cluster.address, *cells)
    with lab_page(lab, tmp_path / "chromium-profile", name, "e2e-sidebar-cancel.png") as page:
        sidebar = open_sidebar(page)
        run_all_cells(page)
        gpu = gpu_bar(sidebar)
        expect(gpu).to_have_attribute("data-running", "2", timeout=60_000)
        waiting = sidebar.locator(".jp-taskcell-queue .jp-taskcell-task", has_text="waiter")
        expect(waiting).to_have_count(1, timeout=30_000)
        running = sidebar.locator(".jp-taskcell-worker .jp-taskcell-task-running")
        expect(running).to_have_count(1)
        expect(running.locator(".jp-taskcell-task-name")).to_have_text("hog")
        page.screenshot(path=str(ARTIFACTS / "e2e-sidebar-cancel-before.png"))

        # The waiting one first: it never starts.
        waiting.locator(".jp-taskcell-cancel").click()
        cancelled = sidebar.locator(".jp-taskcell-ended-task[data-state='cancelled']")
        expect(cancelled.filter(has_text="waiter")).to_have_count(1, timeout=30_000)
        expect(sidebar.locator(".jp-taskcell-queue .jp-taskcell-task")).to_have_count(0)
        expect(gpu).to_have_attribute("data-assigned", "0")

        # Then the running one: interrupted on its worker, its GPUs free again.
        running.locator(".jp-taskcell-cancel").click()
        expect(gpu).to_have_attribute("data-running", "0", timeout=30_000)
        expect(gpu.locator(".jp-taskcell-resource-label")).to_have_text("0 of 2 GPU in use")
        expect(cancelled.filter(has_text="hog")).to_have_count(1, timeout=30_000)
        expect(sidebar.locator(".jp-taskcell-task-running")).to_have_count(0)
        outputs = page.locator(".jp-Notebook .jp-Cell.jp-CodeCell .jp-OutputArea")
        expect(outputs.nth(2)).to_contain_text("hog: cancelled", timeout=30_000)
        expect(outputs.nth(3)).to_contain_text("waiter: cancelled", timeout=30_000)
        expect(sidebar.locator(".jp-taskcell-notice")).to_be_hidden()
        page.screenshot(path=str(ARTIFACTS / "e2e-sidebar-cancel-after.png"))


def test_the_legend_counts_and_dashboard_link_agree_with_what_is_shown(
    tmp_path, dashboard_cluster, lab
):
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (apt-get install -y chromium)")
    from playwright.sync_api import expect

    release = tmp_path / "release"
    cells = [held_cell("hog", 2, release)]
    cells += [held_cell(f"wait{i}", 1, release) for i in range(4)]
    cells += ["%task_panel"]
    name = notebook(tmp_path / "notebooks", "counts.ipynb", dashboard_cluster.address, *cells)
    with lab_page(lab, tmp_path / "chromium-profile", name, "e2e-sidebar-counts.png") as page:
        sidebar = open_sidebar(page)
        run_all_cells(page)
        expect(gpu_bar(sidebar)).to_have_attribute("data-running", "2", timeout=60_000)

        # The notebook panel's controls fit the notebook's default width: none runs past it.
        panel = page.locator(".jp-OutputArea-output .widget-vbox").first
        expect(panel.locator(".widget-button", has_text="Suggest")).to_be_visible(timeout=60_000)
        assert panel.evaluate(PANEL_FITS) == []
        panel.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "e2e-notebook-panel.png"))
        expect(gpu_bar(sidebar)).to_have_attribute("data-assigned", "4", timeout=30_000)

        # The counts say what the lists show: four waiting beside one running, not "0".
        summary = sidebar.locator(".jp-taskcell-summary")
        expect(summary).to_have_text("1 worker · 1 running · 4 waiting on workers · 0 queued")
        expect(sidebar.locator(".jp-taskcell-queue .jp-taskcell-heading")).to_have_text(
            "Waiting: 4"
        )
        waiting = sidebar.locator(".jp-taskcell-queue .jp-taskcell-task")
        expect(waiting).to_have_count(4)
        expect(waiting.locator(".jp-taskcell-task-name")).to_have_text(
            ["wait0", "wait1", "wait2", "wait3"]
        )
        expect(sidebar.locator(".jp-taskcell-worker .jp-taskcell-task-running")).to_have_count(1)
        expect(sidebar.locator(".jp-taskcell-worker .jp-taskcell-more")).to_have_text("4 waiting")

        legend = sidebar.locator(".jp-taskcell-totals .jp-taskcell-legend")
        expect(legend).to_be_visible()
        expect(legend.locator(".jp-taskcell-legend-running")).to_have_text("running")
        expect(legend.locator(".jp-taskcell-legend-assigned")).to_have_text(
            "assigned, waiting on the worker"
        )
        expect(sidebar.locator(".jp-taskcell-strip")).to_have_count(2)

        # The dashboard through the Jupyter server, so a browser on another machine opens it.
        (cluster,) = json.loads(lab.get("taskcell/api/clusters")[1])["clusters"]
        link = sidebar.locator("a.jp-taskcell-dashboard")
        expect(link).to_have_attribute(
            "href", f"{lab.url}/taskcell/dashboard/{cluster['id']}/status"
        )
        status, body = lab.get(f"taskcell/dashboard/{cluster['id']}/status")
        assert status == 200 and b"bokeh" in body.lower()
        assert lab.get(f"taskcell/dashboard/{cluster['id']}/status", token=False)[0] in (302, 403)
        # Its task stream as a JupyterLab panel, drawn by the dashboard through the server.
        sidebar.locator(".jp-taskcell-plot", has_text="Task stream").click()
        tab = page.locator(".lm-TabBar-tab", has_text="Dask: Task stream")
        expect(tab).to_be_visible()
        frame = page.frame_locator(".jp-taskcell-plot-frame iframe")
        expect(frame.locator(".bk-Canvas, canvas").first).to_be_attached(timeout=30_000)

        page.screenshot(path=str(ARTIFACTS / "e2e-sidebar-counts.png"))
        assert_nothing_cut_off(sidebar)
        release.touch()
        expect(gpu_bar(sidebar)).to_have_attribute("data-assigned", "0", timeout=60_000)
        expect(gpu_bar(sidebar)).to_have_attribute("data-running", "0", timeout=60_000)
        expect(sidebar.locator(".jp-taskcell-ended-task[data-state='finished']")).to_have_count(5)


def test_a_cluster_started_scaled_and_stopped_from_the_sidebar(tmp_path, lab):
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (apt-get install -y chromium)")
    from playwright.sync_api import expect

    name = notebook(tmp_path / "notebooks", "empty.ipynb", "tcp://127.0.0.1:1")
    with lab_page(lab, tmp_path / "chromium-profile", name, "e2e-sidebar-scale.png") as page:
        # Opened from the command palette this time.
        expect(page.locator(".jp-NotebookPanel")).to_be_visible(timeout=45_000)
        items = palette_search(page, "taskcell Resources")
        items.filter(has_text="Show the taskcell Resources sidebar").click()
        sidebar = page.locator("#taskcell-resources")
        expect(sidebar).to_be_visible()
        expect(sidebar.locator(".jp-taskcell-message-empty")).to_contain_text("No cluster yet")
        sidebar.locator(".jp-taskcell-start").click()
        expect(sidebar.locator(".jp-taskcell-status")).to_have_attribute(
            "data-status", "connected", timeout=180_000
        )
        (cluster,) = json.loads(lab.get("taskcell/api/clusters")[1])["clusters"]
        assert cluster["sources"] == ["server"]
        workers = sidebar.locator(".jp-taskcell-worker")
        expect(workers).to_have_count(1, timeout=60_000)

        sidebar.locator(".jp-taskcell-workers-input").fill("2")
        sidebar.locator(".jp-taskcell-scale-button").click()
        expect(workers).to_have_count(2, timeout=90_000)
        expect(sidebar.locator(".jp-taskcell-summary")).to_contain_text("2 workers")
        page.screenshot(path=str(ARTIFACTS / "e2e-sidebar-scaled.png"))

        # Fewer workers, or none: the user is asked first, and Cancel keeps them.
        sidebar.locator(".jp-taskcell-workers-input").fill("1")
        sidebar.locator(".jp-taskcell-scale-button").click()
        dialog = page.locator(".jp-Dialog")
        expect(dialog).to_contain_text("from 2 to 1 workers")
        dialog.locator("button", has_text="Cancel").click()
        expect(dialog).to_have_count(0)
        assert json.loads(lab.get(f"taskcell/api/clusters/{cluster['id']}")[1])["status"] == (
            "connected"
        )
        sidebar.locator(".jp-taskcell-stop").click()
        expect(dialog).to_contain_text("Stop the cluster at")
        dialog.locator("button", has_text="Stop").click()
        expect(sidebar.locator(".jp-taskcell-message-empty")).to_contain_text(
            "No cluster yet", timeout=60_000
        )
        assert json.loads(lab.get("taskcell/api/clusters")[1]) == {"clusters": []}
        assert workers.count() == 0


def test_a_cluster_started_in_the_sidebar_is_attached_to_the_notebook(tmp_path, lab):
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (apt-get install -y chromium)")
    from playwright.sync_api import expect

    # No %load_ext, no %task_cluster: Attach does both in the kernel.
    cell = "%%task\nimport os\nprint('scheduler', os.environ['DASK_SCHEDULER_ADDRESS'])"
    body = {
        "cells": [code_cell(cell)],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (tmp_path / "notebooks" / "attach.ipynb").write_text(json.dumps(body))
    with lab_page(lab, tmp_path / "chromium-profile", "attach.ipynb", "e2e-attach.png") as page:
        sidebar = open_sidebar(page)
        expect(page.get_by_text(re.compile(r"\(ipykernel\) \| Idle$"))).to_be_visible(
            timeout=60_000
        )
        sidebar.locator(".jp-taskcell-start").click()
        expect(sidebar.locator(".jp-taskcell-status")).to_have_attribute(
            "data-status", "connected", timeout=180_000
        )
        # Its worker up first: a %%task on a cluster with none is refused, not queued.
        expect(sidebar.locator(".jp-taskcell-worker")).to_have_count(1, timeout=60_000)
        (cluster,) = json.loads(lab.get("taskcell/api/clusters")[1])["clusters"]
        address = cluster["address"]
        selected = sidebar.locator(".jp-taskcell-cluster-select option:checked")
        expect(selected).to_have_text(f"started here · {address}")
        attach = sidebar.locator(".jp-taskcell-attach")
        expect(attach).to_be_enabled()
        expect(attach).to_have_text("Attach")

        # One click: the kernel runs %task_cluster, and the mark moves to this cluster.
        attach.click()
        expect(selected).to_have_text("attach.ipynb (this notebook)", timeout=60_000)
        expect(attach).to_be_disabled()
        expect(attach).to_have_text("Attached")
        expect(sidebar.locator(".jp-taskcell-notice")).to_be_hidden()
        (cluster,) = json.loads(lab.get("taskcell/api/clusters")[1])["clusters"]
        assert cluster["address"] == address
        assert cluster["sources"] == ["kernel", "server"]
        assert [n["path"] for n in cluster["notebooks"]] == ["attach.ipynb"]
        # Nothing of it in the notebook: the kernel ran it as the sidebar's own request.
        cells = page.locator(".jp-Notebook .jp-Cell.jp-CodeCell")
        expect(cells.nth(0).locator(".jp-OutputArea-output")).to_have_count(0)

        # The notebook's next %%task runs on that cluster, and the sidebar shows it end there.
        cells.nth(0).locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        output = cells.nth(0).locator(".jp-OutputArea")
        expect(output).to_contain_text(f"scheduler {address}", timeout=120_000)
        expect(output).to_contain_text("ran on tcp://")
        finished = sidebar.locator(".jp-taskcell-ended-task[data-state='finished']")
        expect(finished).to_have_count(1, timeout=30_000)
        expect(selected).to_have_text("attach.ipynb (this notebook)")
        page.screenshot(path=str(ARTIFACTS / "e2e-sidebar-attached.png"))


def test_a_kernels_embedded_cluster_scaled_and_stopped_from_the_sidebar(tmp_path, lab):
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (apt-get install -y chromium)")
    from playwright.sync_api import expect

    body = {
        "cells": [code_cell("%load_ext taskcell"), code_cell("%%task\nx = 1")],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (tmp_path / "notebooks" / "embedded.ipynb").write_text(json.dumps(body))
    with lab_page(lab, tmp_path / "chromium-profile", "embedded.ipynb", "e2e-embedded.png") as page:
        sidebar = open_sidebar(page)
        run_all_cells(page)  # the %%task cell starts the kernel's embedded cluster
        expect(sidebar.locator(".jp-taskcell-status")).to_have_attribute(
            "data-status", "connected", timeout=180_000
        )
        (cluster,) = json.loads(lab.get("taskcell/api/clusters")[1])["clusters"]
        assert cluster["sources"] == ["kernel"]
        workers = sidebar.locator(".jp-taskcell-worker")
        expect(workers).to_have_count(1, timeout=60_000)

        sidebar.locator(".jp-taskcell-workers-input").fill("2")
        sidebar.locator(".jp-taskcell-scale-button").click()
        expect(workers).to_have_count(2, timeout=120_000)
        expect(sidebar.locator(".jp-taskcell-worker[data-name='taskcell-1']")).to_have_count(1)
        page.screenshot(path=str(ARTIFACTS / "e2e-embedded-scaled.png"))

        # Fewer: the user is asked first; the newest worker retires.
        sidebar.locator(".jp-taskcell-workers-input").fill("1")
        sidebar.locator(".jp-taskcell-scale-button").click()
        dialog = page.locator(".jp-Dialog")
        expect(dialog).to_contain_text("from 2 to 1 workers")
        dialog.locator("button", has_text="Retire").click()
        expect(workers).to_have_count(1, timeout=120_000)
        expect(sidebar.locator(".jp-taskcell-worker[data-name='taskcell-0']")).to_have_count(1)

        # Stopped after asking: gone from the sidebar until the notebook's next %%task.
        sidebar.locator(".jp-taskcell-stop").click()
        expect(dialog).to_contain_text("Stop the cluster at")
        dialog.locator("button", has_text="Stop").click()
        expect(sidebar.locator(".jp-taskcell-message-empty")).to_contain_text(
            "No cluster yet", timeout=60_000
        )
        page.locator(".jp-Notebook .jp-Cell.jp-CodeCell").nth(1).locator(
            ".jp-InputArea-editor"
        ).click()
        page.keyboard.press("Shift+Enter")  # the cell again: a new embedded cluster
        expect(sidebar.locator(".jp-taskcell-status")).to_have_attribute(
            "data-status", "connected", timeout=180_000
        )
        (again,) = json.loads(lab.get("taskcell/api/clusters")[1])["clusters"]
        assert again["address"] != cluster["address"]
        expect(workers).to_have_count(1, timeout=60_000)
