"""`retrieval sync` and `retrieval ingest`: reconcile a store with a tree of files, and report it.

The plan compares each file's SHA-256 with `DocumentService.source_hashes`: a new id is added, a
different hash updated, the same hash left alone (nothing read twice, parsed or embedded). Stored sources
whose id is no longer in the tree are reported (`gone`); with `prune` they are deleted, whatever wrote
them. Sidecar metadata is applied with `put_source_metadata`, which changes metadata without
re-embedding. A dry run parses what it would write, so a file that would fail is reported failed.

Tables are read with the run's TableOptions, or their sidecar's `tableOptions`, which win; a file stored
under other options is read again, one whose sidecar names them on each run (re-embedded where changed).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from retrieval_core.db.document_status import Outcome
from retrieval_core.documents.file_sources import HEAD_BYTES, Entry, Listing, Skipped, Tree
from retrieval_core.documents.ingest_status import SKIPPING_ERRORS
from retrieval_core.documents.models import Actor, SourceInput, SourceWrite, StoreDefinition
from retrieval_core.documents.prepare import sha256_hex
from retrieval_core.documents.s3_events import SIDECAR_SUFFIX
from retrieval_core.documents.service import DocumentService
from retrieval_core.documents.sidecar import read_sidecar, read_table_options
from retrieval_core.exceptions import RetrievalError, SourceReadError, StoreNotFoundError
from retrieval_core.parsers.tables import DEFAULT_TABLE_OPTIONS, TableOptions

# How many ids of stored sources gone from the tree the report's line names.
GONE_NAMED = 5


@dataclass(frozen=True, slots=True)
class Plan:
    """What a sync will do. `stored` is None when the store does not exist yet. `gone`: the stored sources
    no longer in the tree (`deleted` with prune, else left in the store and reported)."""

    added: list[Entry]
    updated: list[Entry]
    unchanged: list[Entry]
    deleted: list[str]  # source ids
    skipped: list[Skipped]
    failed: list[Failed]
    stored: dict[str, str] | None
    gone: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Written:
    """A file added, updated or unchanged. Counts are None in a dry run (nothing was parsed)."""

    path: str
    source_id: str
    documents: int | None = None
    chunks: int | None = None
    metadata_only: bool = False  # only its sidecar changed: nothing re-embedded

    def to_json(self) -> dict[str, Any]:
        """camelCase, as every JSON the service prints."""
        body: dict[str, Any] = {"path": self.path, "sourceId": self.source_id}
        if self.documents is not None:
            body |= {"documents": self.documents, "chunks": self.chunks}
        if self.metadata_only:
            body["metadataOnly"] = True
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
        """The report for people: every file skipped, failed or deleted, then one summary line."""
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


def make_plan(
    listing: Listing,
    stored: dict[str, str] | None,
    digest: Callable[[Entry], str],
    prune: bool = False,
    prefix: str = "",
) -> Plan:
    """Sort the tree's files into added, updated and unchanged; with `prune`, the stored sources to delete.

    `digest` (SHA-256 of a file's bytes) is only asked for files already stored. Pruning only
    considers stored ids starting with `prefix`, and spares what the tree holds but passes over: a
    file that cannot be read, a skipped file, anything under a skipped folder.
    """
    added: list[Entry] = []
    updated: list[Entry] = []
    unchanged: list[Entry] = []
    failed: list[Failed] = []
    known = stored or {}
    for entry in listing.entries:
        stored_hash = known.get(entry.source_id)
        if stored_hash is None:
            added.append(entry)
        elif not stored_hash:  # made under other settings: rewrite
            updated.append(entry)
        else:
            try:
                same = digest(entry) == stored_hash
            except SourceReadError as exc:
                failed.append(Failed(entry.path, exc.code, exc.message))
                continue
            (unchanged if same else updated).append(entry)
    # A file that is there but skipped (hidden, in a folder that could not be listed) is not gone.
    present = {e.source_id for e in listing.entries} | {prefix + s.path for s in listing.skipped}
    gone = sorted(s for s in known if s.startswith(prefix) and not _within(s, present))
    return Plan(added, updated, unchanged, gone if prune else [], list(listing.skipped), failed, stored, gone)


def _within(source_id: str, present: set[str]) -> bool:
    """Whether `source_id` or a folder above it is in `present`."""
    parts = source_id.split("/")
    return any("/".join(parts[:n]) in present for n in range(len(parts), 0, -1))


def plan_sync(
    documents: DocumentService,
    store: str,
    tree: Tree,
    prune: bool = False,
    prefix: str = "",
    progress: bool = False,
    table: TableOptions = DEFAULT_TABLE_OPTIONS,
) -> Plan:
    """List the tree, read the store's source hashes (as written under `table`) and make the plan.

    A file to write whose name has no supported suffix is sniffed first (its first bytes only): one the
    parsers cannot read (an image, an archive) is skipped without being read whole.
    """
    from tqdm import tqdm

    listing = tree.listing()
    try:
        stored: dict[str, str] | None = documents.source_hashes(store, table=table)
    except StoreNotFoundError:
        stored = None
    known = sum(1 for e in listing.entries if (stored or {}).get(e.source_id))
    with tqdm(total=known, desc="compare", unit=" files", disable=not progress or not known) as bar:

        def digest(entry: Entry) -> str:
            bar.update(1)
            return sha256(tree.read(entry.location))

        plan = make_plan(listing, stored, digest, prune, prefix)
    refused = {e.source_id: reason for e in (*plan.added, *plan.updated) if (reason := _unreadable(tree, e))}
    if not refused:
        return plan
    return Plan(
        [e for e in plan.added if e.source_id not in refused],
        [e for e in plan.updated if e.source_id not in refused],
        plan.unchanged,
        plan.deleted,
        sorted(
            [
                *plan.skipped,
                *(
                    Skipped(e.path, refused[e.source_id])
                    for e in plan.added + plan.updated
                    if e.source_id in refused
                ),
            ],
            key=lambda s: s.path,
        ),
        plan.failed,
        plan.stored,
        plan.gone,
    )


def _unreadable(tree: Tree, entry: Entry) -> str | None:
    """Why the parsers cannot read `entry`, judged from its name and first bytes; None if they may."""
    from retrieval_core.parsers.detect import detect_content_type, suffix_type

    if suffix_type(entry.name) is not None:
        return None
    try:
        detect_content_type(tree.read(entry.location, HEAD_BYTES), None, entry.name)
    except SKIPPING_ERRORS as exc:
        return exc.message
    except RetrievalError:
        return None  # unreadable or corrupt: the write says so, as a failure
    return None


def planned_report(
    plan: Plan,
    tree: Tree,
    documents: DocumentService,
    store: str,
    root: str,
    prune: bool,
    progress: bool = True,
    table: TableOptions = DEFAULT_TABLE_OPTIONS,
) -> Report:
    """The report of a dry run: the plan, with each file to add or update read and parsed as its write
    would parse it (under `table`, or its sidecar's tableOptions; a corrupt file is failed, an empty one
    skipped, with the write's code and message) and its sidecar read. Nothing is embedded or written."""
    from tqdm import tqdm

    report = Report(
        store,
        root,
        dry_run=True,
        prune=prune,
        unchanged=[Written(e.path, e.source_id) for e in plan.unchanged],
        deleted=[Deleted(s, []) for s in plan.deleted],
        skipped=list(plan.skipped),
        failed=list(plan.failed),
    )
    sidecars, tables = _read_sidecars(tree, [*plan.added, *plan.updated], report)
    changes = [(report.added, e) for e in plan.added] + [(report.updated, e) for e in plan.updated]
    to_parse = [(into, e) for into, e in changes if e.source_id in sidecars]
    disabled = not progress or not to_parse
    with tqdm(total=len(to_parse), desc="parse", unit=" files", disable=disabled) as bar:
        for into, entry in to_parse:
            options = tables.get(entry.source_id) or table
            outcome = _parsed(tree, documents, entry, plan.stored or {}, options)
            if isinstance(outcome, Written):
                into.append(outcome)
            elif isinstance(outcome, Skipped):
                report.skipped.append(outcome)
            else:
                report.failed.append(outcome)
            bar.update(1)
    report.skipped.sort(key=lambda s: s.path)
    return report


def _parsed(
    tree: Tree, documents: DocumentService, entry: Entry, stored: dict[str, str], table: TableOptions
) -> Written | Skipped | Failed:
    """What writing `entry` would come to, short of embedding: its documents and chunks, or why not."""
    try:
        data = tree.read(entry.location)
        prepared = documents.read_source(SourceInput(entry.source_id, data, name=entry.name, table=table))
    except SKIPPING_ERRORS as exc:
        return Skipped(entry.path, exc.message + _kept(entry, stored))
    except RetrievalError as exc:
        return Failed(entry.path, exc.code, exc.message)
    chunks = sum(len(d.chunks) for d in prepared.documents)
    return Written(entry.path, entry.source_id, len(prepared.documents), chunks)


def _kept(entry: Entry, stored: dict[str, str]) -> str:
    return "; the version stored before is kept" if entry.source_id in stored else ""


def apply_plan(
    plan: Plan,
    tree: Tree,
    documents: DocumentService,
    report: Report,
    create: StoreDefinition,
    progress: bool = True,
    actor: Actor | None = None,
    table: TableOptions = DEFAULT_TABLE_OPTIONS,
) -> None:
    """Write the plan into `report.store`, filling `report` as it goes (so it tells how far an abort got);
    CSV and JSON Lines files are read with `table`, or with their sidecar's `tableOptions`.

    Per-file errors are recorded; errors of the whole operation (database, embedder) are raised. The
    changes are audited as `actor`.
    """
    report.skipped += plan.skipped
    report.failed += plan.failed
    sidecars, tables = _read_sidecars(tree, [*plan.added, *plan.updated, *plan.unchanged], report)
    present = [e for e in (*plan.added, *plan.updated, *plan.unchanged) if e.source_id in sidecars]
    changed: dict[str, int] = {}
    if plan.stored is not None:
        # Before the writes, so that new and changed files are written with their sidecar's metadata.
        changed = _put_sidecars(documents, report.store, present, sidecars, actor)
    reread = {e.source_id for e in plan.unchanged if (tables.get(e.source_id) or table) != table}
    to_write = [e for e in (*plan.added, *plan.updated) if e.source_id in sidecars]
    to_write += [e for e in plan.unchanged if e.source_id in reread and e.source_id in sidecars]
    compared: list[Outcome] = []  # files the plan found unchanged: their outcome is recorded here
    for entry in plan.unchanged:
        if entry.source_id not in sidecars or entry.source_id in reread:
            continue
        if changed.get(entry.source_id):
            report.updated.append(
                Written(entry.path, entry.source_id, changed[entry.source_id], 0, metadata_only=True)
            )
            compared.append(Outcome(entry.source_id, "ok", change="updated"))
        else:
            report.unchanged.append(Written(entry.path, entry.source_id))
            compared.append(Outcome(entry.source_id, "ok", change="unchanged"))
    documents.record_outcomes(report.store, compared, actor)
    options = {e.source_id: tables.get(e.source_id) or table for e in to_write}
    written = _write(tree, documents, report, to_write, plan.stored or {}, create, progress, actor, options)
    if plan.stored is None and written:
        # A new store exists only once a file is written in it; its sidecars follow the first write.
        first = [e for e in written if sidecars[e.source_id]]
        _put_sidecars(documents, report.store, first, sidecars, actor)
    for source_id in plan.deleted:
        deleted = documents.delete_source(report.store, source_id, actor=actor)
        report.deleted.append(Deleted(source_id, deleted))


def sha256(data: bytes) -> str:
    """Hex SHA-256, as `source_hashes` gives it."""
    return sha256_hex(data)


def _read_sidecars(
    tree: Tree, entries: list[Entry], report: Report
) -> tuple[dict[str, dict[str, Any] | None], dict[str, TableOptions | None]]:
    """Each entry's sidecar metadata (None: no sidecar), and the table options of those that name them.
    An entry whose sidecar is unreadable is failed and left out: writing it without its metadata would
    hide it from metadata filters."""
    sidecars: dict[str, dict[str, Any] | None] = {}
    tables: dict[str, TableOptions | None] = {}
    for entry in entries:
        if entry.sidecar is None:
            sidecars[entry.source_id] = None
            continue
        try:
            data = tree.read(entry.sidecar)
            tables[entry.source_id] = read_table_options(data)
            sidecars[entry.source_id] = read_sidecar(data)
        except RetrievalError as exc:
            report.failed.append(Failed(entry.path + SIDECAR_SUFFIX, exc.code, exc.message))
    return sidecars, tables


def _put_sidecars(
    documents: DocumentService,
    store: str,
    entries: list[Entry],
    sidecars: dict[str, dict[str, Any] | None],
    actor: Actor | None,
) -> dict[str, int]:
    """Apply each entry's sidecar (None removes one set before); documents changed, by source id."""
    return {
        e.source_id: documents.put_source_metadata(store, e.source_id, sidecars[e.source_id], actor=actor)
        for e in entries
    }


def _write(
    tree: Tree,
    documents: DocumentService,
    report: Report,
    entries: list[Entry],
    stored: dict[str, str],
    create: StoreDefinition,
    progress: bool,
    actor: Actor | None,
    tables: dict[str, TableOptions],
) -> list[Entry]:
    """Write `entries` through the service, each read with its table options; the entries written."""
    from tqdm import tqdm

    sent: deque[Entry] = deque()
    written: list[Entry] = []

    def sources() -> Iterator[SourceInput]:
        for entry in entries:
            try:
                data = tree.read(entry.location)
            except SourceReadError as exc:
                report.failed.append(Failed(entry.path, exc.code, exc.message))
                bar.update(1)
                continue
            sent.append(entry)
            yield SourceInput(entry.source_id, data, name=entry.name, table=tables[entry.source_id])

    with tqdm(
        total=len(entries),
        desc=f"sync {report.store}",
        unit=" files",
        disable=not progress or not entries,
        dynamic_ncols=True,
    ) as bar:
        for result in documents.write_sources(report.store, sources(), create=create, actor=actor):
            entry = sent.popleft()
            if isinstance(result, SourceWrite):
                written.append(entry)
                _record_write(report, entry, result)
            elif isinstance(result, SKIPPING_ERRORS):
                report.skipped.append(Skipped(entry.path, result.message + _kept(entry, stored)))
            else:
                report.failed.append(Failed(entry.path, result.code, result.message))
            bar.update(1)
            bar.set_postfix(chunks=report.chunks_written, refresh=False)
    return written


def _record_write(report: Report, entry: Entry, result: SourceWrite) -> None:
    changed = [d for d in result.documents if d.status != "unchanged"]
    report.documents_written += len(changed)
    report.chunks_written += sum(d.chunk_count for d in changed)
    line = Written(entry.path, entry.source_id, len(result.documents), result.chunk_count)
    {"created": report.added, "updated": report.updated, "unchanged": report.unchanged}[result.status].append(
        line
    )


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")
