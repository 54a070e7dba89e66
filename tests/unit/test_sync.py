"""The reader of `retrieval sync` / `ingest` (folders, single files), the reconcile plan and the report."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from retrieval_core.documents.file_sources import (
    Entry,
    FileTree,
    FolderTree,
    Listing,
    Skipped,
    open_tree,
    single_file_id,
)
from retrieval_core.documents.prepare import sha256_hex as sha256
from retrieval_core.documents.sync import make_plan
from retrieval_core.documents.sync_report import Deleted, Failed, Report, Written
from retrieval_core.exceptions import InvalidRequestError, SourceReadError


def write(path: Path, text: str = "some text") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    return path


def test_folder_ids_are_posix_paths_relative_to_the_root_whatever_the_suffix(tmp_path: Path) -> None:
    for name in ("b/Guide.MD", "a.pdf", "b/c/page.HTML", "notes.txt", "logo.png", "README"):
        write(tmp_path / name)
    listing = FolderTree(tmp_path).listing()
    assert [e.source_id for e in listing.entries] == [
        "README",
        "a.pdf",
        "b/Guide.MD",
        "b/c/page.HTML",
        "logo.png",
        "notes.txt",
    ]
    assert listing.skipped == []  # the parsers, not the suffix, decide what is readable
    guide = next(e for e in listing.entries if e.source_id == "b/Guide.MD")
    assert (guide.name, guide.path, guide.size) == ("Guide.MD", "b/Guide.MD", len("some text"))
    assert FolderTree(tmp_path).read(guide.location) == b"some text"


def test_the_same_tree_gives_the_same_ids_from_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "docs" / "x" / "readme.md")
    monkeypatch.chdir(tmp_path)
    here = [e.source_id for e in open_tree("docs").listing().entries]
    monkeypatch.chdir(tmp_path / "docs" / "x")
    there = [e.source_id for e in open_tree(str(tmp_path / "docs")).listing().entries]
    assert here == there == ["x/readme.md"]


def test_hidden_files_and_folders_are_skipped_and_listed(tmp_path: Path) -> None:
    write(tmp_path / "kept.md")
    write(tmp_path / ".env")
    write(tmp_path / ".git" / "config")
    write(tmp_path / "sub" / ".DS_Store")
    listing = FolderTree(tmp_path).listing()
    assert [e.source_id for e in listing.entries] == ["kept.md"]
    assert listing.skipped == [
        Skipped(".env", "hidden file"),
        Skipped(".git", "hidden folder"),  # not entered: its files are not listed one by one
        Skipped("sub/.DS_Store", "hidden file"),
    ]


def test_symbolic_links_are_followed_under_their_own_path_loops_and_broken_links_skipped(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    outside = write(tmp_path / "elsewhere" / "shared.md", "shared")
    write(root / "a" / "page.md")
    os.symlink(outside, root / "link.md")
    os.symlink(outside.parent, root / "linked-folder")
    os.symlink(root, root / "a" / "loop")
    os.symlink(tmp_path / "missing.md", root / "broken.md")
    listing = FolderTree(root).listing()
    assert [e.source_id for e in listing.entries] == ["a/page.md", "link.md", "linked-folder/shared.md"]
    assert listing.skipped == [
        Skipped("a/loop", "symbolic link to a folder above it (a loop)"),
        Skipped("broken.md", "broken symbolic link"),
    ]
    link = next(e for e in listing.entries if e.source_id == "link.md")
    assert FolderTree(root).read(link.location) == b"shared"


def test_sidecars_travel_with_their_file_and_orphans_are_skipped(tmp_path: Path) -> None:
    write(tmp_path / "a.pdf")
    write(tmp_path / "a.pdf.metadata.json", '{"metadataAttributes": {"year": 2024}}')
    write(tmp_path / "gone.md.metadata.json", "{}")
    listing = FolderTree(tmp_path).listing()
    assert [(e.source_id, e.sidecar) for e in listing.entries] == [
        ("a.pdf", str(tmp_path / "a.pdf.metadata.json"))
    ]
    assert listing.skipped == [Skipped("gone.md.metadata.json", "metadata sidecar without its file gone.md")]


def test_prefix_goes_before_every_id_but_not_the_path(tmp_path: Path) -> None:
    write(tmp_path / "a.md")
    (entry,) = open_tree(str(tmp_path), prefix="handbook/").listing().entries
    assert (entry.path, entry.source_id) == ("a.md", "handbook/a.md")


def test_a_single_file_is_named_by_its_path_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "x" / "readme.md")
    write(tmp_path / "y" / "readme.md")
    write(tmp_path / "y" / "readme.md.metadata.json", '{"metadataAttributes": {}}')
    monkeypatch.chdir(tmp_path)
    ids = [open_tree(p).listing().entries[0].source_id for p in ("x/readme.md", "./y/readme.md")]
    assert ids == ["x/readme.md", "y/readme.md"]
    monkeypatch.chdir(tmp_path / "x")
    assert open_tree("readme.md").listing().entries[0].source_id == "readme.md"
    assert open_tree("../y/readme.md").listing().entries[0].source_id == (tmp_path / "y/readme.md").as_posix()
    assert open_tree("readme.md", source_id="guides/readme").listing().entries[0].source_id == "guides/readme"
    (entry,) = FileTree(tmp_path / "y" / "readme.md", "r").listing().entries
    assert entry.sidecar == str(tmp_path / "y" / "readme.md.metadata.json")
    assert single_file_id(tmp_path / "a" / "b.md", cwd=tmp_path) == "a/b.md"


def test_open_tree_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequestError, match="no such file or folder"):
        open_tree(str(tmp_path / "absent"))
    with pytest.raises(InvalidRequestError, match="--id"):
        open_tree(str(tmp_path), source_id="x")
    with pytest.raises(InvalidRequestError, match="s3://bucket/prefix"):
        open_tree("s3:///key")
    with pytest.raises(SourceReadError, match="cannot read"):
        FolderTree(tmp_path).read(str(tmp_path / "absent"))


def entry(source_id: str) -> Entry:
    return Entry(source_id, source_id, source_id.rsplit("/", 1)[-1], source_id, 1)


def test_plan_adds_updates_and_leaves_unchanged_by_content_hash() -> None:
    contents = {"same.md": b"same", "changed.md": b"new", "new.md": b"n", "resettled.md": b"r"}
    stored = {"same.md": sha256(b"same"), "changed.md": sha256(b"old"), "resettled.md": "", "api-doc": "h"}
    asked: list[str] = []

    def digest(e: Entry) -> str:
        asked.append(e.source_id)
        return sha256(contents[e.source_id])

    listing = Listing([entry(i) for i in sorted(contents)], [Skipped("x.png", "unsupported")])
    plan = make_plan(listing, stored, digest)
    assert [e.source_id for e in plan.added] == ["new.md"]
    assert [e.source_id for e in plan.updated] == ["changed.md", "resettled.md"]  # "": other settings
    assert [e.source_id for e in plan.unchanged] == ["same.md"]
    assert plan.deleted == []  # without prune nothing is deleted, not even documents of other writers
    assert plan.skipped == [Skipped("x.png", "unsupported")]
    assert sorted(asked) == ["changed.md", "same.md"]  # new files are not read to plan


def test_prune_deletes_every_stored_source_missing_from_the_tree_within_the_prefix() -> None:
    stored = {"docs/a.md": "h", "docs/gone.md": "h", "api-written": "h", "other/b.md": "h"}
    listing = Listing([entry("docs/a.md")], [])
    plan = make_plan(listing, stored, lambda e: "h", prune=True)
    assert plan.deleted == ["api-written", "docs/gone.md", "other/b.md"]
    assert make_plan(listing, stored, lambda e: "h", prune=True, prefix="docs/").deleted == ["docs/gone.md"]


def test_prune_spares_files_that_are_there_but_skipped_and_folders_it_could_not_list() -> None:
    stored = {"a.md": "h", ".env": "h", "locked/x.md": "h", "locked/deep/y.md": "h", "gone.md": "h"}
    skipped = [
        Skipped(".env", "hidden file"),
        Skipped("locked", "cannot list this folder: Permission denied"),
    ]
    plan = make_plan(Listing([entry("a.md")], skipped), stored, lambda e: "h", prune=True)
    assert plan.deleted == ["gone.md"]
    with_prefix = {"t/a.md": "h", "t/locked/x.md": "h", "t/gone.md": "h"}
    listing = Listing([Entry("a.md", "t/a.md", "a.md", "a.md", 1)], skipped)
    assert make_plan(listing, with_prefix, lambda e: "h", prune=True, prefix="t/").deleted == ["t/gone.md"]


def test_without_prune_the_stored_sources_gone_from_the_tree_are_named_not_deleted() -> None:
    stored = {"a.md": "h", "gone.md": "h", "api-written": "h"}
    plan = make_plan(Listing([entry("a.md")], []), stored, lambda e: "h")
    assert (plan.deleted, plan.gone) == ([], ["api-written", "gone.md"])
    report = Report("docs", "/data/docs", not_in_tree=plan.gone)
    assert report.lines()[-2] == (
        "2 stored documents are not in the folder; --prune removes them: api-written, gone.md"
    )
    many = Report("docs", "s3://bucket/docs", not_in_tree=[f"d{n}.md" for n in range(8)])
    assert many.lines()[-2] == (
        "8 stored documents are not under the prefix; --prune removes them: "
        "d0.md, d1.md, d2.md, d3.md, d4.md and 3 more"
    )
    assert many.to_json()["totals"]["notInTree"] == 8


def test_plan_of_a_missing_store_adds_everything_and_deletes_nothing() -> None:
    plan = make_plan(Listing([entry("a.md")], []), None, lambda e: pytest.fail("no hash needed"), prune=True)
    assert ([e.source_id for e in plan.added], plan.deleted, plan.stored) == (["a.md"], [], None)


def test_a_file_unreadable_while_planning_fails_and_is_not_pruned() -> None:
    def digest(e: Entry) -> str:
        raise SourceReadError("cannot read a.md: Permission denied")

    plan = make_plan(Listing([entry("a.md")], []), {"a.md": "h"}, digest, prune=True)
    assert plan.failed == [Failed("a.md", "source_unreadable", "cannot read a.md: Permission denied")]
    assert (plan.updated, plan.unchanged, plan.deleted) == ([], [], [])


def test_report_json_shape() -> None:
    report = Report("docs", "/data/docs", prune=True)
    report.added.append(Written("a.md", "a.md", 1, 3))
    report.updated.append(Written("b.md", "b.md", 1, 0, metadata_only=True))
    report.unchanged.append(Written("c.md", "c.md", 1, 2))
    report.deleted.append(Deleted("old.md", ["old.md"]))
    report.skipped.append(Skipped("logo.png", "cannot read content of type 'image/png'"))
    report.failed.append(
        Failed("bad.pdf", "unreadable_document", "cannot read this application/pdf document")
    )
    report.documents_written, report.chunks_written = 1, 3
    assert report.to_json() == {
        "store": "docs",
        "root": "/data/docs",
        "dryRun": False,
        "prune": True,
        "added": [{"path": "a.md", "sourceId": "a.md", "documents": 1, "chunks": 3}],
        "updated": [{"path": "b.md", "sourceId": "b.md", "documents": 1, "chunks": 0, "metadataOnly": True}],
        "unchanged": [{"path": "c.md", "sourceId": "c.md", "documents": 1, "chunks": 2}],
        "deleted": [{"sourceId": "old.md", "documents": ["old.md"]}],
        "skipped": [{"path": "logo.png", "reason": "cannot read content of type 'image/png'"}],
        "failed": [
            {
                "path": "bad.pdf",
                "code": "unreadable_document",
                "message": "cannot read this application/pdf document",
            }
        ],
        "notInTree": [],
        "totals": {
            "added": 1,
            "updated": 1,
            "unchanged": 1,
            "deleted": 1,
            "skipped": 1,
            "failed": 1,
            "documentsWritten": 1,
            "chunksWritten": 3,
            "documentsDeleted": 1,
            "notInTree": 0,
        },
    }
    lines = report.lines()
    assert "skipped       logo.png: cannot read content of type 'image/png'" in lines
    assert "failed        bad.pdf: [unreadable_document] cannot read this application/pdf document" in lines
    assert "deleted       old.md (1 document)" in lines
    assert lines[-1] == (
        "added 1, updated 1, unchanged 1, deleted 1, skipped 1, failed 1: "
        "1 document written (3 chunks) in store 'docs'"
    )


def test_dry_run_report_lists_the_plan_per_file() -> None:
    report = Report(
        "docs", "/d", dry_run=True, added=[Written("a.md", "a.md")], deleted=[Deleted("z.md", [])]
    )
    assert report.to_json()["added"] == [{"path": "a.md", "sourceId": "a.md"}]
    assert report.to_json()["deleted"] == [{"sourceId": "z.md"}]
    assert report.lines() == [
        "would add     a.md",
        "would delete  z.md",
        "dry run, nothing written to store 'docs': "
        "added 1, updated 0, unchanged 0, deleted 1, skipped 0, failed 0",
    ]
