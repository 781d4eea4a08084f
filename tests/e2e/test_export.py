""" "Export notebook to workflow module" in a real browser: ``jupyter lab`` on 127.0.0.1 and
headless Chromium driven by Playwright, as in :mod:`test_sidebar` (whose server helpers this
reuses).

A copy of the export demo notebook is opened and edited without saving; the command, run from
the palette, asks which target (Dask, Flyte or Latch; the last one chosen first), then must save
it, write ``04-export.py`` beside it with the edit, and open the module in an editor tab. The
notebook is retitled (the title is the module's docstring), again without saving; its toolbar
button must save and export again, and the module's tab show the new title, with no question
asked beyond the target (taskcell wrote the module it replaces); then the Flyte target, chosen
in the dialog, writes the Flyte module.

A hand-written ``04-export.py`` in the module's place is replaced only once the user says so in
the "Replace?" dialog; "Keep it", the default (Enter), leaves it byte for byte. Screenshots go
to ``test-artifacts/``.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from waiting import eventually

from taskcell.export import MARKER

from . import test_sidebar
from .browser import ARTIFACTS, CHROMIUM, REPO, lab_page, palette_search

# A whole walk through the lab starts kernels and clusters: more than the suite's 120 s on a
# loaded machine, so the hang guard is longer here; each step has its own wait.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

DEMO = REPO / "demo_notebooks" / "04-export.ipynb"
EDIT = 'edited_in = "the browser"'
TITLE = "# 04 · Export: a notebook becomes a workflow"
RETITLED_SUFFIX = ", twice"
RETITLED = TITLE + RETITLED_SUFFIX

lab = test_sidebar.lab  # the `jupyter lab` fixture, on tmp_path / "notebooks"


def wait_for_file(path: Path, contains: str) -> str:
    return eventually(
        lambda: path.read_text() if path.exists() else "",
        f"{path.name} containing {contains!r}",
        holds=lambda text: contains in text,
    )


def test_the_palette_command_and_the_toolbar_button_write_and_open_the_module(tmp_path, lab):
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (apt-get install -y chromium)")
    from playwright.sync_api import expect

    root = tmp_path / "notebooks"
    shutil.copy(DEMO, root / DEMO.name)
    module = root / "04-export.py"

    with lab_page(lab, tmp_path / "chromium-profile", DEMO.name, "e2e-export-failure.png") as page:
        button = page.locator(".jp-NotebookPanel-toolbar .jp-taskcell-export-button")
        expect(button, "the lab extension is not installed or not loaded").to_be_visible(
            timeout=45_000
        )

        # An edit the browser has not saved: the export must include it.
        # The notebook renders only the cells in view: edit one near the top.
        cell = page.locator(".jp-Notebook .jp-Cell.jp-CodeCell", has_text="import statistics")
        cell.locator(".cm-content").click()
        page.keyboard.press("Control+End")
        page.keyboard.type(f"\n{EDIT}")
        expect(page.locator(".jp-mod-dirty")).not_to_have_count(0)
        assert not module.exists()
        page.screenshot(path=str(ARTIFACTS / "e2e-export-notebook.png"))

        item = palette_search(page, "Export notebook to workflow")
        expect(item).to_have_count(1)
        expect(item.locator(".lm-CommandPalette-itemLabel")).to_have_text(
            "Export notebook to workflow module"
        )
        item.click()
        # It asks which target, the Dask module first; Enter takes it.
        choice = page.locator(".jp-Dialog .jp-taskcell-export-target select")
        expect(choice).to_have_value("dask", timeout=15_000)
        expect(choice.locator("option")).to_have_count(3)
        page.keyboard.press("Enter")

        text = wait_for_file(module, EDIT)
        compile(text, str(module), "exec")
        assert "def main(" in text
        tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="04-export.py")
        expect(tab).to_have_count(1, timeout=15_000)
        expect(tab).to_have_class(re.compile(r"\blm-mod-current\b"))
        editor = page.locator(".jp-FileEditor:visible .cm-content")
        expect(editor).to_contain_text("import", timeout=15_000)
        expect(page.get_by_text("Exported the workflow module 04-export.py")).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "e2e-export-palette.png"))

        # The toolbar button, after retitling the notebook in the browser (its title is the
        # module's docstring): saved, exported, and the module's tab reloaded.
        expect(editor).to_contain_text(TITLE)
        page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=DEMO.name).click()
        heading = page.locator(".jp-MarkdownCell").first
        heading.dblclick()
        heading.locator(".cm-content").click()
        page.keyboard.press("Control+Home")
        page.keyboard.press("End")
        page.keyboard.type(RETITLED_SUFFIX)
        expect(heading.locator(".cm-content")).to_contain_text(RETITLED)
        page.keyboard.press("Escape")
        button.click()
        expect(choice).to_have_value("dask", timeout=15_000)
        page.locator(".jp-Dialog .jp-Dialog-button", has_text="Export").click()
        wait_for_file(module, RETITLED)
        expect(tab).to_have_count(1)
        expect(tab).to_have_class(re.compile(r"\blm-mod-current\b"), timeout=15_000)
        expect(editor).to_contain_text(RETITLED)
        expect(page.locator(".jp-Dialog")).to_have_count(0)
        page.screenshot(path=str(ARTIFACTS / "e2e-export-toolbar.png"))

        # Another target, chosen in the dialog: the Flyte module in the same place.
        page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=DEMO.name).click()
        button.click()
        choice.select_option("flyte")
        page.locator(".jp-Dialog .jp-Dialog-button", has_text="Export").click()
        assert "import flyte" in wait_for_file(module, "flyte.TaskEnvironment")


HAND_WRITTEN = b"# my own workflow, written by hand\nprint('mine')\n"


def test_a_hand_written_module_is_replaced_only_once_the_user_says_so(tmp_path, lab):
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (apt-get install -y chromium)")
    from playwright.sync_api import expect

    root = tmp_path / "notebooks"
    shutil.copy(DEMO, root / DEMO.name)
    module = root / "04-export.py"
    module.write_bytes(HAND_WRITTEN)

    with lab_page(lab, tmp_path / "chromium-profile", DEMO.name, "e2e-replace-failure.png") as page:
        button = page.locator(".jp-NotebookPanel-toolbar .jp-taskcell-export-button")
        expect(button, "the lab extension is not installed or not loaded").to_be_visible(
            timeout=45_000
        )
        dialog = page.locator(".jp-Dialog")
        tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="04-export.py")

        button.click()
        dialog.locator(".jp-Dialog-button", has_text="Export").click()
        expect(dialog.locator(".jp-Dialog-header")).to_have_text("Replace?", timeout=15_000)
        expect(dialog).to_contain_text("04-export.py exists and was not written by taskcell")
        page.screenshot(path=str(ARTIFACTS / "e2e-export-replace.png"))
        page.keyboard.press("Enter")  # the default answer keeps the file
        expect(dialog).to_have_count(0)
        expect(tab).to_have_count(0)
        assert module.read_bytes() == HAND_WRITTEN

        button.click()
        dialog.locator(".jp-Dialog-button", has_text="Export").click()
        dialog.locator(".jp-Dialog-button", has_text="Replace").click()
        text = wait_for_file(module, MARKER)
        assert text.startswith(f"{MARKER}04-export.ipynb; ") and "def main(" in text
        expect(dialog).to_have_count(0)
        expect(tab).to_have_count(1, timeout=15_000)
        expect(page.get_by_text("Exported the workflow module 04-export.py")).to_be_visible()
        assert sorted(p.name for p in root.iterdir() if p.name.endswith(".py")) == [module.name]
