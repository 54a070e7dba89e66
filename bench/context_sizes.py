"""The figures behind docs/api.md "Prompt-ready context" and "Result limits".

    python -m bench.context_sizes

1. The token estimate (used where no tokenizer is installed) against the model's tokenizer, on the
   first 3,000 passages (title and text) of each set under ../shared/eval that has msmarco-5k, scifact
   or nfcorpus: the mean ratio, and how many passages it undercounts.
2. Reply sizes of 50 and 100 results of 1,000-character chunks (English words drawn from msmarco-5k,
   the sample corpus's 9 metadata fields), plain and with returnFormatted: the queue reply's SQS
   message body and the answer's bytes inside a Lambda response.
"""

from __future__ import annotations

import json
import random

from bench.common import REPO, machine

EVAL = REPO.parent / "shared" / "eval"
SETS = ("msmarco-5k", "scifact", "nfcorpus")
METADATA = {
    "year": 2024,
    "title": "Kubernetes pod scheduling",
    "fileName": "k8s-docs.pdf",
    "pageNumber": 12,
    "contentType": "application/pdf",
    "source_type": "s3",
    "project_name": "Platform",
    "chunkIndex": 0,
}


def passages(name: str, count: int = 3000) -> list[str]:
    """The first `count` passages of a set, title and text."""
    texts = []
    with (EVAL / name / "corpus.jsonl").open() as lines:
        for line, _ in zip(lines, range(count), strict=False):
            doc = json.loads(line)
            texts.append((doc.get("title", "") + "\n" + doc["text"]).strip())
    return texts


def estimate_rows() -> list[str]:
    from retrieval_core.search.token_count import EstimatedCounter, token_counter

    model, estimate = token_counter(), EstimatedCounter()
    rows = []
    for name in SETS:
        texts = passages(name)
        real, estimated = model.count(texts), estimate.count(texts)
        under = sum(e < r for e, r in zip(estimated, real, strict=True))
        rows.append(f"| {name} | {len(texts)} | {sum(estimated) / sum(real):.2f} | {under} |")
    return rows


def size_rows() -> list[str]:
    from retrieval_core.backends.prompt_context import with_context
    from retrieval_core.schemas.results import ChunkResult
    from retrieval_core.schemas.retrieve import Pipeline, RetrieveResponse
    from retrieval_core.search.reply_size import lambda_body_bytes, sqs_body_bytes
    from retrieval_core.search.token_count import token_counter

    rng = random.Random(1)
    words = [w for text in passages("msmarco-5k", 500) for w in text.split() if w.isalpha()]

    def chunk() -> str:
        text = ""
        while len(text) < 1000:
            text += rng.choice(words) + " "
        return text[:1000]

    rows = []
    for count in (50, 100):
        results = [
            ChunkResult(
                id=f"doc-{i}#0", content=chunk(), score=0.5, metadata={**METADATA, "documentId": f"doc-{i}"}
            )
            for i in range(count)
        ]
        plain = RetrieveResponse(
            results=results,
            query="q",
            total_results=count,
            engine_used="naive",
            store="s",
            pipeline=Pipeline(candidates_considered=count),
        )
        for label, answer in (
            ("plain", plain),
            ("returnFormatted", with_context(plain, None, token_counter())),
        ):
            body = answer.model_dump(mode="json")
            reply = json.dumps({"requestId": "x", "status": "ok", "response": body}, separators=(",", ":"))
            rows.append(f"| {count} | {label} | {sqs_body_bytes(reply):,} | {lambda_body_bytes(body):,} |")
    return rows


def main() -> None:
    print(machine())
    print("| set | passages | estimate / tokenizer (mean) | undercounted |")
    print("|---|---|---|---|")
    print("\n".join(estimate_rows()))
    print()
    print("| results | shape | queue reply (bytes) | in a Lambda response (bytes) |")
    print("|---|---|---|---|")
    print("\n".join(size_rows()))


if __name__ == "__main__":
    main()
