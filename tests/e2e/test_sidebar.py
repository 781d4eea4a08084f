"""The Resources sidebar in a real browser: ``jupyter lab`` on 127.0.0.1, a real Dask scheduler
and a worker advertising ``GPU=2``, headless Chromium driven by Playwright.

A copy of the ``%%task`` demo notebook is opened, pointed at the cluster with
``%task_cluster``, and a ``%%task --gpu 1 --bg`` cell is run from the page; the sidebar, which
knew no cluster before, must show one of the worker's two GPUs in use, then none when the task
ends, in the words the notebook panel uses for the same snapshot; then the planner form's
suggestion is put atop the active cell. The task sleeps until the test, having seen it running,
writes a file (at most :data:`TASK_SECONDS`), so a slow machine cannot make it end unseen.
Screenshots of both moments are saved under ``test-artifacts/``.
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

from .browser import ARTIFACTS, CHROMIUM, REPO, lab_page

pytestmark = pytest.mark.slow

DEMO = REPO / "demo_notebooks" / "02-task-magic.ipynb"
TASK_SECONDS = 60


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


class Lab:
    """``jupyter lab`` in its own process, on 127.0.0.1, with throwaway config and state."""

    def __init__(self, root: Path, state: Path) -> None:
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
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

    def get(self, path: str) -> tuple[int, bytes]:
        request = urllib.request.Request(
            f"{self.url}/{path}", headers={"Authorization": f"token {self.token}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"jupyter lab exited:\n{self.log.read_text()}"
            try:
                if self.get("api/status")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"jupyter lab did not start:\n{self.log.read_text()}")

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
        page.keyboard.press("Shift+Enter")
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
        expect(selected).to_have_text(f"{name} ({gpu_cluster.address})")
        page.screenshot(path=str(ARTIFACTS / "e2e-sidebar-gpu-busy.png"))

        release.touch()
        expect(gpu).to_have_attribute("data-running", "0", timeout=15_000)
        expect(gpu.locator(".jp-taskcell-resource-label")).to_have_text("0 of 2 GPU in use")
        expect(sidebar.locator(".jp-taskcell-task-running")).to_have_count(0)
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

        # The planner: a size in, a preset out, its line put atop the active cell.
        sidebar.locator(".jp-taskcell-size").fill("1 GiB")
        sidebar.locator(".jp-taskcell-suggest").click()
        line = sidebar.locator(".jp-taskcell-task-line")
        expect(line).to_have_text(re.compile(r"^%%task small_task"))
        expect(sidebar.locator(".jp-taskcell-fit-count")).to_have_text(
            re.compile(r"^\d+ of 1 live workers can run it$")
        )
        sidebar.locator(".jp-taskcell-insert").click()
        active = page.locator(".jp-Notebook .jp-Cell.jp-mod-active .cm-content")
        expect(active).to_contain_text(line.inner_text() + "import numpy as np")
        page.screenshot(path=str(ARTIFACTS / "e2e-sidebar-planner.png"))
