"""Headless Chromium for the UI tests: Debian's ``chromium`` driven by Playwright (downloaded browser builds
do not run here), and Airflow's login form."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"
SCREENSHOTS = Path(__file__).resolve().parents[2] / ".test-reports" / "screenshots"
needs_chromium = pytest.mark.skipif(
    not os.access(CHROMIUM, os.X_OK), reason=f"needs Debian's chromium at {CHROMIUM} (.ci/run installs it)"
)


@contextmanager
def chromium() -> Iterator[Browser]:
    sandbox = ["--no-sandbox"] if os.geteuid() == 0 else []  # Chromium's sandbox refuses to run as root
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=sandbox)
        try:
            yield browser
        finally:
            browser.close()


def log_in(browser: Browser, url: str, passwords_file: Path) -> Page:
    """The simple auth manager's login form, as a person fills it in; its cookie then authenticates the UI
    and the plugin's iframes. Returns the logged-in page (a context of its own)."""
    user, password = next(iter(json.loads(passwords_file.read_text()).items()))
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.goto(f"{url}/")
    page.wait_for_url(re.compile(r"/auth/login"))
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda u: "/auth/login" not in u)
    assert any(c["name"] == "_token" for c in page.context.cookies()), page.context.cookies()
    return page


def screenshot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
