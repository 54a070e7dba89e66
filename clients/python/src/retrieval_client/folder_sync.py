"""Syncing a local folder into a store through the documents API: what to send, and the report."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# (files done, files in all, the document id just done)
Progress = Callable[[int, int, str], None]


@dataclass
class SyncReport:
    """What a folder sync did: document ids by outcome, and each failure with its error."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    failed: dict[str, Exception] = field(default_factory=dict)

    def record(self, document_id: str, status: str) -> None:
        """Note a write's answer (`created`, `updated` or `unchanged`)."""
        getattr(self, status).append(document_id)


def local_files(folder: str | Path, prefix: str) -> dict[str, Path]:
    """Document id (`prefix` + the path under `folder`, with `/`) -> file, for every file not hidden."""
    root = Path(folder)
    if not root.is_dir():
        raise NotADirectoryError(f"{root} is not a folder")
    files = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if path.is_file() and not any(part.startswith(".") for part in relative.parts):
            files[prefix + relative.as_posix()] = path
    return files


def is_stored(data: bytes, stored: dict[str, Any] | None) -> bool:
    """Whether the store holds these bytes as this document already (then nothing is sent)."""
    return (
        stored is not None
        and stored.get("source") == stored.get("documentId")
        and stored.get("contentSha256") == hashlib.sha256(data).hexdigest()
    )


def sources_gone(remote: Iterable[dict[str, Any]], files: dict[str, Path], prefix: str) -> list[str]:
    """The sources under `prefix` of the store's documents that the folder no longer has."""
    return sorted(
        {str(doc["source"]) for doc in remote if str(doc["source"]).startswith(prefix)} - set(files)
    )
