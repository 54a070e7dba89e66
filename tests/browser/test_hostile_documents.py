"""A document's text and metadata are shown as the characters they are: markup in them never runs."""

from __future__ import annotations

import httpx
from playwright.sync_api import expect

from tests.browser.conftest import Console

SCRIPT = "<script>window.__ran = 'script'</script>"
IMAGE = "<img src=x onerror=\"window.__ran = 'onerror'\">"
HOSTILE_TEXT = (
    f"Quarantine procedure for the lab. {SCRIPT} {IMAGE} Wash hands before leaving the quarantine room."
)


def test_markup_in_a_documents_text_title_and_metadata_shows_as_text_and_never_runs(
    console: Console, api: httpx.Client
) -> None:
    api.delete("/api/v1/stores/console-hostile")
    assert api.put("/api/v1/stores/console-hostile", json={}).status_code == 201
    body = {
        "text": HOSTILE_TEXT,
        "contentType": "text/plain",
        "metadata": {"title": IMAGE, "note": SCRIPT, "link": "javascript:window.__ran='link'"},
    }
    assert api.put("/api/v1/stores/console-hostile/documents/lab<b>notes</b>", json=body).is_success
    page = console.page

    console.open("#/stores/console-hostile")
    expect(page.get_by_role("link", name="lab<b>notes</b>")).to_be_visible()
    expect(page.locator("tbody")).to_contain_text(IMAGE)

    page.get_by_role("link", name="lab<b>notes</b>").click()
    expect(page.locator(".chunk-text").first).to_contain_text(SCRIPT)
    page.locator("details.metadata summary").first.click()
    expect(page.locator("details.metadata pre").first).to_contain_text("window.__ran = 'script'")

    console.open("#/search?store=console-hostile")
    page.get_by_label("Question").fill("quarantine procedure")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.locator(".result").first).to_contain_text(IMAGE)
    console.screenshot("hostile-search")

    assert page.evaluate("() => window.__ran") is None
    # Nothing of the document became an element: no image, script or bold text in the page.
    assert page.locator("main img, main script, main b").count() == 0
    assert console.dialogs == []


def test_every_console_answer_forbids_scripts_from_anywhere_but_the_service(console_url: str) -> None:
    for path in ("", "/app.js", "/console.css", "/config.json"):
        answer = httpx.get(console_url + path, trust_env=False)
        assert answer.status_code == 200
        assert answer.headers["content-security-policy"].startswith("default-src 'self'")
        assert answer.headers["x-content-type-options"] == "nosniff"
    # Only the console's own files, by name: nothing beside or above its folder.
    for outside in ("/__init__.py", "/..%2F__init__.py", "/..%2F..%2Fsettings%2F__init__.py"):
        assert httpx.get(console_url + outside, trust_env=False).status_code == 404, outside
