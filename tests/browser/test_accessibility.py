"""Every page of the console: no serious accessibility violation (axe-core), readable at 1280 and 390
pixels wide, and usable from the keyboard alone."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import Console


def _search(page: Page) -> None:
    page.get_by_label("Question").fill("pod autoscaling")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.locator(".result").first).to_be_visible()


PAGES: dict[str, tuple[str, Callable[[Page], None] | None]] = {
    "stores": ("#/stores", None),
    "store": ("#/stores/sample", None),
    "document": ("#/stores/sample/documents/k8s-autoscaling", None),
    "search": ("#/search?store=sample", _search),
    "evaluate": ("#/evaluate?store=sample", None),
}


@pytest.mark.parametrize("name", PAGES)
def test_each_page_has_no_serious_accessibility_violation_and_fits_the_width(
    browser: Browser, console_url: str, viewport: dict[str, int], name: str
) -> None:
    context = browser.new_context(viewport=viewport)
    console = Console(context.new_page(), console_url)
    try:
        console.sign_in()
        path, act = PAGES[name]
        console.open(path)
        console.page.get_by_role("heading", level=1).wait_for()
        if act:
            act(console.page)
        violations = console.axe_violations()
        assert violations == [], violations
        # The page never scrolls sideways: wide tables scroll within their own box.
        overflow = console.page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{name} is {overflow} px wider than {viewport['width']} px"
        console.screenshot(name)
        assert console.errors == []
    finally:
        context.close()


def test_the_console_is_usable_from_the_keyboard(browser: Browser, console_url: str) -> None:
    context = browser.new_context()
    page = context.new_page()
    try:
        page.goto(console_url)
        page.keyboard.press("Tab")
        expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
        # The credential, by keyboard: Tab to the key field, type, Enter submits.
        page.get_by_role("link", name="Evaluate").focus()
        page.keyboard.press("Tab")
        page.keyboard.press("Tab")
        expect(page.get_by_placeholder("API key or token")).to_be_focused()
        page.keyboard.type("rk_client_tests_admin")
        page.keyboard.press("Enter")
        expect(page.get_by_text("Key set for this tab")).to_be_visible()

        page.get_by_role("link", name="Search").focus()
        page.keyboard.press("Enter")
        expect(page.get_by_role("heading", level=1)).to_have_text("Search playground")
        expect(page.get_by_label("Question")).to_be_focused()
        page.keyboard.type("pod autoscaling")
        page.get_by_role("button", name="Search", exact=True).focus()
        page.keyboard.press("Enter")
        expect(page.locator(".result").first).to_be_visible()

        # The upload's file chooser is a keyboard-reachable control.
        # Loaded afresh: right after the in-page navigation from the search, the chooser opened by Enter
        # was not reported to Playwright in some runs here.
        page.goto(f"{console_url}#/stores/sample")
        page.reload()
        expect(page.locator("tbody tr").first).to_be_visible()
        chooser = page.get_by_role("button", name="Choose files")
        chooser.focus()
        with page.expect_file_chooser() as chosen:
            page.keyboard.press("Enter")
        assert chosen.value.is_multiple()
    finally:
        context.close()
