"""The search playground and the evaluation page on the sample store that `retrieval serve` loads."""

from __future__ import annotations

import json
from pathlib import Path

from playwright.sync_api import expect

from tests.browser.conftest import Console

# Sample-corpus documents each query is about (layers/.../documents/sample_corpus.jsonl).
JUDGED = {
    "q1": ("How does pod autoscaling decide the replica count?", "k8s-autoscaling"),
    "q2": ("readiness probe removes pod from endpoints", "k8s-probes"),
    "q3": ("point-in-time recovery of the database", "pg-backups"),
}


def test_the_playground_shows_dense_keyword_and_hybrid_side_by_side(console: Console) -> None:
    page = console.page
    console.open("#/search?store=sample")
    page.get_by_label("Question").fill("pod autoscaling replicas")
    page.get_by_role("button", name="Search", exact=True).click()

    dense = page.get_by_role("region", name="Dense results")
    keyword = page.get_by_role("region", name="Keyword results")
    hybrid = page.get_by_role("region", name="Hybrid results")
    for column in (dense, keyword, hybrid):
        expect(column.locator(".result").first).to_contain_text("k8s-autoscaling")
        expect(column.locator(".facts")).to_contain_text("search")
    expect(dense.locator(".scores").first).to_contain_text("similarity")
    expect(keyword.locator(".scores").first).to_contain_text("keyword")
    expect(keyword.locator(".scores").first).not_to_contain_text("similarity")
    expect(keyword.locator(".facts")).to_contain_text("embed 0.0 ms")
    expect(hybrid.locator(".scores").first).to_contain_text("fused")
    # The words PostgreSQL matched, highlighted where they stand in the text, as written there.
    first = keyword.locator(".result").first
    expect(first.locator("mark").first).to_be_visible()
    assert set(first.locator("mark").all_inner_texts()) >= {"replicas"}
    expect(first.locator(".muted")).to_contain_text("replicas")
    assert dense.locator("mark").count() == 0
    # The README's picture of the playground (docs/images/console-playground.png is a copy of this one),
    # without the status line's passing message.
    page.evaluate("() => { document.getElementById('status').textContent = ''; }")
    console.screenshot("playground", full_page=False)
    hybrid.locator("details.context summary").click()
    expect(hybrid.locator("details.context pre")).to_contain_text("[1] Source: Horizontal pod autoscaling")
    console.screenshot("search")

    page.get_by_role("button", name="Answer with the hybrid results").click()
    answer = page.locator("section.answer")
    expect(answer.locator(".answer-text")).not_to_be_empty()
    expect(answer).to_contain_text("grounded")


def test_an_evaluation_charts_quality_per_method_with_wins_and_losses(
    console: Console, tmp_path: Path
) -> None:
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        "".join(json.dumps({"_id": q, "text": text}) + "\n" for q, (text, _) in JUDGED.items())
    )
    qrels = tmp_path / "test.tsv"
    qrels.write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{doc}\t1\n" for q, (_, doc) in JUDGED.items())
    )
    page = console.page
    console.open("#/evaluate?store=sample")
    page.get_by_label("Queries", exact=True).set_input_files(queries)
    page.get_by_label("Judgments").set_input_files(qrels)
    page.get_by_role("button", name="Evaluate").click()

    expect(page.get_by_text("3 queries scored")).to_be_visible()
    chart = page.get_by_role("img", name="nDCG@10 and recall@10 per method")
    expect(chart.locator("rect")).to_have_count(6)
    table = page.get_by_role("table", name="nDCG@10 and recall@10 per method")
    expect(table.locator("tbody tr")).to_have_count(3)
    for method in ("Dense", "Keyword", "Hybrid"):
        expect(table).to_contain_text(method)
    expect(page.get_by_role("region", name="Wins and losses per query")).to_contain_text("beats")
    console.screenshot("evaluate")
