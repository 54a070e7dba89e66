"""Grounded answers on the BEIR dev sets: `make bench-answers`; writes its block of docs/quality.md.

Each set is loaded into store `eval-<folder name>` as `make eval` loads it (bench/eval.py `load`: the
production write path, vectors from the cache under .data/vectors). Each sampled test question is asked
in process through the service's own answer path, `get_backends().answer(AnswerRequest, grant,
caller="http")` then `final_answer`, with the process-wide generator (the extractive one unless
GENERATION_PROVIDER says otherwise), the default retrieve options, the grade given and no cache.

The service's overhead is measured through the HTTP app (TestClient over `create_app()`) with a
generator that answers at once (`InstantGenerator`): client-measured wall time minus the pipeline's
retrieve and generate times, and the pipeline's total minus the same two (the service's part without
HTTP).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import EVAL_DIR, REPO, machine, percentile

if TYPE_CHECKING:
    from retrieval_core.generation.base import Generation, GenerationRequest, StreamEvent
    from retrieval_core.schemas.answer import AnswerResponse

OUT = REPO / "docs" / "quality.md"
START, END = "<!-- answers:start -->", "<!-- answers:end -->"
# Questions asked per set, at most: the first judged test queries by query id (numeric ids in numeric
# order, others in string order).
SAMPLE = 200
GRADES = (0.2, 0.4)
OVERHEAD_SET = "scifact"
OVERHEAD_REQUESTS, OVERHEAD_WARMUP = 200, 20
ANSWER = "/api/v1/rag/answer"


def id_order(query_id: str) -> tuple[bool, int, str]:
    """Sort key of query ids: numeric ids first, in numeric order, then the others in string order."""
    return (not query_id.isdigit(), int(query_id) if query_id.isdigit() else 0, query_id)


def sample_questions(
    queries: Mapping[str, str], qrels: Mapping[str, Mapping[str, int]], limit: int
) -> list[tuple[str, str]]:
    """(query id, text) of the first `limit` queries by id that have at least one relevant judgment."""
    judged = [q for q in queries if any(score > 0 for score in qrels.get(q, {}).values())]
    return [(q, queries[q]) for q in sorted(judged, key=id_order)[:limit]]


@dataclass
class SetFigures:
    """What the answers to one set's questions came to."""

    name: str
    grade: float
    questions: int = 0
    nothing_above: int = 0  # no chunk passed the grade: no model call
    citing: int = 0  # answers with at least one citation (grounded)
    citing_relevant: int = 0  # answers citing at least one document judged relevant
    sources_relevant: int = 0  # answers whose sources (given to the generator) hold a relevant document
    citations: int = 0
    dropped: int = 0
    answer_ms: list[float] = field(default_factory=list)
    generate_ms: list[float] = field(default_factory=list)  # answers whose generator was called

    def add(self, answer: AnswerResponse, relevant: set[str], wall_ms: float) -> None:
        """Count one answer; `relevant`: the document ids judged relevant to its question."""
        self.questions += 1
        pipeline = answer.pipeline
        if pipeline.ungrounded_reason == "nothing_above_threshold":
            self.nothing_above += 1
        cited = {doc for citation in answer.citations for doc in citation.document_ids}
        if answer.citations:
            self.citing += 1
            self.citing_relevant += bool(cited & relevant)
        given = {str(source.metadata.get("documentId")) for source in answer.sources}
        self.sources_relevant += bool(given & relevant)
        self.citations += len(answer.citations)
        self.dropped += pipeline.dropped_citations
        self.answer_ms.append(wall_ms)
        if pipeline.model_called:
            self.generate_ms.append(pipeline.timings_ms.generate)

    def row(self) -> dict[str, float]:
        """The table's figures: shares in percent, times in ms (NaN where nothing was measured)."""
        nan = float("nan")
        return {
            "questions": self.questions,
            "relevant_of_citing": share(self.citing_relevant, self.citing),
            "relevant_of_all": share(self.citing_relevant, self.questions),
            "sources_relevant": share(self.sources_relevant, self.questions),
            "grounded": share(self.citing, self.questions),
            "nothing_above": self.nothing_above,
            "dropped": self.dropped,
            "citations": self.citations / self.citing if self.citing else nan,
            "answer_ms": statistics.median(self.answer_ms) if self.answer_ms else nan,
            "generate_ms": statistics.median(self.generate_ms) if self.generate_ms else nan,
        }


def share(part: int, whole: int) -> float:
    """part / whole in percent (NaN when whole is 0)."""
    return 100 * part / whole if whole else float("nan")


def relevant_documents(qrels: Mapping[str, Mapping[str, int]], query_id: str) -> set[str]:
    """The documents judged relevant (score > 0) to the query."""
    return {doc for doc, score in qrels.get(query_id, {}).items() if score > 0}


def answer_set(
    name: str,
    store: str,
    questions: Sequence[tuple[str, str]],
    qrels: Mapping[str, Mapping[str, int]],
    grade: float,
) -> SetFigures:
    """Ask each question of the store through the service's answer path, in process, uncached."""
    from retrieval_core.backends.answers import final_answer
    from retrieval_core.container import get_backends
    from retrieval_core.grants import OPEN_GRANT
    from retrieval_core.schemas.answer import AnswerRequest

    backends = get_backends()
    figures = SetFigures(name, grade)
    for query_id, text in questions:
        request = AnswerRequest.model_validate(
            {"query": text, "store": store, "grade": grade, "cacheTTLms": 0}
        )
        started = time.perf_counter()
        events, _ = backends.answer(request, OPEN_GRANT, caller="http")
        answer = final_answer(events)
        figures.add(answer, relevant_documents(qrels, query_id), (time.perf_counter() - started) * 1000)
    return figures


class InstantGenerator:
    """A generator that answers at once: its first source's number after a fixed sentence."""

    provider = "instant"
    model = "instant"
    text = "The first source answers the question [1]."

    def generate(self, request: GenerationRequest) -> Generation:
        """The fixed sentence citing source 1."""
        from retrieval_core.generation.base import Generation

        return Generation(text=self.text, model=request.model, stop_reason="end_turn")

    def stream(self, request: GenerationRequest) -> Iterator[StreamEvent]:
        """The fixed sentence as one delta, then the Generation."""
        yield self.text
        yield self.generate(request)


@dataclass(frozen=True)
class Overhead:
    """Milliseconds of an answer spent outside retrieve and generation, per request."""

    http: list[float]  # client wall time - retrieve - generate
    service: list[float]  # pipeline total - retrieve - generate
    load_average: tuple[float, float]  # 1-minute load average before and after


def overhead(store: str, questions: Sequence[str], grade: float, warmup: int) -> Overhead:
    """Ask `questions` through the HTTP app with the instant generator, uncached; the first `warmup`
    requests are not counted."""
    from fastapi.testclient import TestClient

    from retrieval_core.api.app import create_app
    from retrieval_core.container import replace_generator

    previous = replace_generator(InstantGenerator())
    http: list[float] = []
    service: list[float] = []
    load_before = os.getloadavg()[0]
    try:
        with TestClient(create_app()) as client:
            for number, question in enumerate(questions):
                body = {"query": question, "store": store, "grade": grade, "cacheTTLms": 0}
                started = time.perf_counter()
                response = client.post(ANSWER, json=body)
                wall_ms = (time.perf_counter() - started) * 1000
                if response.status_code != 200:
                    raise SystemExit(f"{ANSWER} answered {response.status_code}: {response.text}")
                timings = response.json()["pipeline"]["timingsMs"]
                inside = timings["retrieve"] + timings["generate"]
                if number >= warmup:
                    http.append(wall_ms - inside)
                    service.append(timings["total"] - inside)
    finally:
        replace_generator(previous)
    return Overhead(http, service, (load_before, os.getloadavg()[0]))


def number(value: float, digits: int = 1, suffix: str = "") -> str:
    """A figure for the table, `—` when there is none."""
    return "—" if value != value else f"{value:.{digits}f}{suffix}"


def table(sets: Sequence[SetFigures]) -> str:
    """The Markdown table of the sets' figures, one row each, then their mean."""
    rows = [figures.row() for figures in sets]
    header = (
        "| set | questions | cite a relevant doc, of citing | of all | sources hold a relevant doc "
        "| grounded | nothing above grade | dropped citations | citations per citing answer "
        "| p50 answer ms | p50 generate ms |\n|---|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [header]
    named = [(f.name, r, 0) for f, r in zip(sets, rows, strict=True)] + [("**mean**", mean(rows), 1)]
    for name, row, places in named:  # counts are whole numbers but in the mean row
        lines.append(
            f"| {name} | {row['questions']:.{places}f} | {number(row['relevant_of_citing'], 1, '%')} "
            f"| {number(row['relevant_of_all'], 1, '%')} | {number(row['sources_relevant'], 1, '%')} "
            f"| {number(row['grounded'], 1, '%')} | {row['nothing_above']:.{places}f} "
            f"| {row['dropped']:.{places}f} "
            f"| {number(row['citations'], 2)} | {number(row['answer_ms'], 0)} "
            f"| {number(row['generate_ms'], 0)} |"
        )
    return "\n".join(lines)


def mean(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Each column's mean over the sets (over the sets that have the figure)."""
    result = {}
    for key in rows[0]:
        values = [row[key] for row in rows if row[key] == row[key]]
        result[key] = statistics.fmean(values) if values else float("nan")
    return result


def overhead_text(measured: Overhead, requests: int, set_name: str) -> str:
    """The overhead figures as one paragraph."""
    return (
        f"Service overhead, {requests} answers on {set_name} through the HTTP app (TestClient over "
        f"`create_app()`) with a generator that answers at once, `cacheTTLms` 0, after "
        f"{OVERHEAD_WARMUP} unmeasured requests; load average {measured.load_average[0]:.2f} before, "
        f"{measured.load_average[1]:.2f} after. Client wall time − retrieve − generate: "
        f"**p50 {percentile(measured.http, 50):.2f} ms**, p95 {percentile(measured.http, 95):.2f} ms. "
        f"`timingsMs.total` − retrieve − generate (the service's part, without HTTP): p50 "
        f"{percentile(measured.service, 50):.2f} ms, p95 {percentile(measured.service, 95):.2f} ms."
    )


def write_block(block: str) -> None:
    """Replace the lines between the answers markers of docs/quality.md (each a line of its own, so the
    page may name them in its text), or add the block at the end."""
    lines = OUT.read_text().splitlines()
    marked = [START, *block.splitlines(), END]
    if START in lines and END in lines[lines.index(START) :]:
        first = lines.index(START)
        last = lines.index(END, first)
        lines[first : last + 1] = marked
    else:
        lines += ["", *marked]
    OUT.write_text("\n".join(lines) + "\n")


def run(folders: Sequence[Path], grades: Sequence[float], limit: int, command: str) -> str:
    """Load each set, answer its sample at each grade, measure the overhead; the Markdown block."""
    from bench.eval import load, qrels_file
    from retrieval_core.container import get_generator
    from retrieval_core.evaluation import beir

    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    stores: dict[str, tuple[str, list[tuple[str, str]], Any]] = {}
    for folder in folders:
        store, _ = load(folder, fresh=False)
        qrels = beir.read_qrels(qrels_file(folder))
        questions = sample_questions(beir.read_queries(folder / "queries.jsonl"), qrels, limit)
        stores[folder.name] = (store, questions, qrels)
    generator = get_generator()
    tables = []
    for grade in grades:
        sets = []
        for name, (store, questions, qrels) in stores.items():
            figures = answer_set(name, store, questions, qrels, grade)
            print(f"{name}, grade {grade}: {figures.row()}", flush=True)
            sets.append(figures)
        tables.append(f"Grade {grade}:\n\n{table(sets)}")
    overhead_name = OVERHEAD_SET if OVERHEAD_SET in stores else next(iter(stores))
    store, questions, _ = stores[overhead_name]
    asked = [text for _, text in questions]
    asked = (asked * (1 + (OVERHEAD_REQUESTS + OVERHEAD_WARMUP) // len(asked)))[
        : OVERHEAD_REQUESTS + OVERHEAD_WARMUP
    ]
    measured = overhead(store, asked, grades[0], OVERHEAD_WARMUP)
    total_s = time.perf_counter() - started
    counts = ", ".join(f"{name} {len(questions)}" for name, (_, questions, _) in stores.items())
    return "\n".join(
        [
            "## Grounded answers",
            "",
            f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {machine()}, with other work running "
            f"(load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after). Command: "
            f"`{command}`. Took {total_s:.0f} s. Generator: {generator.provider} ({generator.model}); "
            f"the default retrieve options (default engine, 20 candidates, 5 results) at the grade "
            f"shown, `cacheTTLms` 0, asked in process through `get_backends().answer(..., "
            f'caller="http")` and `final_answer`. Questions: the first {limit} judged test queries of '
            f"each set by query id ({counts}).",
            "",
            "Columns: answers citing at least one document judged relevant (qrels score > 0), among "
            "answers that cite anything and among all questions; answers whose sources (the chunks "
            "given to the generator) include a relevant document; grounded (at least one citation); "
            "answers with nothing above the grade (no generator call); citations removed because they "
            "named a source not given (total); citations per answer that cites anything; median answer "
            "time (in-process wall time of the whole answer) and median generate time (answers whose "
            "generator was called). The mean is over the sets.",
            "",
            *[part for item in tables for part in (item, "")],
            overhead_text(measured, len(measured.http), overhead_name),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "dataset", nargs="*", type=Path, help="BEIR folders; default every folder under ../shared/eval"
    )
    parser.add_argument("--grades", type=float, nargs="+", default=list(GRADES), help="grades to answer at")
    parser.add_argument("--limit", type=int, default=SAMPLE, help="questions per set, at most")
    parser.add_argument("--no-write", action="store_true", help="print the figures, leave docs alone")
    args = parser.parse_args()
    folders = [p.resolve() for p in args.dataset] or sorted(
        p for p in EVAL_DIR.parent.iterdir() if (p / "corpus.jsonl").exists()
    )
    command = "make bench-answers" + (f" ARGS='{' '.join(sys.argv[1:])}'" if len(sys.argv) > 1 else "")
    block = run(folders, args.grades, args.limit, command)
    print(block, flush=True)
    if not args.no_write:
        write_block(block)
        print(f"\nwritten to {OUT.relative_to(REPO)}")


if __name__ == "__main__":
    os.chdir(REPO)
    main()
