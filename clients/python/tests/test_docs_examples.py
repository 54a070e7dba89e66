"""The client examples of docs/clients.md and README.md run as written against the live service.

A page marks each with `<!-- client-example: python -->` (or `typescript`) right before its fenced block.
The documented address `http://127.0.0.1:8000` is replaced by the test server's; the key comes from
RETRIEVAL_API_KEY, as the examples say. An example passes when it exits 0 and prints something.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PAGES = [REPO / "README.md", REPO / "docs" / "clients.md"]
EXAMPLE = re.compile(
    r"<!-- client-example: (?P<language>python|typescript) -->\n```\w+\n(?P<code>.*?)\n```", re.DOTALL
)
DOCUMENTED_ADDRESS = "http://127.0.0.1:8000"


def examples(language: str) -> list[tuple[str, str]]:
    """(where, code) of each example in `language`."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in EXAMPLE.finditer(text):
            if match["language"] == language:
                line = text[: match.start()].count("\n") + 1
                found.append((f"{page.relative_to(REPO)}:{line}", match["code"]))
    return found


def test_the_pages_have_examples_of_each_client() -> None:
    assert len(examples("python")) >= 4  # README, the client, LangChain, LlamaIndex
    assert [where for where, _ in examples("python")][0].startswith("README.md")
    assert len(examples("typescript")) >= 1


@pytest.mark.parametrize(("where", "code"), examples("python"), ids=[w for w, _ in examples("python")])
def test_a_python_example_runs_as_written(where: str, code: str, url: str, tmp_path: Path) -> None:
    assert DOCUMENTED_ADDRESS in code, f"{where}: the example does not name the documented address"
    script = tmp_path / "example.py"
    script.write_text(code.replace(DOCUMENTED_ADDRESS, url), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, f"{where}:\n{done.stderr}"
    assert done.stdout.strip(), f"{where} printed nothing"


TYPESCRIPT = REPO / "clients" / "typescript"


@pytest.mark.parametrize(
    ("where", "code"), examples("typescript"), ids=[w for w, _ in examples("typescript")]
)
def test_a_typescript_example_runs_as_written(where: str, code: str, url: str, tmp_path: Path) -> None:
    # As a user's project that installed the package by path: node_modules links to the built client.
    node = shutil.which("node")
    assert node is not None, "node is needed for the TypeScript examples"
    assert (TYPESCRIPT / "dist" / "src" / "index.js").exists(), "build the client first: npm run build"
    assert DOCUMENTED_ADDRESS in code, f"{where}: the example does not name the documented address"
    package = tmp_path / "node_modules" / "@retrieval-service" / "client"
    package.parent.mkdir(parents=True)
    package.symlink_to(TYPESCRIPT, target_is_directory=True)
    script = tmp_path / "example.mjs"
    script.write_text(code.replace(DOCUMENTED_ADDRESS, url), encoding="utf-8")
    done = subprocess.run([node, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, f"{where}:\n{done.stderr}"
    assert done.stdout.strip(), f"{where} printed nothing"
