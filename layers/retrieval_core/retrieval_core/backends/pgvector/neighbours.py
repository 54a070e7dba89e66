"""A retrieve answer with each chunk joined to its neighbours (request option `expand`): one query for
every neighbour of every result, then the pure joining of search/expansion.py."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from retrieval_core.db.document_chunks import chunks_at
from retrieval_core.db.errors import database_errors
from retrieval_core.exceptions import InvalidRequestError
from retrieval_core.schemas.results import ExpandedSpan
from retrieval_core.search.expansion import Neighbour, window
from retrieval_core.settings import get_settings

if TYPE_CHECKING:
    from retrieval_core.db.connection import Database
    from retrieval_core.db.stores import Store
    from retrieval_core.schemas.retrieve import RetrieveRequest, RetrieveResponse


def expanded(
    database: Database, store: Store, request: RetrieveRequest, answer: RetrieveResponse
) -> RetrieveResponse:
    """`answer` with each result's neighbours joined into its content, when `request.expand` asks; a result
    already inside an earlier one's window is left out."""
    options = request.expand
    if options is not None and store.source is not None:
        raise InvalidRequestError.for_field(
            "expand", "an attached store's rows have no neighbours the service knows of", "unsupported"
        )
    if options is None or not answer.results:
        return answer
    matched = [(str(r.metadata["documentId"]), int(r.metadata["chunkIndex"])) for r in answer.results]
    keys = sorted(
        {(doc, i) for doc, index in matched for i in range(index - options.before, index + options.after + 1)}
        - set(matched)
    )
    keys = [key for key in keys if key[1] >= 0]
    with database_errors("reading the chunks beside the results"), database.connection() as conn:
        rows = chunks_at(conn, store, keys) if keys else []
    beside: dict[str, list[Neighbour]] = defaultdict(list)
    # The results are neighbours of one another too; only the chunks no result holds were read.
    for result, (document_id, index) in zip(answer.results, matched, strict=True):
        beside[document_id].append(Neighbour(index, result.content, result.metadata))
    for document_id, index, content, metadata in rows:
        beside[document_id].append(Neighbour(index, content, metadata))
    overlap = store.chunking[2] if store.chunking is not None else get_settings().chunk_overlap
    covered: dict[str, set[int]] = defaultdict(set)
    results = []
    for result, (document_id, index) in zip(answer.results, matched, strict=True):
        if index in covered[document_id]:
            continue
        joined = window(
            Neighbour(index, result.content, result.metadata),
            beside[document_id],
            options.before,
            options.after,
            overlap,
        )
        covered[document_id].update(range(joined.first, joined.last + 1))
        span = ExpandedSpan(
            first_chunk=joined.first,
            last_chunk=joined.last,
            match_start=joined.match_start,
            match_end=joined.match_end,
        )
        results.append(result.model_copy(update={"content": joined.text, "expanded": span}))
    return answer.model_copy(update={"results": results, "total_results": len(results)})
