"""The console in a real browser: headless Chromium from Debian's packages, driven by Playwright, against
`retrieval serve` (docs/console.md). These run only under `make check-browser`, which installs Chromium
and axe-core and names the browser in CHROMIUM; without it, as in `make test`'s plain `pytest`, this
folder's tests are not collected."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.client_server import api_keys_setting
from tests.doc_examples import ServedApp, served_app

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

collect_ignore_glob = [] if os.environ.get("CHROMIUM") else ["test_*.py"]

ADMIN_KEY = "rk_client_tests_admin"
READ_KEY = "rk_client_tests_read"
# Small enough that a test file goes over it; the 413's advice is what a user of the console meets.
MAX_DOCUMENT_BODY = 300_000
SCREENSHOTS = Path(__file__).resolve().parents[2] / ".data" / "console-screenshots"
AXE = Path(__file__).resolve().parent / "node_modules" / "axe-core" / "axe.min.js"
# As root with no display and a closed network: no sandbox (root), no GPU, and none of Chromium's own
# connections to Google's services, which this machine's network refuses.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="session")
def served() -> Iterator[ServedApp]:
    """`retrieval serve` with an admin and a read-only key, its sample store loaded."""
    env = {"API_KEYS": api_keys_setting(), "DOCUMENTS_MAX_BODY_BYTES": str(MAX_DOCUMENT_BODY)}
    with served_app(env) as app:
        yield app


@pytest.fixture(scope="session")
def console_url(served: ServedApp) -> str:
    """The console's URL."""
    return f"http://{served.address}/console"


@pytest.fixture(scope="session")
def api(console_url: str) -> Iterator[httpx.Client]:
    """The HTTP API with the admin key, for setting up what a test then looks at in the browser."""
    base = console_url.removesuffix("/console")
    with httpx.Client(base_url=base, headers={"x-api-key": ADMIN_KEY}, trust_env=False, timeout=60) as client:
        yield client


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=os.environ["CHROMIUM"], args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class Console:
    """A tab on the console with what a test watches: script errors, dialogs and console messages."""

    def __init__(self, page: Page, url: str) -> None:
        self.page = page
        self.url = url
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on("dialog", self._dialog)

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def open(self, hash_path: str = "#/stores") -> None:
        self.page.goto(f"{self.url}{hash_path}")

    def sign_in(self, key: str = ADMIN_KEY) -> None:
        self.open()
        self.page.get_by_placeholder("API key or token").fill(key)
        self.page.get_by_role("button", name="Use", exact=True).click()
        self.page.get_by_text("Key set for this tab").wait_for()

    def screenshot(self, name: str, full_page: bool = True) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        width = self.page.viewport_size["width"] if self.page.viewport_size else 0
        self.page.screenshot(path=SCREENSHOTS / f"{name}-{width}.png", full_page=full_page)

    def axe_violations(self) -> list[dict[str, Any]]:
        """axe-core's serious and critical violations on the page as it is now (WCAG 2.1 A and AA)."""
        # Evaluated through the DevTools protocol, which the page's Content-Security-Policy does not govern.
        self.page.evaluate(AXE.read_text())
        found: list[dict[str, Any]] = self.page.evaluate(
            "async () => (await axe.run(document, {runOnly: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}))"
            ".violations.map(v => ({id: v.id, impact: v.impact, help: v.help,"
            " nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 5)}))"
        )
        return [violation for violation in found if violation["impact"] in ("serious", "critical")]


@pytest.fixture(params=[DESKTOP, PHONE], ids=["1280", "390"])
def viewport(request: pytest.FixtureRequest) -> dict[str, int]:
    return dict(request.param)


@pytest.fixture
def console(browser: Browser, console_url: str) -> Iterator[Console]:
    """A fresh tab (its own sessionStorage) at desktop width, signed in with the admin key."""
    context = browser.new_context(viewport=DESKTOP)
    tab = Console(context.new_page(), console_url)
    tab.sign_in()
    yield tab
    context.close()
    assert not tab.errors, f"script errors on the page: {tab.errors}"
