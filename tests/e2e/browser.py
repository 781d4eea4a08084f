"""Headless Chromium on a JupyterLab page, for the browser tests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextlib.contextmanager
def lab_page(lab: Any, profile: Path, path: str, failure_shot: str) -> Iterator[Any]:
    """A Playwright page on ``path`` in ``lab``. A failing check inside leaves a screenshot
    named ``failure_shot`` and the lab log in the error; page errors fail the test too."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    errors: list[str] = []
    console: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1400, "height": 900},
        )
        page = browser.pages[0] if browser.pages else browser.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on(
            "console",
            lambda m: console.append(m.text[:500]) if m.type == "error" else None,
        )
        try:
            page.goto(f"{lab.url}/lab/tree/{path}?token={lab.token}")
            yield page
        except (AssertionError, PlaywrightTimeoutError) as e:
            page.screenshot(path=str(ARTIFACTS / failure_shot))
            log = lab.log.read_text()[-3000:]
            raise AssertionError(
                f"{e}\npage errors: {errors}\nconsole errors: {console[-10:]}\n"
                f"--- jupyter lab log ---\n{log}"
            ) from None
        finally:
            browser.close()
    assert not errors, errors


def palette_search(page: Any, text: str) -> Any:
    """Open the command palette from the View menu, as a user does, and type ``text``; the
    palette's items. Opened once the kernel is idle: a notebook taking focus as its kernel
    connects closes a palette opened before."""
    import re

    from playwright.sync_api import expect

    expect(page.get_by_text(re.compile(r"\(ipykernel\) \| Idle$"))).to_be_visible(timeout=60_000)
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^View$")).click()
    page.locator(".lm-Menu-itemLabel", has_text="Activate Command Palette").click()
    palette = page.locator("#modal-command-palette")
    palette.locator(".lm-CommandPalette-input").fill(text)
    return palette.locator(".lm-CommandPalette-item")
