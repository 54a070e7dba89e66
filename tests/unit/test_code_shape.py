"""The shape of the code a newcomer reads: size budgets, module names, and words that say behaviour.

The budgets and rules are those of docs/architecture.md ("Long functions", "Layers"); the import
contracts themselves are checked by `make layering`.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "layers" / "retrieval_core" / "retrieval_core"
MODULE_LINES = 500
FUNCTION_LINES = 60
# Functions allowed past FUNCTION_LINES, each named in docs/architecture.md with its reason.
LONG_FUNCTIONS: dict[str, str] = {}
# File names that several packages share because each holds the same role in its own layer: the
# package's errors, its part of stores or documents, a backend's service, a provider family's interface...
PARALLEL_ROLES = {
    "__init__.py",
    "answer.py",
    "api_keys.py",
    "base.py",
    "bedrock.py",
    "debug.py",
    "documents.py",
    "errors.py",
    "evaluate.py",
    "exceptions.py",
    "gemini.py",
    "health.py",
    "knowledge.py",
    "openai_compatible.py",
    "plan.py",
    "retrieve.py",
    "runner.py",
    "service.py",
    "stores.py",
}


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_no_module_is_over_the_line_budget() -> None:
    over = {
        str(p.relative_to(PACKAGE)): n
        for p in modules()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MODULE_LINES
    }
    assert over == {}


def test_no_function_is_over_the_line_budget_unless_named() -> None:
    over: dict[str, int] = {}
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                name = f"{path.relative_to(PACKAGE).with_suffix('')}.{node.name}".replace("/", ".")
                if lines > FUNCTION_LINES and name not in LONG_FUNCTIONS:
                    over[name] = lines
    assert over == {}


def test_no_module_is_named_like_a_standard_library_module() -> None:
    shadowing = [
        str(p.relative_to(PACKAGE))
        for p in modules()
        if p.stem != "__init__" and p.stem in sys.stdlib_module_names
    ] + [
        str(d.relative_to(PACKAGE))
        for d in PACKAGE.rglob("*")
        if d.is_dir() and d.name in sys.stdlib_module_names
    ]
    assert shadowing == []


def test_file_names_are_shared_only_by_modules_of_the_same_role() -> None:
    places: dict[str, list[str]] = defaultdict(list)
    for path in modules():
        places[path.name].append(str(path.parent.relative_to(PACKAGE)))
    shared = {name: where for name, where in places.items() if len(where) > 1 and name not in PARALLEL_ROLES}
    assert shared == {}


# Words about how the code came to be rather than what it does: every file says the behaviour instead.
HISTORY_WORDS = re.compile(r"seed 0?0[0-9]|\bissues? #?[0-9]+", re.IGNORECASE)
CHECKED = ("layers", "functions", "tests", "bench", "docs", ".ci", "Makefile", "README.md", "template.yaml")
SUFFIXES = {".py", ".md", ".yaml", ".toml", ".txt", ".json", ".sql", ""}


def test_code_tests_and_docs_say_the_behaviour_not_the_history() -> None:
    found: list[str] = []
    for name in CHECKED:
        root = REPO / name
        paths = [root] if root.is_file() else sorted(root.rglob("*"))
        for path in paths:
            if not path.is_file() or path.suffix not in SUFFIXES:
                continue
            if "__pycache__" in path.parts or ".egg-info" in str(path):
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8", errors="ignore").splitlines(), 1):
                if HISTORY_WORDS.search(line):
                    found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()[:80]}")
    assert found == []
