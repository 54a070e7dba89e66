"""The keyword index's backfill: BM25 rows for chunks written before migration 7.

Triggers on `chunks` (migration 7) index every chunk written since; this indexes the older ones, store
by store, in batches that are each a short transaction of their own, so searches and writes go on
meanwhile. It is resumable: a batch takes the chunks of the store that have no keyword row yet, so a
run cut off by its time budget (a Lambda custom resource) loses nothing, and the next run continues.
A store is searched with ts_rank_cd until all of its chunks are indexed (`stores.keyword_ready`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import psycopg

from retrieval_core.clients.retry import Deadline

logger = logging.getLogger(__name__)

BATCH_CHUNKS = 2_000
# A batch is not started with less time than this left (one batch of 2,000 takes well under it).
_MIN_BATCH_S = 5.0


@dataclass
class Backfill:
    """What a backfill run did, and what it left."""

    chunks: int = 0  # chunks indexed by this run
    stores_done: list[str] = field(default_factory=list)  # stores made ready by this run
    stores_left: list[str] = field(default_factory=list)  # stores still waiting (out of time)


def backfill_keywords(
    conn: psycopg.Connection[Any], deadline: Deadline | None = None, batch_chunks: int = BATCH_CHUNKS
) -> Backfill:
    """Index the chunks of every store not yet keyword-ready, while `deadline` allows.

    `conn` must be in autocommit mode: every batch commits on its own.
    """
    deadline = deadline or Deadline(None)
    done = Backfill()
    pending = conn.execute("SELECT id, name FROM stores WHERE NOT keyword_ready ORDER BY id").fetchall()
    for position, (store_id, name) in enumerate(pending):
        last: tuple[str, int] = ("", -1)
        indexed = batch_chunks
        while indexed == batch_chunks:
            remaining = deadline.remaining_s()
            if remaining is not None and remaining < _MIN_BATCH_S:
                done.stores_left = [n for _, n in pending[position:]]
                logger.warning("keyword backfill out of time; stores left: %s", ", ".join(done.stores_left))
                return done
            with conn.transaction():
                indexed, last = _index_batch(conn, store_id, last, batch_chunks)
                if indexed < batch_chunks:
                    _mark_ready(conn, store_id)
            done.chunks += indexed
        done.stores_done.append(name)
        logger.info("keyword index of store %s complete", name)
    return done


def _index_batch(
    conn: psycopg.Connection[Any], store_id: int, after: tuple[str, int], batch_chunks: int
) -> tuple[int, tuple[str, int]]:
    """Index up to `batch_chunks` chunks after `after` (key order) that have no keyword row yet."""
    # The store's row first, as every writer of its chunks locks it (the chunk_count trigger) before it
    # touches keyword_terms or keyword_chunks: a write waits for this batch, or this batch for the
    # write. A delete that waited finds the keyword rows this batch wrote and removes them; a delete
    # this batch waited for is committed before the chunks are read. No chunk is locked, so there is no
    # other lock to wait for in another order (no deadlock with a writer).
    conn.execute("SELECT 1 FROM stores WHERE id = %s FOR UPDATE", (store_id,))
    keys = conn.execute(
        """SELECT c.document_id, c.chunk_index FROM chunks c
           WHERE c.store_id = %(store)s AND (c.document_id, c.chunk_index) > (%(doc)s, %(index)s)
               AND NOT EXISTS (SELECT 1 FROM keyword_chunks k WHERE k.store_id = c.store_id
                               AND k.document_id = c.document_id AND k.chunk_index = c.chunk_index)
           ORDER BY c.document_id, c.chunk_index LIMIT %(n)s""",
        {"store": store_id, "doc": after[0], "index": after[1], "n": batch_chunks},
    ).fetchall()
    if not keys:
        return 0, after
    conn.execute(
        """SELECT keyword_index(array_agg(c.store_id), array_agg(c.document_id), array_agg(c.chunk_index),
                                array_agg(c.content))
           FROM chunks c JOIN unnest(%s::text[], %s::int[]) AS b (document_id, chunk_index)
               USING (document_id, chunk_index)
           WHERE c.store_id = %s""",
        ([k[0] for k in keys], [k[1] for k in keys], store_id),
    )
    return len(keys), (keys[-1][0], keys[-1][1])


def _mark_ready(conn: psycopg.Connection[Any], store_id: int) -> None:
    """Searches of the store rank by BM25 from now on; a new version, so no cached ranking outlives it."""
    conn.execute(
        """UPDATE stores SET keyword_ready = true, version = nextval('store_versions'), updated_at = now()
           WHERE id = %s""",
        (store_id,),
    )


class Reweighed(NamedTuple):
    """What `reweigh_keywords` did: the chunks reweighed and the store's new version (None: no chunks)."""

    chunks: int
    version: int | None


def reweigh_keywords(
    conn: psycopg.Connection[Any], store_id: int, batch_chunks: int = BATCH_CHUNKS
) -> Reweighed:
    """Recompute the store's term weights with its current average chunk length.

    Weights are computed with the average length of the store when their chunk was written; a store
    whose chunks grew much longer or shorter since then ranks better after this. In batches, each its
    own transaction (`conn` in autocommit mode); searches go on meanwhile, and chunks written meanwhile
    are weighed by their own write. Each lexeme's largest weight grows with them (it bounds the
    keyword search's pruning). The rankings change, so the store gets a new version at the end:
    answers cached before are not served after it.
    """
    row = conn.execute(
        "SELECT keyword_length_sum::float8 / nullif(keyword_chunk_count, 0) FROM stores WHERE id = %s",
        (store_id,),
    ).fetchone()
    if row is None or row[0] is None:
        return Reweighed(0, None)
    average = float(row[0])
    last: tuple[str, int] = ("", -1)
    done = 0
    while True:
        with conn.transaction():
            keys = conn.execute(
                """SELECT document_id, chunk_index FROM keyword_chunks
                   WHERE store_id = %(store)s AND (document_id, chunk_index) > (%(doc)s, %(index)s)
                   ORDER BY document_id, chunk_index LIMIT %(n)s""",
                {"store": store_id, "doc": last[0], "index": last[1], "n": batch_chunks},
            ).fetchall()
            if not keys:
                version = conn.execute(
                    "UPDATE stores SET version = nextval('store_versions'), updated_at = now()"
                    " WHERE id = %s RETURNING version",
                    (store_id,),
                ).fetchone()
                return Reweighed(done, int(version[0]) if version else None)
            # The lexemes' largest weights (migration 11) grow with any weight that grows, so they stay
            # bounds; they are never lowered here.
            conn.execute(
                """WITH reweighed AS (
                       UPDATE keyword_chunks k SET weights = keyword_weights(k.tsv, %(average)s)
                       FROM unnest(%(documents)s::text[], %(indexes)s::int[]) AS b (document_id, chunk_index)
                       WHERE k.store_id = %(store)s AND k.document_id = b.document_id
                           AND k.chunk_index = b.chunk_index
                       RETURNING k.tsv)
                   UPDATE keyword_terms t SET max_weight = greatest(t.max_weight, m.weight)
                   FROM (SELECT w.lexeme, max(w.weight) AS weight
                         FROM reweighed r, keyword_lexeme_weights(r.tsv, %(average)s) AS w GROUP BY 1) AS m
                   WHERE t.store_id = %(store)s AND t.lexeme = m.lexeme""",
                {
                    "average": average,
                    "documents": [k[0] for k in keys],
                    "indexes": [k[1] for k in keys],
                    "store": store_id,
                },
            )
        done += len(keys)
        last = (keys[-1][0], keys[-1][1])
