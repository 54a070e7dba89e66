"""The files `retrieval sync` and `retrieval ingest` read: a local folder, one local file, or an S3 prefix.

A tree lists its files as `Entry`s, each with the source id it is stored under, and reads their bytes.
Ids are the file's path relative to the root given, in POSIX form, so the same tree always gives the
same ids. `<file>.metadata.json` sidecars (Amazon Bedrock's `{"metadataAttributes": {...}}`) are not
sources: they travel with the file they name.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from retrieval_core.clients.aws import AwsClientOptions, aws_client
from retrieval_core.documents.s3_events import SIDECAR_SUFFIX
from retrieval_core.exceptions import InvalidRequestError, SourceReadError

# Enough to tell a file's format from its first bytes (the parsers sniff as much).
HEAD_BYTES = 8192


@dataclass(frozen=True, slots=True)
class Entry:
    """A file of the tree: where it is, the source id it is stored under, its sidecar if any."""

    path: str  # relative to the root (a single file: as given); what reports show
    source_id: str
    name: str  # the file name: its suffix helps detection, and it becomes `fileName` metadata
    location: str  # what `read` takes: a filesystem path or an S3 key
    size: int
    sidecar: str | None = None  # location of `<file>.metadata.json`


@dataclass(frozen=True, slots=True)
class Skipped:
    """A file that is not read, and why."""

    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class Listing:
    """What a tree holds: the files to read, and what was passed over."""

    entries: list[Entry]
    skipped: list[Skipped]


class Tree(Protocol):
    """A root to read sources from."""

    @property
    def root(self) -> str:
        """The root as the user gave it."""
        ...

    def listing(self) -> Listing:
        """Every file under the root, in id order."""
        ...

    def read(self, location: str, limit: int | None = None) -> bytes:
        """The file's bytes (the first `limit` only, if given). Raises SourceReadError."""
        ...


def open_tree(root: str, prefix: str = "", source_id: str | None = None) -> Tree:
    """The tree at `root`: `s3://bucket/prefix`, a folder, or a single file.

    Every id starts with `prefix`. A single file's id is `source_id` if given, else its path relative to
    the current directory (or its absolute path when it lies outside), so `x/readme.md` and
    `y/readme.md` never collide.
    """
    if root.startswith("s3://"):
        if source_id is not None:
            raise InvalidRequestError("--id names a single local file; an s3:// root is read as a prefix")
        bucket, _, key_prefix = root[len("s3://") :].partition("/")
        if not bucket:
            raise InvalidRequestError(f"expected s3://bucket/prefix, got {root!r}")
        return S3Tree(bucket, key_prefix, prefix)
    path = Path(root)
    if path.is_dir():
        if source_id is not None:
            raise InvalidRequestError("--id names a single file; a folder's files are named by their paths")
        return FolderTree(path, prefix)
    if path.is_file():
        return FileTree(path, prefix + (source_id or single_file_id(path)))
    raise InvalidRequestError(f"no such file or folder: {root}")


def single_file_id(path: Path, cwd: Path | None = None) -> str:
    """`path` relative to `cwd` (default: the current directory) in POSIX form; absolute when outside it."""
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(Path(os.path.abspath(cwd or Path.cwd()))).as_posix()
    except ValueError:
        return absolute.as_posix()


def sidecar_target(name: str) -> str | None:
    """The file a sidecar's name is for (`a.pdf` for `a.pdf.metadata.json`); None when not a sidecar."""
    if name.endswith(SIDECAR_SUFFIX) and len(name) > len(SIDECAR_SUFFIX):
        return name[: -len(SIDECAR_SUFFIX)]
    return None


def pair_sidecars(files: list[tuple[str, str, int]]) -> Listing:
    """Entries from `(relative path, location, size)` triples, sidecars attached to their files.

    A sidecar whose file is absent is skipped, and said so.
    """
    by_path = {path: (location, size) for path, location, size in files}
    entries: list[Entry] = []
    skipped: list[Skipped] = []
    for path, location, size in sorted(files):
        target = sidecar_target(path)
        if target is not None and target in by_path:
            continue  # read with its file
        if target is not None:
            skipped.append(Skipped(path, f"metadata sidecar without its file {target}"))
            continue
        sidecar = by_path.get(path + SIDECAR_SUFFIX)
        entries.append(
            Entry(path, path, path.rsplit("/", 1)[-1], location, size, sidecar[0] if sidecar else None)
        )
    return Listing(entries, skipped)


def with_prefix(listing: Listing, prefix: str) -> Listing:
    """The same listing with every source id starting with `prefix`."""
    if not prefix:
        return listing
    entries = [
        Entry(e.path, prefix + e.source_id, e.name, e.location, e.size, e.sidecar) for e in listing.entries
    ]
    return Listing(entries, listing.skipped)


class FolderTree:
    """A local folder, walked recursively.

    Hidden files and folders (a name starting with '.') are skipped and listed as such; a hidden
    folder is not entered. Symbolic links are followed, to files and folders alike, and read as
    if they were what they point to, under the link's own path; a broken link, or a link back to a
    folder being walked (a loop), is skipped. Anything but a regular file (a FIFO, a socket) is skipped.
    """

    def __init__(self, folder: Path, prefix: str = "") -> None:
        self.folder = folder
        self.prefix = prefix

    @property
    def root(self) -> str:
        return str(self.folder)

    def listing(self) -> Listing:
        files: list[tuple[str, str, int]] = []
        skipped: list[Skipped] = []
        self._walk(self.folder, "", {os.path.realpath(self.folder)}, files, skipped)
        listing = pair_sidecars(files)
        return with_prefix(
            Listing(listing.entries, sorted(skipped + listing.skipped, key=_by_path)), self.prefix
        )

    def _walk(
        self,
        folder: Path,
        relative: str,
        ancestors: set[str],
        files: list[tuple[str, str, int]],
        skipped: list[Skipped],
    ) -> None:
        try:
            children = sorted(os.scandir(folder), key=lambda child: child.name)
        except OSError as exc:
            if not relative:  # nothing listed would read as "everything was deleted" to --prune
                raise SourceReadError(f"cannot list {folder}: {exc.strerror or exc}") from exc
            skipped.append(Skipped(relative.rstrip("/"), f"cannot list this folder: {exc.strerror or exc}"))
            return
        for child in children:
            path = f"{relative}{child.name}"
            if child.name.startswith("."):
                kind = "folder" if child.is_dir() else "file"
                skipped.append(Skipped(path, f"hidden {kind}"))
                continue
            try:
                info = os.stat(child.path)  # follows symbolic links
            except OSError:
                reason = "broken symbolic link" if child.is_symlink() else "cannot read its attributes"
                skipped.append(Skipped(path, reason))
                continue
            if stat.S_ISDIR(info.st_mode):
                real = os.path.realpath(child.path)
                if real in ancestors:
                    skipped.append(Skipped(path, "symbolic link to a folder above it (a loop)"))
                    continue
                self._walk(Path(child.path), path + "/", ancestors | {real}, files, skipped)
            elif stat.S_ISREG(info.st_mode):
                files.append((path, child.path, info.st_size))
            else:
                skipped.append(Skipped(path, "not a regular file"))

    def read(self, location: str, limit: int | None = None) -> bytes:
        return _read_local(location, limit)


class FileTree:
    """One local file, stored under `source_id`. Its sidecar is `<file>.metadata.json` beside it."""

    def __init__(self, path: Path, source_id: str) -> None:
        self.path = path
        self.source_id = source_id

    @property
    def root(self) -> str:
        return str(self.path)

    def listing(self) -> Listing:
        sidecar = self.path.with_name(self.path.name + SIDECAR_SUFFIX)
        entry = Entry(
            str(self.path),
            self.source_id,
            self.path.name,
            str(self.path),
            self.path.stat().st_size,
            str(sidecar) if sidecar.is_file() else None,
        )
        return Listing([entry], [])

    def read(self, location: str, limit: int | None = None) -> bytes:
        return _read_local(location, limit)


class S3Tree:
    """The objects under an S3 prefix, read with ListObjectsV2 (paginated) and GetObject.

    The prefix is a folder: `s3://b/docs` reads the keys under `docs/`, and ids are keys relative to
    it. Keys ending in '/' (folder markers) are passed over. Nothing is hidden in S3: every object is a
    file. The endpoint is S3_ENDPOINT_URL when set; credentials and region are boto3's usual ones.
    """

    def __init__(self, bucket: str, key_prefix: str, prefix: str = "", client: Any = None) -> None:
        self.bucket = bucket
        self.key_prefix = key_prefix if not key_prefix or key_prefix.endswith("/") else key_prefix + "/"
        self.prefix = prefix
        self._client = client

    @property
    def root(self) -> str:
        return f"s3://{self.bucket}/{self.key_prefix}"

    def listing(self) -> Listing:
        files: list[tuple[str, str, int]] = []
        pages = self._s3_call(
            "list",
            lambda: list(
                self._s3()
                .get_paginator("list_objects_v2")
                .paginate(Bucket=self.bucket, Prefix=self.key_prefix)
            ),
        )
        for page in pages:
            for item in page.get("Contents", []):
                key = str(item["Key"])
                if key.endswith("/"):
                    continue
                files.append((key[len(self.key_prefix) :], key, int(item.get("Size") or 0)))
        return with_prefix(pair_sidecars(files), self.prefix)

    def read(self, location: str, limit: int | None = None) -> bytes:
        params: dict[str, Any] = {"Bucket": self.bucket, "Key": location}
        if limit is not None:
            params["Range"] = f"bytes=0-{limit - 1}"
        response = self._s3_call(location, lambda: self._s3().get_object(**params))
        body = response["Body"]
        try:
            data: bytes = self._s3_call(location, body.read)
        finally:
            body.close()
        return data

    def _s3(self) -> Any:
        if self._client is None:
            from retrieval_core.settings import get_settings

            self._client = aws_client("s3", AwsClientOptions(endpoint_url=get_settings().s3_endpoint_url))
        return self._client

    def _s3_call(self, what: str, call: Callable[[], Any]) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        where = self.root if what == "list" else f"s3://{self.bucket}/{what}"
        try:
            return call()
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", "")) or "ClientError"
            action = "list" if what == "list" else "read"
            raise SourceReadError(f"cannot {action} {where}: {code}", {"awsErrorCode": code}) from exc
        except BotoCoreError as exc:
            raise SourceReadError(
                f"cannot reach S3 for {where}: {type(exc).__name__}", {"awsErrorCode": type(exc).__name__}
            ) from exc


def _read_local(location: str, limit: int | None) -> bytes:
    try:
        with open(location, "rb") as file:
            return file.read() if limit is None else file.read(limit)
    except OSError as exc:
        raise SourceReadError(f"cannot read {location}: {exc.strerror or exc}") from exc


def _by_path(skipped: Skipped) -> str:
    return skipped.path
