"""BM25 keyword search on the embedded PostgreSQL: the scores, every write path, the text
search configuration of a store, websearch syntax, and the backfill of chunks older than migration 7.

Most tests write chunks with db/'s `replace_documents` and `delete_documents` themselves: their subject
is the keyword index those functions keep (weights, document frequencies, bounds), written exactly."""

from __future__ import annotations

import math
import random
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.keyword_exactness import FULL_RANKING
from retrieval_core.cli.main import main
from retrieval_core.clients.retry import Deadline
from retrieval_core.db import keyword_sql
from retrieval_core.db.documents import ChunkRow, DocumentRow, delete_documents, replace_documents
from retrieval_core.db.keywords import backfill_keywords
from retrieval_core.db.migrations.runner import run_migrations
from retrieval_core.db.migrations.steps import MIGRATIONS
from retrieval_core.db.stores import ROW_COLUMNS, create_store, drop_store, find_store, store_from_row
from retrieval_core.filters.predicate import TRUE
from retrieval_core.filters.sql import document_ids_in
from retrieval_core.grants import OPEN_GRANT

STORES = "/api/v1/stores"
DIM = 4
K1, B = 1.2, 0.75


def bm25(
    query: list[str], document: list[str], corpus: list[list[str]], average: float | None = None
) -> float:
    """Okapi BM25 of `document` for `query`, written from the formula (tokens already normalised).

    `average`: the average document length, if not the corpus's.
    """
    n = len(corpus)
    average = average or sum(map(len, corpus)) / n
    score = 0.0
    for term in set(query):
        df = sum(term in d for d in corpus)
        tf = document.count(term)
        if tf == 0:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        score += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(document) / average))
    return score


def hits(service: Any, store_name: str, query: str, limit: int = 10, where: Any = TRUE) -> dict[str, float]:
    """document id -> keyword score of its best chunk, through the service's keyword SQL."""
    with service.database.connection() as conn, conn.transaction():
        store = find_store(conn, store_name)
        assert store is not None
        found = keyword_sql.keyword_chunks(conn, store, query, limit, where)
    best: dict[str, float] = {}
    for document_id, _, score in found:
        best.setdefault(document_id, score)
    return best


def assert_consistent(service: Any, store_name: str) -> None:
    """The kept counts equal a recount: chunks, lengths, and every lexeme's document frequency."""
    with service.database.connection() as conn:
        store = find_store(conn, store_name)
        assert store is not None
        kept = conn.execute(
            "SELECT chunk_count, keyword_chunk_count, keyword_length_sum FROM stores WHERE id = %s",
            (store.id,),
        ).fetchone()
        counted = conn.execute(
            "SELECT (SELECT count(*) FROM chunks WHERE store_id = %(s)s), count(*), coalesce(sum(length), 0)"
            " FROM keyword_chunks WHERE store_id = %(s)s",
            {"s": store.id},
        ).fetchone()
        wrong_df = conn.execute(
            """SELECT count(*) FROM keyword_terms t FULL JOIN (
                   SELECT u.lexeme, count(*) AS df FROM keyword_chunks k, unnest(k.tsv) AS u
                   WHERE k.store_id = %(s)s GROUP BY 1) AS r USING (lexeme)
               WHERE (t.store_id = %(s)s OR t.store_id IS NULL) AND coalesce(t.df, 0) <> coalesce(r.df, 0)""",
            {"s": store.id},
        ).fetchone()
        # Each lexeme's kept largest weight (migration 11) bounds the weights stored for it: the search
        # prunes with it. Stored weights are float4, kept ones float8: compared with that tolerance.
        unbounded = conn.execute(
            f"""SELECT count(*) FROM keyword_terms t JOIN ({STORED_MAX_WEIGHTS}) AS m USING (store_id, lexeme)
                WHERE t.store_id = %(s)s AND t.max_weight < m.weight * (1 - 1e-6)""",
            {"s": store.id},
        ).fetchone()
    assert kept == counted
    assert wrong_df == (0,)
    assert unbounded == (0,)


# The largest weight stored per store and lexeme, read back from the chunks' sparse vectors.
STORED_MAX_WEIGHTS = """
    SELECT k.store_id, l.lexeme, max(split_part(e, ':', 2)::float8) AS weight
    FROM keyword_chunks k,
        unnest(string_to_array(trim(both '{}' from split_part(k.weights::text, '/', 1)), ',')) AS e,
        unnest(tsvector_to_array(k.tsv)) AS l (lexeme)
    WHERE keyword_dimension(l.lexeme) = split_part(e, ':', 1)::integer
    GROUP BY 1, 2"""


def fresh_store(conn: Any, text_search: str = "english") -> Any:
    name = f"kw-{uuid.uuid4().hex[:8]}"
    return create_store(conn, name, name, "synthetic", DIM, text_search=text_search)


def document(doc_id: str, *texts: str) -> DocumentRow:
    chunks = [ChunkRow(doc_id, i, text, {}, [1.0, float(i), 0.5, 0.25]) for i, text in enumerate(texts)]
    return DocumentRow(doc_id, "", {}, "-", chunks)


CORPUS = {
    "a": "apple banana apple",
    "b": "banana cherry",
    "c": "cherry cherry cherry date elderberry fig",
    "d": "grape",
}


def test_bm25_scores_match_the_formula(service: Any) -> None:
    with service.database.connection() as conn:
        store = fresh_store(conn, "simple")  # no stemming, no stopwords: tokens are the words
        replace_documents(conn, store, [document(k, v) for k, v in CORPUS.items()])
    tokens = {k: v.split() for k, v in CORPUS.items()}
    corpus = list(tokens.values())
    for query in ("apple cherry", "banana", "cherry date grape", "fig"):
        expected = {
            k: bm25(query.split(), d, corpus) for k, d in tokens.items() if set(query.split()) & set(d)
        }
        got = hits(service, store.name, query)
        assert got.keys() == expected.keys()
        for k, score in expected.items():
            assert got[k] == pytest.approx(score, rel=1e-5), (query, k)
        assert list(got) == sorted(expected, key=lambda k: -expected[k])  # best first
    assert hits(service, store.name, "kiwi") == {}
    assert_consistent(service, store.name)


def test_the_candidate_pruning_keeps_the_exact_top_k(service: Any) -> None:
    # 60 chunks share common words; a few hold rarer ones. With limit 3 the threshold prunes the common
    # words from the candidate search; the top 3 must still be the formula's.
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa"]
    texts = {}
    for i in range(60):
        chosen = rng.choices(words[:4], k=rng.randint(2, 9)) + rng.choices(words[4:], k=rng.randint(0, 2))
        texts[f"doc{i:02d}"] = " ".join(chosen)
    with service.database.connection() as conn:
        store = fresh_store(conn, "simple")
        replace_documents(conn, store, [document(k, v) for k, v in texts.items()])
    corpus = [v.split() for v in texts.values()]
    for query in ("alpha beta omega", "gamma kappa", "alpha beta gamma delta sigma"):
        expected = {k: bm25(query.split(), v.split(), corpus) for k, v in texts.items()}
        best = sorted((k for k in expected if expected[k] > 0), key=lambda k: (-expected[k], k))[:3]
        got = hits(service, store.name, query, limit=3)
        assert list(got) == best, query
        for k in best:
            assert got[k] == pytest.approx(expected[k], rel=1e-5)


def test_the_stores_function_ranks_exactly_as_the_inline_statement(service: Any) -> None:
    # Unfiltered searches run the store's function (migration 9), filtered ones the inline statement:
    # a filter every chunk passes must give the same rows, scores and order, and a selective filter the
    # unfiltered ranking restricted to the chunks it passes.
    rng = random.Random(8)
    words = ["river", "stone", "rivers", "stony", "bridge", "mill", "ford", "weir", "lock", "quay"]
    texts = {f"doc{i:02d}": " ".join(rng.choices(words, k=rng.randint(1, 12))) for i in range(80)}
    with service.database.connection() as conn:
        store = fresh_store(conn)  # english: stems, so "rivers" and "river" share a lexeme
        replace_documents(conn, store, [document(k, v, "weir " + v) for k, v in texts.items()])
        function = "keyword_hits("
        assert function in keyword_sql.keyword_chunks_query(store, TRUE).as_string(conn)
        every = document_ids_in(list(texts))
        assert function not in keyword_sql.keyword_chunks_query(store, every).as_string(conn)
    some = sorted(texts)[::3]
    queries = ("river stone", "stony rivers", '"river stone"', "bridge -ford", "weir", "lock quay", "kiwi")
    for query in queries:
        for limit in (3, 10):
            with service.database.connection() as conn, conn.transaction():
                stored = keyword_sql.keyword_chunks(conn, store, query, limit, TRUE)
                inline = keyword_sql.keyword_chunks(conn, store, query, limit, every)
                assert stored == inline, (query, limit)
                assert stored or query == "kiwi"
                everything = keyword_sql.keyword_chunks(conn, store, query, 1000, TRUE)
                filtered = keyword_sql.keyword_chunks(conn, store, query, 1000, document_ids_in(some))
            assert filtered == [row for row in everything if row[0] in some], query


def test_stores_sharing_the_keyword_index_see_only_their_own_chunks_and_statistics(service: Any) -> None:
    # Two stores of the same words in one shared index: each search finds its own chunks only, scored
    # with its own document frequencies (BM25 from the formula over that store's corpus alone).
    texts = {"a": "river stone bridge", "b": "river weir", "c": "stone quay"}
    other = {"x": "river river stone", "y": "bridge bridge", "z": "river", "w": "river weir"}
    with service.database.connection() as conn:
        first, second = fresh_store(conn, "simple"), fresh_store(conn, "simple")
        replace_documents(conn, first, [document(k, v) for k, v in texts.items()])
        replace_documents(conn, second, [document(k, v) for k, v in other.items()])
    corpus = [t.split() for t in texts.values()]
    for where in (TRUE, document_ids_in([*texts, *other])):
        with service.database.connection() as conn, conn.transaction():
            hits = keyword_sql.keyword_chunks(conn, first, "river stone", 10, where)
        assert {h[0] for h in hits} == {"a", "b", "c"}
        for document_id, _, score in hits:
            expected = bm25(["river", "stone"], texts[document_id].split(), corpus)
            assert score == pytest.approx(expected, rel=1e-5), document_id


def test_the_pruned_top_k_is_the_top_k_of_the_full_ranking(service: Any) -> None:
    # Chunks of a few words repeated: term weights come near their bound, so the best chunks score close
    # to the sum of their lexemes' bounds, and the threshold prunes heads and pairs of lexemes hard. With
    # a limit above the number of matches nothing is pruned (fewer seeds than the limit), so that
    # ranking is the reference, computed by the same arithmetic: every top k, filtered or not, must be
    # its first k.
    rng = random.Random(18)
    vocabulary = [f"w{i:02d}" for i in range(15)]
    zipf = [1 / (i + 1) for i in range(15)]
    texts = {}
    for i in range(300):
        words = [
            w
            for w in set(rng.choices(vocabulary, zipf, k=rng.randint(2, 7)))
            for _ in range(rng.randint(3, 9))
        ]
        texts[f"doc{i:03d}"] = " ".join(rng.sample(words, len(words)))
    with service.database.connection() as conn:
        store = fresh_store(conn, "simple")
        replace_documents(conn, store, [document(k, v) for k, v in texts.items()])
    some = sorted(texts)[::4]
    for _ in range(12):
        query = " ".join(rng.sample(vocabulary, rng.randint(3, 9)))
        everything = list(hits_in_order(service, store.name, query, 1000, TRUE))
        assert len(everything) > 50
        for limit in (1, 3, 10):
            assert hits_in_order(service, store.name, query, limit, TRUE) == everything[:limit], (
                query,
                limit,
            )
            wanted = [row for row in everything if row[0] in some][:limit]
            assert hits_in_order(service, store.name, query, limit, document_ids_in(some)) == wanted


def hits_in_order(
    service: Any, store_name: str, query: str, limit: int, where: Any
) -> list[tuple[str, int, float]]:
    with service.database.connection() as conn, conn.transaction():
        store = find_store(conn, store_name)
        assert store is not None
        return keyword_sql.keyword_chunks(conn, store, query, limit, where)


def test_hybrid_search_reports_the_bm25_score(service: Any) -> None:
    with service.database.connection() as conn:
        store = fresh_store(conn, "simple")
        replace_documents(conn, store, [document(k, v) for k, v in CORPUS.items()])
    vector = [1.0, 0.0, 0.5, 0.25]
    _, found = service.search_chunks(store.name, vector, 10, grant=OPEN_GRANT, query_text="cherry")
    scores = {c.document_id: c.keyword_score for c in found}
    corpus = [v.split() for v in CORPUS.values()]
    assert scores["b"] == pytest.approx(bm25(["cherry"], CORPUS["b"].split(), corpus), rel=1e-5)
    assert scores["c"] == pytest.approx(bm25(["cherry"], CORPUS["c"].split(), corpus), rel=1e-5)
    assert scores["a"] is None and scores["d"] is None  # vector hits the keyword query does not match


def test_replacements_deletes_and_drops_keep_scores_and_counts_current(service: Any) -> None:
    with service.database.connection() as conn:
        store = fresh_store(conn, "simple")
        other = fresh_store(conn, "simple")
        replace_documents(conn, store, [document(k, v) for k, v in CORPUS.items()])
        replace_documents(conn, other, [document("z", "cherry cherry")])
        assert set(hits(service, store.name, "cherry")) == {"b", "c"}

        replace_documents(conn, store, [document("b", "banana split", "kiwi")])  # replaced
        assert set(hits(service, store.name, "cherry")) == {"c"}
        assert set(hits(service, store.name, "kiwi")) == {"b"}
        # N and df moved with it: the single cherry chunk now has df 1 of 5 chunks. Its term weights
        # keep the average length of their write (12 tokens / 4 chunks).
        tokens = [v.split() for k, v in CORPUS.items() if k != "b"] + [["banana", "split"], ["kiwi"]]
        expected = bm25(["cherry"], CORPUS["c"].split(), tokens, average=3.0)
        assert hits(service, store.name, "cherry")["c"] == pytest.approx(expected, rel=1e-5)
        assert_consistent(service, store.name)
        # Reweighing brings the stored weights to the store's average now (13 tokens / 5 chunks).
        before = service.get_store(store.name).version
        assert main(["reweigh-keywords", "--store", store.name]) == 0
        expected = bm25(["cherry"], CORPUS["c"].split(), tokens)
        assert hits(service, store.name, "cherry")["c"] == pytest.approx(expected, rel=1e-5)
        assert_consistent(service, store.name)  # the largest weights grew with the weights
        # The scores changed, so answers cached under the old version must not be served.
        assert service.get_store(store.name).version > before

        delete_documents(conn, store, ["c"])  # chunks go by cascade
        assert hits(service, store.name, "cherry") == {}
        assert_consistent(service, store.name)
        assert set(hits(service, other.name, "cherry")) == {"z"}  # another store's index is its own

        drop_store(conn, store)
        left = conn.execute(
            "SELECT (SELECT count(*) FROM keyword_chunks WHERE store_id = %(s)s),"
            " (SELECT count(*) FROM keyword_terms WHERE store_id = %(s)s)",
            {"s": store.id},
        ).fetchone()
        assert left == (0, 0)
        assert_consistent(service, other.name)
        drop_store(conn, other)


def test_a_rolled_back_write_leaves_the_keyword_index_as_it_was(service: Any) -> None:
    with service.database.connection() as conn:
        store = fresh_store(conn)
        replace_documents(conn, store, [document("a", "quarterly revenue report")])
        with pytest.raises(RuntimeError), conn.transaction():
            replace_documents(conn, store, [document("a", "holiday rota")])
            raise RuntimeError("abort")
    assert set(hits(service, store.name, "revenue")) == {"a"}
    assert hits(service, store.name, "holiday") == {}
    assert_consistent(service, store.name)


def test_chunks_are_never_edited_in_place(service: Any) -> None:
    with service.database.connection() as conn:
        store = fresh_store(conn)
        replace_documents(conn, store, [document("a", "quarterly revenue report")])
        with pytest.raises(psycopg.errors.RaiseException, match="never updated in place"):
            conn.execute("UPDATE chunks SET content = 'other' WHERE store_id = %s", (store.id,))


def test_a_simple_store_matches_a_stopword_and_a_german_store_stems_german(service: Any) -> None:
    with service.database.connection() as conn:
        english = fresh_store(conn)
        simple = fresh_store(conn, "simple")
        german = fresh_store(conn, "german")
        for store in (english, simple, german):
            replace_documents(
                conn,
                store,
                [document("hamlet", "To be, or not to be"), document("haus", "Die Häuser am Fluss")],
            )
    assert hits(service, english.name, "to be") == {}  # english drops both words as stopwords
    assert set(hits(service, simple.name, "to be")) == {"hamlet"}
    assert set(hits(service, german.name, "Haus")) == {"haus"}  # Häuser and Haus stem alike
    assert hits(service, english.name, "Haus") == {}
    assert hits(service, simple.name, "Haus") == {}


def test_a_quoted_phrase_matches_only_as_a_phrase_and_a_minus_word_excludes(service: Any) -> None:
    with service.database.connection() as conn:
        store = fresh_store(conn)
        replace_documents(
            conn,
            store,
            [
                document("desk", "Visitors sign in at the front desk."),
                document("apart", "The desk by the front door is free."),
                document("badge", "Visitors at the front desk wear a badge."),
            ],
        )
    assert set(hits(service, store.name, "front desk")) == {"desk", "apart", "badge"}
    assert set(hits(service, store.name, '"front desk"')) == {"desk", "badge"}
    assert set(hits(service, store.name, '"front desk" -badge')) == {"desk"}
    # A filter narrows the keyword hits too.
    assert set(hits(service, store.name, "front desk", where=document_ids_in(["apart"]))) == {"apart"}


# The text search configuration of a store, over HTTP.


@pytest.fixture()
def store_name(client: TestClient) -> Iterator[str]:
    name = f"kw-api-{uuid.uuid4().hex[:8]}"
    yield name
    client.delete(f"{STORES}/{name}")


def test_text_search_is_chosen_at_creation_and_fixed_after(client: TestClient, store_name: str) -> None:
    created = client.put(f"{STORES}/{store_name}", json={"textSearch": "German"})
    assert created.status_code == 201, created.text
    assert created.json()["textSearch"] == "german"
    assert client.get(f"{STORES}/{store_name}").json()["textSearch"] == "german"
    same = client.put(f"{STORES}/{store_name}", json={"textSearch": "german", "displayName": "Deutsch"})
    assert same.status_code == 200 and same.json()["textSearch"] == "german"
    unsaid = client.put(f"{STORES}/{store_name}", json={"displayName": "Deutsch"})
    assert unsaid.status_code == 200 and unsaid.json()["textSearch"] == "german"

    changed = client.put(f"{STORES}/{store_name}", json={"textSearch": "english"})
    assert changed.status_code == 409
    assert changed.json()["error"]["message"].startswith(
        "textSearch: the store's keyword index uses the text search configuration 'german'; it cannot change"
    )


@pytest.mark.parametrize("name", ["klingon", "pg_catalog.klingon", "a.b.c", "english; DROP TABLE stores"])
def test_an_unknown_text_search_configuration_is_a_422_naming_the_field(
    client: TestClient, store_name: str, name: str
) -> None:
    refused = client.put(f"{STORES}/{store_name}", json={"textSearch": name})
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert error["details"]["errors"][0]["field"] == "textSearch"
    assert "is not a text search configuration of this PostgreSQL; it has: " in error["message"]
    assert "english" in error["message"] and "simple" in error["message"]
    assert client.get(f"{STORES}/{store_name}").status_code == 404  # nothing was created


def test_a_new_store_defaults_to_english(client: TestClient, store_name: str) -> None:
    assert client.put(f"{STORES}/{store_name}", json={}).json()["textSearch"] == "english"


# Every write path changes keyword results at once.


def test_documents_api_updates_and_deletes_change_keyword_results(
    client: TestClient, service: Any, store_name: str
) -> None:
    assert client.put(f"{STORES}/{store_name}", json={"textSearch": "simple"}).status_code == 201
    url = f"{STORES}/{store_name}/documents/memo"
    assert client.put(url, json={"text": "The parking garage closes at nine."}).status_code == 201
    assert set(hits(service, store_name, "garage")) == {"memo"}
    assert client.put(url, json={"text": "The bicycle shed closes at ten."}).status_code == 200
    assert hits(service, store_name, "garage") == {}
    assert set(hits(service, store_name, "bicycle")) == {"memo"}
    # Through the retrieve route too: hybrid results carry the keyword score.
    body = {"query": "bicycle", "store": store_name, "grade": 0.0, "useHybrid": True}
    results = client.post("/api/v1/rag/retrieve", json=body).json()["results"]
    assert results[0]["keywordScore"] == pytest.approx(hits(service, store_name, "bicycle")["memo"])
    assert client.delete(url).status_code == 204
    assert hits(service, store_name, "bicycle") == {}
    assert_consistent(service, store_name)


def test_cli_ingest_and_delete_change_keyword_results(service: Any, tmp_path: Path) -> None:
    store = f"kw-cli-{uuid.uuid4().hex[:8]}"
    (tmp_path / "memo.txt").write_text("The parking garage closes at nine.")
    assert main(["stores", "create", store, "--text-search", "simple"]) == 0
    assert main(["ingest", str(tmp_path), "--store", store, "--no-progress"]) == 0
    assert set(hits(service, store, "garage")) == {"memo.txt"}
    (tmp_path / "memo.txt").write_text("The bicycle shed closes at ten.")
    assert main(["ingest", str(tmp_path), "--store", store, "--no-progress"]) == 0
    assert hits(service, store, "garage") == {} and set(hits(service, store, "bicycle")) == {"memo.txt"}
    assert main(["delete", "--store", store, "memo.txt"]) == 0
    assert hits(service, store, "bicycle") == {}
    assert service.get_store(store).text_search == "simple"
    assert_consistent(service, store)
    assert main(["drop-store", "--store", store]) == 0


def test_a_source_larger_than_one_copy_statement_is_written_whole(
    service: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One JSONL file is one source, written in one transaction, in several COPY statements.
    from retrieval_core.db import documents

    monkeypatch.setattr(documents, "COPY_ROWS", 3)
    store = f"kw-copy-{uuid.uuid4().hex[:8]}"
    words = ["amber", "basil", "cedar", "dune", "ember", "fjord", "grove"]
    lines = [f'{{"_id": "r{i}", "text": "record about {word}"}}' for i, word in enumerate(words)]
    (tmp_path / "records.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["ingest", str(tmp_path / "records.jsonl"), "--store", store, "--no-progress"]) == 0
    for i, word in enumerate(words):
        assert set(hits(service, store, word)) == {f"r{i}"}
    assert service.get_store(store).chunk_count == len(words)
    assert_consistent(service, store)
    assert main(["drop-store", "--store", store]) == 0


def test_cli_refuses_to_change_the_text_search_of_a_store(
    service: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"kw-cli-{uuid.uuid4().hex[:8]}"
    assert main(["stores", "create", store, "--text-search", "german"]) == 0
    assert main(["stores", "create", store, "--text-search", "french"]) == 2
    assert "it cannot change" in capsys.readouterr().err
    assert main(["drop-store", "--store", store]) == 0


# The backfill of chunks written before migration 7.


def _old_store(dsn: str) -> None:
    """Store `old` with CORPUS written at schema version 6, then the schema migrated to the newest."""
    run_migrations(dsn, migrations=MIGRATIONS[:6])
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "INSERT INTO stores (name, display_name, embedding_model, dimension)"
            " VALUES ('old', 'old', 'm', 4)"
        )
        _insert_corpus(conn)
    run_migrations(dsn)


def _insert_corpus(conn: psycopg.Connection[Any]) -> None:
    """CORPUS as one-chunk documents of the only store, by plain SQL (an older schema's writers).

    One chunk a statement: each weighed with the average length of the chunks before it."""
    for key, text in CORPUS.items():
        conn.execute(
            "INSERT INTO documents (store_id, id, source, content_sha256, chunk_count)"
            " SELECT id, %s, %s, '-', 1 FROM stores",
            (key, key),
        )
        conn.execute(
            "INSERT INTO chunks (store_id, document_id, chunk_index, content, embedding)"
            " SELECT id, %s, 0, %s, '[1,0,0,0]' FROM stores",
            (key, text),
        )


def test_chunks_older_than_migration_7_are_backfilled_in_batches_and_searched_with_ts_rank_cd_before(
    private_postgres: Any,
) -> None:
    dsn = str(private_postgres.get_uri())
    _old_store(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        store = find_store(conn, "old")
        assert store is not None and not store.keyword_ready and store.text_search == "english"
        with conn.transaction():
            legacy = keyword_sql.keyword_chunks(conn, store, "cherry", 10, TRUE)
        expected = conn.execute(
            "SELECT document_id, ts_rank_cd(tsv, to_tsquery('english', 'cherry')) FROM chunks"
            " WHERE tsv @@ to_tsquery('english', 'cherry') ORDER BY 2 DESC"
        ).fetchall()
        assert [(d, pytest.approx(s)) for d, _, s in legacy] == expected

        assert backfill_keywords(conn, Deadline(1.0)).stores_left == ["old"]  # no time for a batch
        done = backfill_keywords(conn, batch_chunks=3)  # 4 chunks: two batches
        assert (done.chunks, done.stores_done, done.stores_left) == (4, ["old"], [])
        store = find_store(conn, "old")
        assert store is not None and store.keyword_ready
        with conn.transaction():
            found = {d: s for d, _, s in keyword_sql.keyword_chunks(conn, store, "cherry", 10, TRUE)}
        # english stems none of these words. IDF is the store's now (4 chunks); the term weights were
        # stored with the average length their batch saw: a, b, c first (11 tokens / 3).
        corpus = [v.split() for v in CORPUS.values()]
        for key in ("b", "c"):
            expected = bm25(["cherry"], CORPUS[key].split(), corpus, average=11 / 3)
            assert found[key] == pytest.approx(expected, rel=1e-5)
        assert backfill_keywords(conn).chunks == 0  # nothing left


def test_a_chunk_deleted_while_the_backfill_reads_it_leaves_no_keyword_row(private_postgres: Any) -> None:
    dsn = str(private_postgres.get_uri())
    _old_store(dsn)
    with psycopg.connect(dsn) as writer, psycopg.connect(dsn, autocommit=True) as conn:
        # The writer deletes a document (its chunk goes by cascade) and has not committed yet.
        writer.execute("DELETE FROM documents WHERE id = 'c'")
        backfill = threading.Thread(target=backfill_keywords, args=(conn,))
        backfill.start()
        time.sleep(0.5)
        assert backfill.is_alive()  # it waits for the store's row, which the writer's delete locked
        writer.commit()
        backfill.join(timeout=10)
        assert not backfill.is_alive()
        rows = conn.execute("SELECT document_id FROM keyword_chunks ORDER BY 1").fetchall()
        terms = dict(conn.execute("SELECT lexeme, df FROM keyword_terms WHERE df > 0").fetchall())
        ready = conn.execute("SELECT keyword_ready, keyword_chunk_count FROM stores").fetchone()
    assert rows == [("a",), ("b",), ("d",)]
    assert terms["cherri"] == 1 and "date" not in terms and "elderberri" not in terms
    assert ready == (True, 3)


# The title in the keyword text (migration 8).


def titled(doc_id: str, title: str, *texts: str) -> DocumentRow:
    chunks = [ChunkRow(doc_id, i, text, {}, [1.0, float(i), 0.5, 0.25]) for i, text in enumerate(texts)]
    return DocumentRow(doc_id, title, {}, "-", chunks)


def test_a_documents_title_is_matched_and_counted_with_each_of_its_chunks(service: Any) -> None:
    with service.database.connection() as conn:
        store = fresh_store(conn, "simple")
        replace_documents(
            conn,
            store,
            [titled("t", "kiwi orchard", "apple banana", "cherry date"), document("u", "banana kiwi fig")],
        )
        # Each chunk of "t" holds its title's words: both match kiwi, and are 4 tokens long.
        corpus = [["kiwi", "orchard", "apple", "banana"], ["kiwi", "orchard", "cherry", "date"]]
        corpus.append(["banana", "kiwi", "fig"])
        with conn.transaction():
            found = keyword_sql.keyword_chunks(conn, store, "kiwi", 10, TRUE)
        assert {(d, i): pytest.approx(s, rel=1e-5) for d, i, s in found} == {
            ("t", 0): bm25(["kiwi"], corpus[0], corpus),
            ("t", 1): bm25(["kiwi"], corpus[1], corpus),
            ("u", 0): bm25(["kiwi"], corpus[2], corpus),
        }
        assert set(hits(service, store.name, "orchard")) == {"t"}

        # A new title comes with the document's chunks, through every writer; the index follows.
        replace_documents(conn, store, [titled("t", "lemon grove", "apple banana")])
        assert hits(service, store.name, "orchard") == {} and set(hits(service, store.name, "lemon")) == {"t"}
        assert_consistent(service, store.name)
        # Changed under its chunks, a title would leave their keyword rows stale: refused.
        with pytest.raises(psycopg.errors.RaiseException, match="title changes only with its chunks"):
            conn.execute("UPDATE documents SET title = 'mango' WHERE store_id = %s AND id = 't'", (store.id,))
        drop_store(conn, store)


def test_migration_8_indexes_titled_stores_again_and_leaves_the_others(private_postgres: Any) -> None:
    dsn = str(private_postgres.get_uri())
    run_migrations(dsn, migrations=MIGRATIONS[:7])
    with psycopg.connect(dsn) as conn:
        for name in ("titled", "plain"):
            conn.execute(
                "INSERT INTO stores (name, display_name, embedding_model, dimension, text_search)"
                " VALUES (%s, %s, 'm', 4, 'simple')",
                (name, name),
            )
        for name, title in (("titled", "kiwi orchard"), ("plain", "")):
            conn.execute(
                "INSERT INTO documents (store_id, id, source, title, content_sha256, chunk_count)"
                " SELECT id, 'd', 'd', %s, '-', 1 FROM stores WHERE name = %s",
                (title, name),
            )
            conn.execute(
                "INSERT INTO chunks (store_id, document_id, chunk_index, content, embedding)"
                " SELECT id, 'd', 0, 'apple banana', '[1,0,0,0]' FROM stores WHERE name = %s",
                (name,),
            )
    with psycopg.connect(dsn, autocommit=True) as conn:
        plain_rows = conn.execute(
            "SELECT k.* FROM keyword_chunks k JOIN stores s ON s.id = k.store_id WHERE s.name = 'plain'"
        ).fetchall()
        run_migrations(dsn)
        ready = dict(conn.execute("SELECT name, keyword_ready FROM stores").fetchall())
        assert ready == {"titled": False, "plain": True}
        assert (
            conn.execute(
                "SELECT k.* FROM keyword_chunks k JOIN stores s ON s.id = k.store_id WHERE s.name = 'plain'"
            ).fetchall()
            == plain_rows
        )
        assert backfill_keywords(conn).stores_done == ["titled"]
        store = find_store(conn, "titled")
        assert store is not None and store.keyword_ready
        with conn.transaction():
            assert [d for d, _, _ in keyword_sql.keyword_chunks(conn, store, "orchard", 10, TRUE)] == ["d"]


# Per-lexeme bounds and seeds (migration 11).


def max_weights(conn: Any, store: Any) -> dict[str, float]:
    rows = conn.execute("SELECT lexeme, max_weight FROM keyword_terms WHERE store_id = %s", (store.id,))
    return {lexeme: weight for lexeme, weight in rows}


def test_a_lexemes_bound_is_its_largest_weight_and_follows_writes(service: Any) -> None:
    with service.database.connection() as conn:
        store = fresh_store(conn, "simple")
        replace_documents(conn, store, [document(k, v) for k, v in CORPUS.items()])
        # One write: the average length is 3 (12 tokens / 4 chunks), and the weights are the formula's.
        tokens = {k: v.split() for k, v in CORPUS.items()}

        def weight(word: str, doc: list[str], average: float) -> float:
            tf = doc.count(word)
            return tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(doc) / average))

        kept = max_weights(conn, store)
        # c's cherry (tf 3) outweighs b's (tf 1).
        assert kept["cherry"] == pytest.approx(weight("cherry", tokens["c"], 3.0), rel=1e-6)
        assert kept["apple"] == pytest.approx(weight("apple", tokens["a"], 3.0), rel=1e-6)
        assert kept["grape"] == pytest.approx(weight("grape", tokens["d"], 3.0), rel=1e-6)
        assert_consistent(service, store.name)
        # A delete leaves the bound (still a bound); once no chunk holds the lexeme (df 0), the next chunk
        # that does sets it anew.
        delete_documents(conn, store, ["c"])
        assert max_weights(conn, store)["cherry"] == kept["cherry"]
        delete_documents(conn, store, ["b"])
        replace_documents(conn, store, [document("e", "cherry kiwi kiwi kiwi")])
        # The store holds a (3 tokens), d (1) and e (4): an average of 8 / 3 at e's write.
        expected = weight("cherry", ["cherry", "kiwi", "kiwi", "kiwi"], 8 / 3)
        assert max_weights(conn, store)["cherry"] == pytest.approx(expected, rel=1e-6)
        assert_consistent(service, store.name)
        # A long chunk raises the average length; reweighing then raises the short chunks' weights, and
        # the bounds grow with them.
        replace_documents(conn, store, [document("f", " ".join(["lime"] * 30))])
        before = max_weights(conn, store)
        assert main(["reweigh-keywords", "--store", store.name]) == 0
        after = max_weights(conn, store)
        assert after["grape"] > before["grape"] and after["cherry"] > before["cherry"]
        assert_consistent(service, store.name)
        drop_store(conn, store)


def test_pruned_keyword_search_equals_the_full_ranking_with_titles(service: Any) -> None:
    # Titled documents of several chunks: every chunk holds its title's words, as in scifact, so the
    # rarest lexemes' chunks overlap and the seeds and bounds are put to work. Every top k, unfiltered
    # (the store's function) or filtered (the inline statement), must be the first k rows of the full
    # ranking: same rows, same scores, same order.
    rng = random.Random(11)
    vocabulary = [f"w{i:02d}" for i in range(40)]
    zipf = [1 / (i + 1) for i in range(40)]
    documents = []
    for i in range(150):
        title = " ".join(rng.sample(vocabulary, 3))
        chunks = rng.randint(1, 4)
        texts = [" ".join(rng.choices(vocabulary, zipf, k=rng.randint(3, 20))) for _ in range(chunks)]
        documents.append(titled(f"doc{i:03d}", title, *texts))
    with service.database.connection() as conn:
        store = fresh_store(conn, "simple")
        replace_documents(conn, store, documents[:70])  # two writes: two average lengths
        replace_documents(conn, store, documents[70:])
    some = {d.id for d in documents[::3]}
    pruned = 0
    for _ in range(15):
        query = " ".join(rng.sample(vocabulary, rng.randint(2, 8)))
        with service.database.connection() as conn:
            params = {"store_id": store.id, "text_search": "simple", "query_text": query}
            full = [(d, i, float(score)) for d, i, score in conn.execute(FULL_RANKING, params)]
        assert len(full) > 100
        for limit in (10, 20, 100):
            assert hits_in_order(service, store.name, query, limit, TRUE) == full[:limit], (query, limit)
            wanted = [row for row in full if row[0] in some][:limit]
            assert hits_in_order(service, store.name, query, limit, document_ids_in(sorted(some))) == wanted
        pruned += count_candidates(service, store, query, 10) < len(full)
    assert pruned >= 10  # the comparison was made where pruning left chunks out
    assert_consistent(service, store.name)


def count_candidates(service: Any, store: Any, query: str, limit: int) -> int:
    """How many chunks the search scores besides its seeds (the candidate tsquery's matches)."""
    from psycopg import sql

    statement = sql.SQL(
        "WITH {hits} SELECT count(*) FROM keyword_chunks k, keyword_query kq, keyword_candidates kc"
        " WHERE k.store_id = {store_id} AND {keys} @@ kc.q AND {matches_query}"
    ).format(
        hits=sql.SQL(keyword_sql.BM25_KEYWORD_HITS).format(
            tsquery=sql.SQL(keyword_sql.keyword_tsquery("%(text_search)s::regconfig")),
            store_id=sql.Literal(store.id),
            filters=sql.SQL(""),
            **keyword_sql.keyword_lookup(store),
        ),
        store_id=sql.Literal(store.id),
        keys=keyword_sql.keyword_lookup(store)["keys"],
        matches_query=keyword_sql.keyword_lookup(store)["matches_query"],
    )
    with service.database.connection() as conn:
        params = {"query_text": query, "text_search": store.text_search, "limit": limit}
        row = conn.execute(statement, params).fetchone()
    assert row is not None
    return int(row[0])


def test_migration_11_bounds_each_lexeme_by_the_weights_already_stored(private_postgres: Any) -> None:
    dsn = str(private_postgres.get_uri())
    run_migrations(dsn, migrations=MIGRATIONS[:10])  # then 11 alone
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "INSERT INTO stores (name, display_name, embedding_model, dimension, text_search)"
            " VALUES ('old', 'old', 'm', 4, 'simple')"
        )
        conn.execute("SELECT create_keyword_search(id) FROM stores")
        _insert_corpus(conn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert run_migrations(dsn, migrations=MIGRATIONS[:11]).applied == [11]
        # Its row as schema 11 holds it, without the chunking of migration 19.
        columns = ROW_COLUMNS.removesuffix(", chunking")
        row = conn.execute(f"SELECT {columns} FROM stores WHERE name = 'old'").fetchone()
        store = store_from_row((*row, None, False, False))
        stored = {lexeme: w for _, lexeme, w in conn.execute(STORED_MAX_WEIGHTS)}
        kept = max_weights(conn, store)
        assert kept.keys() == stored.keys() and len(kept) == 7
        for lexeme, weight in stored.items():
            assert kept[lexeme] == pytest.approx(weight, rel=1e-6), lexeme
        # The search, with the bounds, still ranks as the full ranking.
        for query in ("apple cherry", "banana fig", "cherry"):
            params = {"store_id": store.id, "text_search": "simple", "query_text": query}
            full = [(d, i, float(score)) for d, i, score in conn.execute(FULL_RANKING, params)]
            with conn.transaction():
                assert keyword_sql.keyword_chunks(conn, store, query, 2, TRUE) == full[:2]


def test_words_with_quotes_backslashes_and_great_length_are_found_by_their_store_scoped_keys(
    service: Any,
) -> None:
    # The shared index's keys are written out in a tsquery's text (quotes doubled, backslashes escaped)
    # and cut to 250 characters; each word still finds its chunk, through both forms of the statement
    # (a query of words alone reads the keys exactly; a phrase or an exclusion is checked on the chunk).
    long_word = "x" * 300
    texts = {
        "quote": "o'brien and the harbour",
        "slash": r"path a\b to the harbour",
        "long": f"{long_word} harbour",
        "longer": f"{long_word}y weir",
        "plain": "harbour weir",
    }
    with service.database.connection() as conn:
        store = fresh_store(conn, "simple")
        replace_documents(conn, store, [document(k, v) for k, v in texts.items()])
    found = {
        query: set(hits(service, store.name, query))
        for query in (
            "o'brien",
            r"a\b",
            long_word,
            f"{long_word}y",
            "harbour -weir",
            '"harbour weir"',
            "weir",
        )
    }
    assert found["o'brien"] == {"quote"}
    assert found[r"a\b"] == {"slash"}
    # Cut to 250 characters, the two long words share a key; the chunk's own words tell them apart.
    assert found[long_word] == {"long"} and found[f"{long_word}y"] == {"longer"}
    assert found["harbour -weir"] == {"quote", "slash", "long"}
    assert found['"harbour weir"'] == {"plain"}
    assert found["weir"] == {"longer", "plain"}
    # Query texts of over 250 characters, with and without a word that long, take the other rewrite.
    filler = " ".join(f"filler{i}" for i in range(40))
    assert set(hits(service, store.name, f"o'brien {filler}")) == {"quote"}
    assert set(hits(service, store.name, rf"a\b {filler}")) == {"slash"}
    assert set(hits(service, store.name, f"{long_word}y {filler}")) == {"longer"}


# Migration 12's rewrite of a tsquery into store-scoped keys, whose bounded repetition cost about 0.17 ms
# a call: the oracle of the faster one, which must give the same keys and verdict for every query.
BOUNDED_SCOPE_QUERY = r"""
    SELECT regexp_replace(q::text, $p$'((?:[^'\\]|''|\\.){0,250})(?:[^'\\]|''|\\.)*'$p$, '''7:\1''', 'g')
               ::tsquery::text,
           q::text !~ '[&!<:]' AND q::text !~ $p$'(?:[^'\\]|''|\\.){250}$p$,
           keyword_scope_query(7, q)::text,
           keyword_keys_exact(q)
    FROM (SELECT CASE %(shape)s WHEN 0 THEN keyword_any(%(lexemes)s)
                                WHEN 1 THEN keyword_any(%(lexemes)s) && keyword_any(%(more)s)
                                ELSE keyword_any(%(lexemes)s) <-> keyword_any(%(more)s) END AS q) AS t"""

LEXEMES = st.lists(
    st.one_of(
        st.text(alphabet="ab'\\ :&!<", min_size=1, max_size=12),
        st.integers(240, 260).flatmap(lambda n: st.text(alphabet="ab'\\", min_size=n, max_size=n)),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(LEXEMES, LEXEMES, st.integers(0, 2))
def test_the_scoped_query_is_the_bounded_rewrite_for_any_lexemes(
    service: Any, lexemes: list[str], more: list[str], shape: int
) -> None:
    with service.database.connection() as conn:
        row = conn.execute(BOUNDED_SCOPE_QUERY, {"lexemes": lexemes, "more": more, "shape": shape}).fetchone()
    assert row is not None
    bounded, bounded_exact, scoped, exact = row
    assert scoped == bounded and exact == bounded_exact


def test_the_keyword_function_reads_the_shared_index_for_a_large_store_among_many_small_ones(
    service: Any, postgres_dsn: str
) -> None:
    # keyword_hits keeps one generic plan per session for every store. Among many small stores the
    # average store is a few rows: a plan reading a store by its primary key (then computing each row's
    # keys) would look cheap, and take seconds on a large store. The plan must read the shared index.
    with service.database.connection() as conn:
        small = [fresh_store(conn, "simple") for _ in range(200)]
        for store in small:
            replace_documents(conn, store, [document("d", "kiwi lime")])
        large = fresh_store(conn, "simple")
        words = [f"w{i}" for i in range(50)]
        replace_documents(
            conn,
            large,
            [document(f"d{i}", " ".join([*words[i % 50 : i % 50 + 3], "kiwi"])) for i in range(2_000)],
        )
        conn.execute("ANALYZE keyword_chunks")

    def scans(conn: Any) -> dict[str, int]:
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.execute("SELECT pg_stat_clear_snapshot()")
        rows = conn.execute(
            "SELECT indexrelname, idx_scan FROM pg_stat_user_indexes WHERE relname = 'keyword_chunks'"
        ).fetchall()
        return {name: int(count) for name, count in rows}

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        call = "SELECT * FROM keyword_hits(%s, 'kiwi w7', 'simple'::regconfig, 10)"
        conn.execute(call, (small[0].id,)).fetchall()  # the session's plan, made on a small store
        before = scans(conn)
        found = conn.execute(call, (large.id,)).fetchall()
        after = scans(conn)
    assert len(found) == 10 and {r[0] for r in found} <= {f"d{i}" for i in range(2_000)}
    assert after["keyword_chunks_scope_gin"] > before["keyword_chunks_scope_gin"]
    assert after["keyword_chunks_pkey"] == before["keyword_chunks_pkey"]
