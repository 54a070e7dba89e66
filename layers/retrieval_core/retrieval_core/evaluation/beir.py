"""Reading BEIR-format files: queries.jsonl, qrels/*.tsv and corpus.jsonl."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from retrieval_core.exceptions import InvalidRequestError

Qrels = dict[str, dict[str, int]]


def read_queries(path: Path) -> dict[str, str]:
    """query id -> text, from JSONL records with `_id` and `text`."""
    queries: dict[str, str] = {}
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                queries[str(record["_id"])] = str(record["text"])
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise InvalidRequestError(
                    f"{path}: line {number} is not a query record with _id and text ({exc})"
                ) from None
    return queries


def read_qrels(path: Path) -> Qrels:
    """query id -> {document id: grade}, from `query-id<TAB>corpus-id<TAB>score` lines.

    A first line that does not end in an integer is a header (BEIR's files start with one) and skipped.
    """
    qrels: Qrels = {}
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            fields = line.rstrip("\r\n").split("\t")
            if fields == [""]:
                continue
            if len(fields) == 4:  # TREC's `query-id 0 doc-id grade`
                fields = [fields[0], fields[2], fields[3]]
            try:
                query_id, doc_id, grade = fields
                qrels.setdefault(query_id, {})[doc_id] = int(grade)
            except ValueError:
                if number == 1:
                    continue
                raise InvalidRequestError(
                    f"{path}: line {number} is not query-id<TAB>corpus-id<TAB>integer score"
                ) from None
    return qrels


def read_corpus(path: Path) -> Iterator[tuple[str, str, str]]:
    """(document id, title, text) of each record of a BEIR corpus.jsonl, in file order."""
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                record = json.loads(line)
                yield str(record["_id"]), str(record.get("title") or ""), str(record.get("text") or "")
