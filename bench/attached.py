"""Search on an attached langchain-postgres table vs the same rows in the service's own schema.

One embedded PostgreSQL (data under `.data/bench-attached`, made afresh) holds bench.scale's synthetic
rows twice: in a store of our own (chunks, partial HNSW index), and in a langchain-postgres v1 table
(langchain_pg_embedding, untyped vector, its GIN index on cmetadata, and an HNSW index on
`(embedding::vector(384)) vector_cosine_ops`, the index the langchain-postgres docs suggest; the same
m = 16, ef_construction = 64 defaults as ours), attached as a store. Both are searched through
`RetrievalService.similarity_search` (uncached) with the same queries, alternating which goes first,
unfiltered and with a filter keeping 1% of the rows. Run with
`PYTHONPATH=layers/retrieval_core:. python -m bench.attached [--rows 50000]`.
"""

from __future__ import annotations

import argparse
import shutil
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import numpy as np
from tqdm import tqdm

from bench.common import REPO, machine, median
from bench.scale import DIM, K, chunk_id, embedded_server, exact_top_k, generate, load_store

OWN, ATTACHED = "bench-own", "bench-langchain"


def load_langchain(conninfo: str, data: Any) -> None:
    """The rows as langchain-postgres 0.0.x writes them: collection `bench` of lc.langchain_pg_embedding."""
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg.types.json import Jsonb

    with psycopg.connect(conninfo, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("CREATE SCHEMA lc")
        conn.execute(
            """CREATE TABLE lc.langchain_pg_collection (
                   uuid UUID NOT NULL, name VARCHAR NOT NULL, cmetadata JSON,
                   PRIMARY KEY (uuid), UNIQUE (name));
               CREATE TABLE lc.langchain_pg_embedding (
                   id VARCHAR NOT NULL, collection_id UUID, embedding VECTOR, document VARCHAR,
                   cmetadata JSONB,
                   PRIMARY KEY (id),
                   FOREIGN KEY(collection_id) REFERENCES lc.langchain_pg_collection (uuid) ON DELETE CASCADE);
               CREATE INDEX ix_cmetadata_gin ON lc.langchain_pg_embedding
                   USING gin (cmetadata jsonb_path_ops);
               CREATE UNIQUE INDEX ix_langchain_pg_embedding_id ON lc.langchain_pg_embedding (id);"""
        )
        collection = uuid.uuid4()
        conn.execute("INSERT INTO lc.langchain_pg_collection VALUES (%s, 'bench', '{}')", (collection,))
        with (
            conn.transaction(),
            conn.cursor() as cur,
            cur.copy(
                "COPY lc.langchain_pg_embedding (id, collection_id, embedding, document, cmetadata)"
                " FROM STDIN WITH (FORMAT BINARY)"
            ) as copy,
        ):
            copy.set_types(["varchar", "uuid", "vector", "varchar", "jsonb"])
            for row in tqdm(range(len(data.vectors)), desc="COPY langchain", unit="row", unit_scale=True):
                metadata = {"tenant": str(data.tenants[row])}
                copy.write_row(
                    (
                        chunk_id(row),
                        collection,
                        data.vectors[row],
                        f"synthetic chunk {row}",
                        Jsonb(metadata),
                    )
                )
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute("SET max_parallel_maintenance_workers = 1")
        conn.execute(
            "CREATE INDEX lc_hnsw ON lc.langchain_pg_embedding"
            f" USING hnsw ((embedding::vector({DIM})) vector_cosine_ops)"
        )
        conn.execute("VACUUM ANALYZE lc.langchain_pg_embedding")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()

    from retrieval_core.backends.attached.definition import source_request
    from retrieval_core.backends.attached.stores import attach_store
    from retrieval_core.backends.pgvector.service import RetrievalService
    from retrieval_core.db.connection import PooledConnections
    from retrieval_core.grants import OPEN_GRANT
    from retrieval_core.schemas.similarity_search import SimilaritySearchRequest
    from retrieval_core.settings import get_settings

    settings = get_settings()
    data_dir = REPO / ".data" / "bench-attached"
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    data = generate(args.rows, args.queries)
    with embedded_server(data_dir, 2048) as conninfo:
        load_store(conninfo, OWN, "vector", data)
        load_langchain(conninfo, data)
        database = PooledConnections(conninfo, 1, 2, 5, settings.db_statement_timeout_ms)
        with database.connection() as conn:
            request = source_request(
                "lc.langchain_pg_embedding", None, preset="langchain-postgres", collection="bench"
            )
            store, _ = attach_store(conn, ATTACHED, None, request, "synthetic", DIM)
            assert store.source is not None and store.source.vector_index == "lc_hnsw", store.source
        service = RetrievalService(
            database,
            embedder=None,  # type: ignore[arg-type]  # similarity_search never embeds
            default_store=OWN,
            ef_search=settings.hnsw_ef_search,
            iterative_scan=settings.hnsw_iterative_scan,
            max_scan_tuples=settings.hnsw_max_scan_tuples,
            exact_search_max_rows=settings.exact_search_max_rows,
        )

        def search(
            store_name: str, query: np.ndarray, metadata: dict[str, Any] | None
        ) -> tuple[list[str], float]:
            request = SimilaritySearchRequest(
                query_embedding=query.tolist(), top_k=K, store=store_name, metadata_filter=metadata
            )
            start = time.perf_counter()
            response, _ = service.similarity_search(request, grant=OPEN_GRANT)
            return [r.id for r in response.results], (time.perf_counter() - start) * 1000

        lines = [
            f"{args.rows:,} rows x {DIM} dims, {len(data.queries)} queries per line, top-{K}, uncached; "
            f"{machine()}; {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
            "",
            "| filter | own schema p50 (ms) | attached langchain table p50 (ms) | attached / own (p50) "
            "| recall@10 own / attached |",
            "|---|---|---|---|---|",
        ]
        for label, metadata in (("none", None), ("1%", {"tenant": "t01"})):
            expected = exact_top_k(data, metadata)
            times: dict[str, list[float]] = {OWN: [], ATTACHED: []}
            recall: dict[str, list[float]] = {OWN: [], ATTACHED: []}
            for warm in data.queries[:10]:  # pages and plans, not measured
                search(OWN, warm, metadata)
                search(ATTACHED, warm, metadata)
            for i, query in enumerate(data.queries):
                order = (OWN, ATTACHED) if i % 2 == 0 else (ATTACHED, OWN)
                for name in order:
                    found, ms = search(name, query, metadata)
                    times[name].append(ms)
                    truth = {chunk_id(r) for r in expected[i]}
                    recall[name].append(len(truth & set(found)) / K)
            own, attached = median(times[OWN]), median(times[ATTACHED])
            lines.append(
                f"| {label} | {own:.2f} | {attached:.2f} | {attached / own:.2f}x "
                f"| {np.mean(recall[OWN]):.3f} / {np.mean(recall[ATTACHED]):.3f} |"
            )
            print(lines[-1], flush=True)
        database.close()
    print("\n".join(lines))


if __name__ == "__main__":
    main()
