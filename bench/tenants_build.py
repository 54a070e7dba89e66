"""Building the stores of bench/tenants.py through the production writer, and the ETA of growing them.

The three measured stores are written with tests/writing.py (`ensure_store`, `write_documents`); filler
stores with `DocumentService.write_sources`, one call per store that creates it in the transaction of its
first write (as S3 sync and the CLI create a store), all on the pooled connections of one service.
What was built, and how long it took, is kept in `state.json` beside the database, so a run with
`--reuse` goes on where the last one stopped.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from bench.tenants_data import (
    CHUNK_OVERLAP,
    CHUNK_SIZE,
    BaseChunk,
    Record,
    TableEmbedder,
    filler_documents,
    filler_offsets,
    large_documents,
    medium_documents,
    prepared_texts,
    record_document,
)
from tests.writing import TextDocument, document_service, ensure_store, write_documents

MEASURED = {"T": "tenants-t", "S": "tenants-s", "L": "tenants-l"}
BLOCK = 100  # filler stores timed together (progress, ETA)
T = TypeVar("T")
GIVE_UP_AFTER = 200  # consecutive failed filler stores: growing stops there


def filler_name(index: int) -> str:
    """The name of filler store `index` (from 1); zero-padded, so names sort by index."""
    return f"tenant-{index:06d}"


class State:
    """What has been built (state.json): measured stores, the fillers written, their build times."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
        self.data.setdefault("measured", {})
        self.data.setdefault("fillers", 0)
        self.data.setdefault("growth", [])

    def save(self) -> None:
        self.path.write_text(json.dumps(self.data, indent=1))


def build_measured(
    service: Any,
    embedder: TableEmbedder,
    records: dict[str, list[Record]],
    chunks: list[BaseChunk],
    sizes: dict[str, int],
    state: State,
) -> None:
    """Write T (3 documents), S (scifact, `sizes["S"]` chunks) and L (`sizes["L"]` chunks) unless built."""
    sources: dict[str, Callable[[], Iterable[tuple[TextDocument, int | None]]]] = {
        "T": lambda: ((record_document(r, r.id, n), None) for n, r in enumerate(records["msmarco-5k"][:3])),
        "S": lambda: ((d, None) for d in medium_documents(records["scifact"], sizes["S"])),
        "L": lambda: large_documents(chunks, sizes["L"]),
    }
    for key, name in MEASURED.items():
        wanted = {"chunks": sizes.get(key)}
        done = state.data["measured"].get(key)
        if done is not None and done.get("asked") == wanted:
            continue
        print(f"building {key} ({name}) through the writer ...", flush=True)
        started = time.perf_counter()
        ensure_store(service, name, embedder)
        written = write_measured(service, embedder, name, sources[key]())
        seconds = time.perf_counter() - started
        state.data["measured"][key] = {"asked": wanted, "seconds": round(seconds, 1), **written}
        state.save()
        print(f"built {key}: {written} in {seconds:.0f} s", flush=True)


def write_measured(
    service: Any, embedder: TableEmbedder, name: str, documents: Iterable[tuple[TextDocument, int | None]]
) -> dict[str, int]:
    """Write `documents` in batches of 2,000; a document with a parent row is embedded as its variant."""
    counts: Counter[str] = Counter()
    batch: list[TextDocument] = []

    def flush() -> None:
        report = write_documents(
            service, name, batch, CHUNK_SIZE, CHUNK_OVERLAP, embedder=embedder, per_write=len(batch)
        )
        counts["documents"] += report.documents_written + report.documents_unchanged
        counts["chunks"] += report.chunks_written
        counts["unchanged"] += report.documents_unchanged
        embedder.forget()
        batch.clear()
        if counts["documents"] % 20_000 == 0:
            print(f"  {name}: {counts['documents']:,} documents", flush=True)

    for document, parent in documents:
        if parent is not None:
            for text in prepared_texts(document):
                embedder.derive(text, parent)
        batch.append(document)
        if len(batch) == 2000:
            flush()
    if batch:
        flush()
    return dict(counts)


@dataclass
class Growth:
    """One growth step of the fillers: stores asked and made, seconds, errors, and per-block rates."""

    start: int
    target: int
    made: int = 0
    seconds: float = 0.0
    errors: Counter[str] = field(default_factory=Counter)
    blocks: list[tuple[int, float]] = field(default_factory=list)  # (fillers at block end, s per store)
    stopped: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "from": self.start,
            "to": self.target,
            "made": self.made,
            "seconds": round(self.seconds, 1),
            "errors": dict(self.errors),
            "blocks": [[n, round(s, 4)] for n, s in self.blocks],
            "stopped": self.stopped,
        }


def error_name(exc: BaseException) -> str:
    """A failure's kind: the class, and the error code of a RetrievalError."""
    code = getattr(exc, "code", None)
    return f"{type(exc).__name__} ({code})" if code else type(exc).__name__


def attempt(call: Callable[[], T], errors: Counter[str] | None, prefix: str = "") -> tuple[bool, T | None]:
    """(True, what `call` returned), or (False, None) with the failure counted in `errors` by kind."""
    try:
        return True, call()
    except Exception as exc:  # noqa: BLE001 - every failure is counted and reported; none ends the run
        if errors is not None:
            errors[prefix + error_name(exc)] += 1
        return False, None


def grow_fillers(
    service: Any, embedder: TableEmbedder, pool: Sequence[Record], target: int, state: State, writers: int
) -> Growth:
    """Write filler stores until the highest index is `target`, BLOCK at a time, printing the ETA."""
    from retrieval_core.documents.models import StoreDefinition

    writer = document_service(service, embedder, CHUNK_SIZE, CHUNK_OVERLAP)
    growth = Growth(state.data["fillers"], target)
    create = StoreDefinition()

    def write_one(item: tuple[int, int]) -> str | None:
        index, first = item
        sources = [d.source() for d in filler_documents(index, first, pool)]
        errors: Counter[str] = Counter()
        _, results = attempt(
            lambda: list(writer.write_sources(filler_name(index), sources, create=create)), errors
        )
        failed = [error_name(r) for r in results or [] if isinstance(r, Exception)]
        return next(iter(errors), None) or next(iter(failed), None)

    offsets = filler_offsets(growth.start + 1, target + 1)
    failed_in_a_row = 0
    with ThreadPoolExecutor(max_workers=writers) as pool_of_writers:
        while state.data["fillers"] < target and not growth.stopped:
            block = [next(offsets) for _ in range(min(BLOCK, target - state.data["fillers"]))]
            started = time.perf_counter()
            outcomes = list(pool_of_writers.map(write_one, block))
            took = time.perf_counter() - started
            failures = [o for o in outcomes if o is not None]
            growth.errors.update(failures)
            growth.made += len(block) - len(failures)
            failed_in_a_row = failed_in_a_row + len(failures) if len(failures) == len(block) else 0
            if failed_in_a_row >= GIVE_UP_AFTER:
                growth.stopped = f"{failed_in_a_row} stores in a row failed ({failures[-1]})"
            growth.seconds += took
            state.data["fillers"] = block[-1][0]
            growth.blocks.append((state.data["fillers"], took / len(block)))
            report_progress(growth, state.data["fillers"])
            save_growth(state, growth)
    return growth


def save_growth(state: State, growth: Growth) -> None:
    """Keep the step in state.json (replacing its own entry), so a stopped run keeps its timings."""
    steps = [s for s in state.data["growth"] if s["from"] != growth.start]
    state.data["growth"] = [*steps, growth.as_json()]
    state.save()


def report_progress(growth: Growth, fillers: int) -> None:
    if fillers % 1000 and fillers != growth.target:
        return
    per_store = growth.blocks[-1][1]
    steady, growing = eta_seconds(growth.blocks, fillers, growth.target)
    errors = sum(growth.errors.values())
    print(
        f"  fillers {fillers:,}/{growth.target:,}: {per_store * 1000:.0f} ms a store now, "
        f"{errors} failed; ETA of this step {steady / 60:.1f} min (steady) / {growing / 60:.1f} min "
        "(per-store time growing as measured)",
        flush=True,
    )


def eta_seconds(blocks: Sequence[tuple[int, float]], now: int, target: int) -> tuple[float, float]:
    """Seconds to grow from `now` to `target` fillers: at the last 1,000 stores' rate, and with the
    per-store time growing linearly in the store count as the blocks measured it (least squares)."""
    if not blocks or target <= now:
        return 0.0, 0.0
    recent = [s for n, s in blocks if n > now - 1000] or [blocks[-1][1]]
    steady = (target - now) * sum(recent) / len(recent)
    slope, intercept = linear_fit([float(n) for n, _ in blocks], [s for _, s in blocks])
    if slope <= 0:
        return steady, steady
    growing = intercept * (target - now) + slope * (target**2 - now**2) / 2
    return steady, max(steady, growing)


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Slope and intercept of the least-squares line through (xs, ys); slope 0 with fewer than 2 xs."""
    n = len(xs)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    spread = sum((x - mean_x) ** 2 for x in xs)
    if n < 2 or spread == 0:
        return 0.0, mean_y
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread
    return slope, mean_y - slope * mean_x
