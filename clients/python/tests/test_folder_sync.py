"""sync_folder makes a store's documents those of a local folder, sending only what changed."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from retrieval_client import AsyncRetrievalClient, RetrievalClient


def write_folder(root: Path) -> None:
    (root / "policies").mkdir(parents=True)
    (root / "policies" / "travel.md").write_text("# Travel\n\nBook flights 14 days ahead.\n")
    (root / "policies" / "visitors.txt").write_text("Visitors sign in at the front desk.\n")
    (root / "people.csv").write_text("id,name\np1,Ada\np2,Grace\n")
    (root / ".hidden").write_text("not a document\n")


def test_a_folder_is_synced_then_only_changes_are_sent(
    url: str, admin_key: str, store: str, tmp_path: Path
) -> None:
    write_folder(tmp_path)
    sent: list[str] = []
    http = httpx.Client(event_hooks={"request": [lambda request: sent.append(request.method)]})
    progress: list[tuple[int, int, str]] = []
    with RetrievalClient(url, admin_key, http_client=http) as client:
        first = client.sync_folder(store, tmp_path, prefix="kb/", on_progress=lambda *p: progress.append(p))
        assert sorted(first.created) == ["kb/people.csv", "kb/policies/travel.md", "kb/policies/visitors.txt"]
        assert not first.failed and [p[:2] for p in progress] == [(1, 3), (2, 3), (3, 3)]

        sent.clear()
        again = client.sync_folder(store, tmp_path, prefix="kb/")
        # The two single-file documents are known by their hash and not sent; the CSV's records are
        # stored under their own ids, so the file goes again and the service answers unchanged.
        assert sorted(again.unchanged) == sorted(first.created) and sent.count("PUT") == 1

        (tmp_path / "policies" / "travel.md").write_text("# Travel\n\nBook flights 21 days ahead.\n")
        (tmp_path / "people.csv").unlink()
        pruned = client.sync_folder(store, tmp_path, prefix="kb/", prune=True)
        assert pruned.updated == ["kb/policies/travel.md"] and pruned.deleted == ["kb/people.csv"]
        assert [d["documentId"] for d in client.iter_documents(store)] == [
            "kb/policies/travel.md",
            "kb/policies/visitors.txt",
        ]
    http.close()


@pytest.mark.anyio
async def test_the_async_client_syncs_a_folder_too(
    url: str, admin_key: str, store: str, tmp_path: Path
) -> None:
    write_folder(tmp_path)
    async with AsyncRetrievalClient(url, admin_key) as client:
        report = await client.sync_folder(store, tmp_path)
        assert sorted(report.created) == ["people.csv", "policies/travel.md", "policies/visitors.txt"]
        assert len((await client.sync_folder(store, tmp_path)).unchanged) == 3
