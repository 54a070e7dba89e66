"""clients/openapi.json is the app's OpenAPI document, so the clients generated from it match the service.

After a change to a route or a model: `make openapi` rewrites the file, and `make check-clients` regenerates
the clients' types from it and fails on any difference.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from retrieval_core.error_codes import ERROR_CODES

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "clients" / "openapi.json"


def served_document(cwd: Path) -> str:
    # A process of its own with no settings of the checkout or of the tests (the document must not
    # depend on them): what `retrieval openapi` prints.
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": os.pathsep.join([str(REPO / "layers" / "retrieval_core"), str(REPO)]),
    }
    return subprocess.run(
        [sys.executable, "-m", "retrieval_core.cli.main", "openapi"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout


def test_the_committed_document_is_the_one_the_app_serves(tmp_path: Path) -> None:
    served = served_document(tmp_path)
    assert served == COMMITTED.read_text(encoding="utf-8"), (
        "clients/openapi.json differs from the app's OpenAPI document: run `make openapi` and commit it"
    )


def test_each_operation_has_a_camel_case_id_and_each_error_code_is_in_the_enum() -> None:
    document = json.loads(COMMITTED.read_text(encoding="utf-8"))
    ids = [op["operationId"] for ops in document["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))
    assert all(i.isidentifier() and "_" not in i and i[0].islower() for i in ids), ids
    assert {"retrieve", "listDocuments", "putDocument", "answer", "healthy"} <= set(ids)
    schemas = document["components"]["schemas"]
    assert schemas["ErrorCode"]["enum"] == sorted(ERROR_CODES)
    assert schemas["ErrorBody"]["properties"]["code"] == {"$ref": "#/components/schemas/ErrorCode"}
