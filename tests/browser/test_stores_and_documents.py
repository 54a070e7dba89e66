"""Stores and documents in the console: create, drop, upload, a document's chunks, paging and filters."""

from __future__ import annotations

import base64
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.browser.conftest import MAX_DOCUMENT_BODY, READ_KEY, Console
from tests.doc_examples import ServedApp
from tests.files import pdf_bytes
from tests.legacy_rows import embedded_owner_dsn, rename_document


def test_an_admin_creates_a_store_and_drops_it_only_after_confirming(
    console: Console, api: httpx.Client
) -> None:
    page = console.page
    page.get_by_text("Create a store (admin keys)").click()
    page.get_by_label("Name", exact=True).fill("console-created")
    page.get_by_label("Display name").fill("Made in the console")
    page.get_by_label("Storage").select_option("halfvec")
    page.get_by_role("button", name="Create store").click()
    row = page.get_by_role("row").filter(has_text="console-created")
    expect(row).to_contain_text("halfvec (384)")
    expect(row).to_contain_text("Made in the console")
    assert api.get("/api/v1/stores/console-created").json()["storage"] == "halfvec"
    console.screenshot("stores")

    row.get_by_role("button", name="Drop console-created").click()
    page.get_by_role("dialog").get_by_role("button", name="Cancel").click()
    assert api.get("/api/v1/stores/console-created").status_code == 200

    row.get_by_role("button", name="Drop console-created").click()
    expect(page.get_by_role("dialog")).to_contain_text("cannot be undone")
    page.get_by_role("dialog").get_by_role("button", name="Drop store").click()
    expect(page.get_by_role("row").filter(has_text="console-created")).to_have_count(0)
    assert api.get("/api/v1/stores/console-created").status_code == 404


def test_a_read_only_key_sees_the_stores_and_is_told_why_it_cannot_drop_one(
    console: Console, api: httpx.Client
) -> None:
    console.sign_in(READ_KEY)
    page = console.page
    page.get_by_role("button", name="Drop sample").click()
    page.get_by_role("dialog").get_by_role("button", name="Drop store").click()
    expect(page.get_by_role("status")).to_contain_text("Could not drop sample")
    assert api.get("/api/v1/stores/sample").status_code == 200


def test_the_credential_lives_in_the_tab_only(console: Console) -> None:
    page = console.page
    stored = page.evaluate("() => [sessionStorage.length, localStorage.length, document.cookie]")
    assert stored == [1, 0, ""]
    other_tab = page.context.browser.new_context().new_page()  # type: ignore[union-attr]
    other_tab.goto(console.url)
    expect(other_tab.get_by_role("alert")).to_contain_text("Enter an API key or token above")
    other_tab.context.close()
    page.get_by_role("button", name="Forget").click()
    assert page.evaluate("() => sessionStorage.length") == 0
    expect(page.get_by_role("alert")).to_contain_text("unauthorized")


def _new_store(api: httpx.Client, name: str) -> None:
    api.delete(f"/api/v1/stores/{name}")
    assert api.put(f"/api/v1/stores/{name}", json={}).status_code == 201


def test_a_pdf_dropped_on_the_page_shows_each_chunk_with_its_page_number(
    console: Console, api: httpx.Client
) -> None:
    _new_store(api, "console-pdf")
    report = pdf_bytes(
        ["Revenue grew in the first quarter.", "Churn fell in the second quarter."], title="Q report"
    )
    page = console.page
    console.open("#/stores/console-pdf")
    # Dropped on the page, as a file dragged from the desktop arrives.
    dropped = page.evaluate_handle(
        """([name, encoded]) => {
            const files = new DataTransfer();
            const bytes = Uint8Array.from(atob(encoded), (c) => c.charCodeAt(0));
            files.items.add(new File([bytes], name, {type: "application/pdf"}));
            return files;
        }""",
        ["quarterly report.pdf", base64.b64encode(report).decode()],
    )
    page.locator(".dropzone").dispatch_event("drop", {"dataTransfer": dropped})
    log = page.locator(".upload-log li").first
    expect(log).to_contain_text("quarterly report.pdf: created")
    expect(log).to_contain_text("application/pdf")
    log.get_by_role("link", name="See its chunks").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Q report")
    second = page.locator(".chunk").filter(has_text="Churn fell in the second quarter.")
    expect(second.locator(".chunk-where")).to_contain_text("page 2")
    console.screenshot("document-chunks")


def test_a_file_over_the_http_limit_is_told_to_go_through_s3_or_the_cli(
    console: Console, api: httpx.Client, tmp_path: Any
) -> None:
    _new_store(api, "console-large")
    large = tmp_path / "large.txt"
    large.write_text("a line of text\n" * (MAX_DOCUMENT_BODY // 15))
    console.open("#/stores/console-large")
    console.page.locator("#upload-input").set_input_files(large)
    log = console.page.locator(".upload-log li").first
    expect(log).to_contain_text("Upload it to the documents S3 bucket, or with the CLI")
    expect(log).to_contain_text("retrieval ingest large.txt --store console-large")
    assert api.get("/api/v1/stores/console-large/documents").json()["documents"] == []


def test_documents_are_paged_filtered_by_prefix_and_deleted_after_confirming(
    console: Console, api: httpx.Client
) -> None:
    _new_store(api, "console-paging")
    for folder, count in (("guides", 27), ("notes", 3)):
        for i in range(count):
            body = {"text": f"{folder} document number {i}", "contentType": "text/plain"}
            assert api.put(f"/api/v1/stores/console-paging/documents/{folder}/{i:02}", json=body).is_success
    page = console.page
    console.open("#/stores/console-paging")
    documents = page.locator("tbody tr")
    expect(documents).to_have_count(25)
    page.get_by_role("button", name="Next page").click()
    expect(documents).to_have_count(5)
    expect(documents.first).to_contain_text("guides/25")
    page.get_by_role("button", name="Previous page").click()
    expect(documents).to_have_count(25)

    page.get_by_label("Document id starts with").fill("notes/")
    page.get_by_role("button", name="Filter").click()
    expect(documents).to_have_count(3)
    page.get_by_role("button", name="Delete notes/01").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete document").click()
    expect(documents).to_have_count(2)
    assert api.get("/api/v1/stores/console-paging/documents/notes/01").status_code == 404


def test_deleting_a_stored_id_that_climbs_deletes_that_document_and_no_other_store(
    console: Console, api: httpx.Client, served: ServedApp
) -> None:
    # A writer of `console-alpha` planted `../../console-bravo` before such ids were refused.
    _new_store(api, "console-alpha")
    _new_store(api, "console-bravo")
    assert api.put("/api/v1/stores/console-bravo/documents/plans", json={"text": "Bravo's plans."}).is_success
    for name in ("planted", "dot"):
        assert api.put(
            f"/api/v1/stores/console-alpha/documents/{name}", json={"text": f"A {name}."}
        ).is_success
    owner = embedded_owner_dsn(served.pgdata)
    rename_document(owner, "console-alpha", "planted", "../../console-bravo")
    rename_document(owner, "console-alpha", "dot", "..")
    page = console.page
    console.open("#/stores/console-alpha")
    documents = page.locator("tbody tr")
    expect(documents).to_have_count(2)
    # The store page names its pipeline's chunking.
    expect(page.get_by_text("fixed, 1,000 characters overlapping by 150 (the deployment's)")).to_be_visible()

    page.get_by_role("link", name="../../console-bravo").click()
    expect(page.get_by_role("heading", name="../../console-bravo")).to_be_visible()
    expect(page.locator("ol.chunks li")).to_have_count(1)
    console.open("#/stores/console-alpha")
    page.get_by_role("button", name="Delete ../../console-bravo").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete document").click()
    expect(documents).to_have_count(1)
    page.get_by_role("button", name="Delete ..", exact=True).click()
    page.get_by_role("dialog").get_by_role("button", name="Delete document").click()
    expect(documents).to_have_count(0)

    assert api.get("/api/v1/stores/console-alpha").json()["documentCount"] == 0
    assert api.get("/api/v1/stores/console-bravo").json()["documentCount"] == 1
