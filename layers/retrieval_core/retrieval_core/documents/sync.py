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
from retrieval_core.documents.sync_report import Deleted, Failed, Report, Written
from retrieval_core.exceptions import RetrievalError, SourceReadError, StoreNotFoundError
from retrieval_core.parsers.tables import DEFAULT_TABLE_OPTIONS, TableOptions


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
            return sha256_hex(tree.read(entry.location))

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
    line = Written(
        entry.path,
        entry.source_id,
        len(result.documents),
        result.chunk_count,
        duplicate_of=tuple(result.duplicate_of),
    )
    {"created": report.added, "updated": report.updated, "unchanged": report.unchanged}[result.status].append(
        line
    )
