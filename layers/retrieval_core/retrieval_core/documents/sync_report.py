"""What `retrieval sync` and `retrieval ingest` did: the report, its lines and its JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from retrieval_core.documents.file_sources import Skipped

# How many ids of stored sources gone from the tree the report's line names.
GONE_NAMED = 5


@dataclass(frozen=True, slots=True)
class Written:
    """A file added, updated or unchanged. Counts are None in a dry run (nothing was parsed)."""

    path: str
    source_id: str
    documents: int | None = None
    chunks: int | None = None
    metadata_only: bool = False  # only its sidecar changed: nothing re-embedded
    # Other documents of the store with the same content as this file's (SourceWrite.duplicate_of).
    duplicate_of: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """camelCase, as every JSON the service prints."""
        body: dict[str, Any] = {"path": self.path, "sourceId": self.source_id}
        if self.documents is not None:
            body |= {"documents": self.documents, "chunks": self.chunks}
        if self.metadata_only:
            body["metadataOnly"] = True
        if self.duplicate_of:
            body["duplicateOf"] = list(self.duplicate_of)
        return body


@dataclass(frozen=True, slots=True)
class Deleted:
    """A stored source no longer in the tree, and the documents deleted with it."""

    source_id: str
    documents: list[str]


@dataclass(frozen=True, slots=True)
class Failed:
    """A file that could not be read or written; the store keeps what it had for it."""

    path: str
    code: str
    message: str


@dataclass(slots=True)
class Report:
    """What a sync or an ingest did (or, in a dry run, would do)."""

    store: str
    root: str
    dry_run: bool = False
    prune: bool = False
    added: list[Written] = field(default_factory=list)
    updated: list[Written] = field(default_factory=list)
    unchanged: list[Written] = field(default_factory=list)
    deleted: list[Deleted] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    failed: list[Failed] = field(default_factory=list)
    documents_written: int = 0
    chunks_written: int = 0
    # Stored sources no longer in the tree, kept because `prune` was not given (sync only).
    not_in_tree: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The `--json` report (docs/loading-documents.md, "Loading documents")."""
        return {
            "store": self.store,
            "root": self.root,
            "dryRun": self.dry_run,
            "prune": self.prune,
            "added": [w.to_json() for w in self.added],
            "updated": [w.to_json() for w in self.updated],
            "unchanged": [w.to_json() for w in self.unchanged],
            "deleted": [
                {"sourceId": d.source_id} | ({} if self.dry_run else {"documents": d.documents})
                for d in self.deleted
            ],
            "skipped": [{"path": s.path, "reason": s.reason} for s in self.skipped],
            "failed": [{"path": f.path, "code": f.code, "message": f.message} for f in self.failed],
            "notInTree": list(self.not_in_tree),
            "totals": {
                "added": len(self.added),
                "updated": len(self.updated),
                "unchanged": len(self.unchanged),
                "deleted": len(self.deleted),
                "skipped": len(self.skipped),
                "failed": len(self.failed),
                "documentsWritten": self.documents_written,
                "chunksWritten": self.chunks_written,
                "documentsDeleted": sum(len(d.documents) for d in self.deleted),
                "notInTree": len(self.not_in_tree),
            },
        }

    def lines(self) -> list[str]:
        """The report for people: every file skipped, failed, deleted or holding the same content as stored
        documents, then one summary line."""
        lines: list[str] = []
        if self.dry_run:
            lines += [f"would add     {w.path}" for w in self.added]
            lines += [f"would update  {w.path}" for w in self.updated]
        if self.dry_run:
            lines += [f"would delete  {d.source_id}" for d in self.deleted]
        else:
            lines += [
                f"deleted       {d.source_id} ({_plural(len(d.documents), 'document')})" for d in self.deleted
            ]
        lines += [
            f"duplicate     {w.path}: same content as {', '.join(w.duplicate_of)}"
            for w in (*self.added, *self.updated, *self.unchanged)
            if w.duplicate_of
        ]
        lines += [f"skipped       {s.path}: {s.reason}" for s in self.skipped]
        lines += [f"failed        {f.path}: [{f.code}] {f.message}" for f in self.failed]
        if self.not_in_tree:
            lines.append(self._gone_line())
        counts = (
            f"added {len(self.added)}, updated {len(self.updated)}, unchanged {len(self.unchanged)}, "
            f"deleted {len(self.deleted)}, skipped {len(self.skipped)}, failed {len(self.failed)}"
        )
        if self.dry_run:
            lines.append(f"dry run, nothing written to store '{self.store}': {counts}")
        else:
            written = _plural(self.documents_written, "document")
            chunks = _plural(self.chunks_written, "chunk")
            lines.append(f"{counts}: {written} written ({chunks}) in store '{self.store}'")
        return lines

    def _gone_line(self) -> str:
        count = len(self.not_in_tree)
        where = "under the prefix" if self.root.startswith("s3://") else "in the folder"
        named = ", ".join(self.not_in_tree[:GONE_NAMED])
        more = f" and {count - GONE_NAMED} more" if count > GONE_NAMED else ""
        are, them = ("is", "it") if count == 1 else ("are", "them")
        return f"{_plural(count, 'stored document')} {are} not {where}; --prune removes {them}: {named}{more}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")
