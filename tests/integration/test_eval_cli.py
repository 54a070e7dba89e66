"""`retrieval eval` against a store loaded in the real database, with the local model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from retrieval_core.cli.main import main
from retrieval_core.evaluation.runner import DEFAULT_METHODS, MethodSpec, Query, service_method
from retrieval_core.grants import OPEN_GRANT
from retrieval_core.schemas.retrieve import RetrieveRequest
from tests.writing import TextDocument, ensure_store, write_documents

STORE = "eval-tiny"
DOCUMENTS = {
    "volcano": "Volcanoes erupt when magma rises through the crust and lava flows down the slopes.",
    "bread": "Bread dough rises because yeast ferments sugar and releases carbon dioxide while baking.",
    "chess": "In chess, castling moves the king two squares towards a rook, which jumps over it.",
    "tides": "Ocean tides follow the gravitational pull of the moon and, less strongly, of the sun.",
}
QUERIES = {
    "q1": "why does lava flow out of a volcano",
    "q2": "how does yeast make bread dough rise",
    "q3": "what causes ocean tides",
    "q4": "a query nobody judged",
}
QRELS = "query-id\tcorpus-id\tscore\nq1\tvolcano\t1\nq2\tbread\t2\nq3\ttides\t1\nq3\tchess\t0\n"


@pytest.fixture(scope="module")
def tiny_store(service: Any) -> str:
    store = ensure_store(service, STORE)
    documents = [TextDocument(doc_id, text) for doc_id, text in DOCUMENTS.items()]
    write_documents(service, store, documents, 1000, 0)
    return STORE


@pytest.fixture()
def files(tmp_path: Path) -> tuple[Path, Path]:
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items()))
    qrels = tmp_path / "test.tsv"
    qrels.write_text(QRELS)
    return queries, qrels


def rows_of(table: str) -> dict[str, list[str]]:
    """Method name -> the other cells of its row."""
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0] not in ("method",) and not cells[0].startswith("---"):
            rows[cells[0]] = cells[1:]
    return rows


def test_eval_prints_every_method_and_a_perfect_ranking_scores_one(
    tiny_store: str, files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    queries, qrels = files
    code = main(
        [
            "eval",
            "--store",
            tiny_store,
            "--queries",
            str(queries),
            "--qrels",
            str(qrels),
            "--no-progress",
            "--method",
            'rrf again={"engineName": "naive", "useHybrid": true, "fusion": "rrf"}',
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "4 documents in 4 chunks" in out
    assert "3 judged queries; 1 queries without a relevant judgment left out" in out
    rows = rows_of(out)
    expected = {"dense, exact (numpy)", *(spec.name for spec in DEFAULT_METHODS), "rrf again"}
    assert set(rows) == expected
    # Each query names its topic: dense search puts the judged document first for every one.
    ndcg, recall, _p50, delta, _how = rows["dense (HNSW)"]
    assert (ndcg, recall, delta) == ("1.000", "1.000", "—")
    assert rows["dense, exact (numpy)"][:2] == ["1.000", "1.000"]
    assert rows["dense, exact (numpy)"][3] == "+0.000 [+0.000, +0.000]"


def test_eval_refuses_options_a_retrieve_request_refuses(
    tiny_store: str, files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    queries, qrels = files
    args = ["eval", "--store", tiny_store, "--queries", str(queries), "--qrels", str(qrels)]
    assert main([*args, "--method", 'bad={"fusion": "nope"}']) == 2
    assert "error: fusion" in capsys.readouterr().err
    assert main([*args, "--method", "no options"]) == 2
    assert "NAME=" in capsys.readouterr().err


def test_depth_goes_past_the_api_cap_which_stays_100(service: Any) -> None:
    store = ensure_store(service, "eval-deep")
    documents = [TextDocument(f"d{i:03}", f"note number {i} about rivers and lakes") for i in range(110)]
    write_documents(service, store, documents, 1000, 0)
    request = RetrieveRequest(query="rivers", grade=0.0, store="eval-deep", engine_name="naive")
    response, _ = service.retrieve(request, grant=OPEN_GRANT, depth=110)
    assert len(response.results) == 110
    with pytest.raises(ValidationError, match=r"similarity_top_k|similarityTopK"):
        RetrieveRequest.model_validate({"query": "rivers", "grade": 0.0, "similarityTopK": 101})


def test_every_method_is_scored_on_its_first_depth_chunks(service: Any, tiny_store: str) -> None:
    # The vector points at the volcano, the words at chess: a naive hybrid answer holds both lists.
    [volcano] = service.embedder.embed([DOCUMENTS["volcano"]], "query")
    query = Query("q", "castling rook king", volcano)
    options = {"engineName": "naive", "useHybrid": True, "fusion": "rrf"}
    request = RetrieveRequest.model_validate({**options, "query": query.text, "grade": 0.0, "store": STORE})
    response, _ = service.retrieve(request, lambda _: volcano, grant=OPEN_GRANT, depth=1)
    assert {r.metadata["documentId"] for r in response.results} == {"volcano", "chess"}
    assert service_method(service, STORE, MethodSpec("rrf", options), depth=1).rank(query) in (
        ["volcano"],
        ["chess"],
    )
