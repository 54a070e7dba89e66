"""`retrieval eval-long` on a folder a user could have: documents synced, questions judged by span and by
section, and the table of where each answer got to."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from retrieval_core.cli.main import main

MANUAL = (
    "# Backups\n\n## Restoring\n\nTo restore the database after a mistake, stop the writers, load the "
    "nightly snapshot with the restore tool and start the writers again once the tool reports success.\n\n"
    "## Retention\n\nSnapshots are kept for thirty days in the backup bucket and then deleted.\n"
)
PAPER = (
    "Influenza spreads through droplets. The incubation period of the virus is two days on average, "
    "with a range of one to four days. Most adults recover within a week.\n"
)


def folder_with_judgments(root: Path) -> Path:
    (root / "documents").mkdir(parents=True)
    (root / "documents" / "manual.md").write_text(MANUAL)
    (root / "documents" / "paper.txt").write_text(PAPER)
    queries = [
        {"_id": "q1", "text": "How do I restore the database after a mistake?"},
        {"_id": "q2", "text": "What is the incubation period of influenza?"},
        {"_id": "q3", "text": "A question nobody judged"},
    ]
    answer = "two days on average"
    judgments = [
        {
            "qid": "q1",
            "documents": ["manual.md"],
            "context": MANUAL.split("## Retention")[0],
            "answer": "Stop the writers, load the nightly snapshot with the restore tool, start the writers.",
        },
        {
            "qid": "q2",
            "document": "paper.txt",
            "start": PAPER.index(answer),
            "end": PAPER.index(answer) + 19,
            "answer": answer,
        },
    ]
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (root / "judgments.jsonl").write_text("".join(json.dumps(j) + "\n" for j in judgments))
    return root


def test_eval_long_reports_where_each_answer_got_to(
    service: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = folder_with_judgments(tmp_path / "judged")
    store = f"long-{uuid.uuid4().hex[:8]}"
    assert main(["sync", str(folder / "documents"), "--store", store, "--no-progress"]) == 0
    capsys.readouterr()
    try:
        assert main(["eval-long", "--store", store, str(folder), "--no-progress"]) == 0
        out = capsys.readouterr().out
        assert out.startswith("2 questions\n")  # the unjudged question is left out
        rows = {line.split(" | ")[0].strip("| "): line for line in out.splitlines() if line.startswith("| ")}
        assert set(rows) >= {"method", "dense", "hybrid"}
        cells = [cell.strip() for cell in rows["dense"].strip("|").split("|")]
        # Both answers are in the first chunk of two small documents: hit@1 to doc hit@5 and every budget.
        assert cells[1:10] == ["1.000"] * 9, rows["dense"]
    finally:
        main(["drop-store", "--store", store])


def test_eval_long_names_a_store_that_does_not_exist(tmp_path: Path, service: object) -> None:
    folder = folder_with_judgments(tmp_path / "judged")
    assert main(["eval-long", "--store", "no-such-store-here", str(folder), "--no-progress"]) != 0
