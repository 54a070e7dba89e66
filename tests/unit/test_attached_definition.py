"""The pure side of attached stores: `source` blocks, presets, the stored form, the features report."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from retrieval_core.backends.attached.definition import source_request
from retrieval_core.backends.attached.features import features
from retrieval_core.db.attached_source import AttachedSource, ColumnMap, RowScope
from retrieval_core.exceptions import InvalidRequestError


def field_of(exc: pytest.ExceptionInfo[InvalidRequestError]) -> str:
    errors: list[dict[str, Any]] = exc.value.details["errors"]
    return str(errors[0]["field"])


def test_a_table_name_is_split_at_its_first_dot_and_a_bare_one_is_in_public() -> None:
    columns = {"id": "id", "content": "body", "embedding": "vec"}
    assert (source_request("team.items", columns).schema, source_request("team.items", columns).table) == (
        "team",
        "items",
    )
    assert source_request("items", columns).schema == "public"
    dotted = source_request("odd.name", columns, schema="team")
    assert (dotted.schema, dotted.table) == ("team", "odd.name")


def test_presets_fill_the_libraries_columns_and_columns_override_them() -> None:
    v1 = source_request(None, None, preset="langchain-postgres", collection="docs")
    assert (v1.schema, v1.table) == ("public", "langchain_pg_embedding")
    assert v1.columns == ColumnMap(id="id", content="document", embedding="embedding", metadata="cmetadata")
    v2 = source_request("public.docs", {"content": "page_content"}, preset="langchain-postgres-v2")
    assert v2.columns.id == "langchain_id" and v2.columns.content == "page_content"
    llama = source_request("public.data_docs", None, preset="llamaindex")
    assert (llama.columns.id, llama.columns.content, llama.columns.metadata) == (
        "node_id",
        "text",
        "metadata_",
    )


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"table": None, "columns": {"id": "a", "content": "b", "embedding": "c"}}, "source.table"),
        ({"table": "t", "columns": {"id": "a", "content": "b"}}, "source.columns.embedding"),
        (
            {"table": "t", "columns": {"id": "a", "content": "b", "embedding": "x" * 64}},
            "source.columns.embedding",
        ),
        (
            {"table": "t", "columns": {"id": "a", "content": "b\x00", "embedding": "c"}},
            "source.columns.content",
        ),
        ({"table": None, "columns": None, "preset": "langchain-postgres"}, "source.collection"),
        (
            {"table": "other", "columns": None, "preset": "langchain-postgres", "collection": "c"},
            "source.table",
        ),
        (
            {"table": "t", "columns": {"id": "a", "content": "b", "embedding": "c"}, "collection": "c"},
            "source.collection",
        ),
        (
            {"table": "t", "columns": {"id": "a", "content": "b", "embedding": "c", "metadata": ["y", "y"]}},
            "source.columns.metadata",
        ),
    ],
)
def test_a_malformed_source_names_its_field(kwargs: dict[str, Any], field: str) -> None:
    table, columns = kwargs.pop("table"), kwargs.pop("columns")
    with pytest.raises(InvalidRequestError) as exc:
        source_request(table, columns, **kwargs)
    assert field_of(exc) == field


def _source(**changes: Any) -> AttachedSource:
    base = AttachedSource(
        schema="team",
        table="items",
        relation_kind="table",
        columns=ColumnMap(id="id", content="body", embedding="vec", metadata_columns=("year", "team")),
        distance="cosine",
        vector_type="vector",
        dimension=384,
        embedding_cast=False,
        metadata_kind="columns",
        embedding_model="all-MiniLM-L6-v2",
        accepts_text_queries=True,
        scope=RowScope("collection_id", "6f1c"),
        vector_index="items_vec_idx",
        rows=10,
    )
    return replace(base, **changes)


def test_the_stored_form_round_trips_and_skips_keys_of_a_newer_version() -> None:
    source = _source()
    stored = source.to_json()
    assert AttachedSource.from_json(stored) == source
    newer = {**stored, "someNewField": 1, "columns": {**stored["columns"], "sparse": "x"}}
    assert AttachedSource.from_json(newer) == source
    hash(source)  # queries are composed once per source: it must be hashable


def test_features_say_what_a_missing_index_costs() -> None:
    indexed = {f["feature"]: f for f in features(_source(), 20_000)}
    assert indexed["vectorSearch"]["detail"].startswith("HNSW index items_vec_idx")
    assert "row by row" in indexed["metadataFilters"]["detail"]
    bare = {
        f["feature"]: f
        for f in features(_source(vector_index=None, other_vector_indexes=("i (vector_l2_ops)",)), 500)
    }
    detail = bare["vectorSearch"]["detail"]
    assert "another operator: i (vector_l2_ops)" in detail and "capped at 500 rows" in detail
    assert not bare["hybrid"]["supported"] and not bare["writes"]["supported"]
    other_model = {
        f["feature"]: f for f in features(_source(accepts_text_queries=False, embedding_model="x"), 1)
    }
    assert (
        not other_model["textQueries"]["supported"]
        and "vector_queries_only" in other_model["textQueries"]["detail"]
    )
