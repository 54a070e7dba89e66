"""The list of codes (retrieval_core/error_codes.py) and the "Errors" table of docs/api.md hold exactly the
codes the code can produce, the table each with its status.

The codes are read from the code, so a code added anywhere (a new RetrievalError subclass, a literal code
given to `error_response`) fails this test until both tables list it.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import retrieval_core
from retrieval_core.api.errors import HTTP_EXCEPTION_CODES, OTHER_HTTP_EXCEPTION_CODE
from retrieval_core.error_codes import ERROR_CODES
from retrieval_core.exceptions import RetrievalError

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "layers" / "retrieval_core" / "retrieval_core"
ROW = re.compile(r"^\|\s*(?P<status>\d{3}|—)\s*\|(?P<codes>[^|]*)\|")


def readme_rows() -> dict[str, str]:
    """code -> status column, from the table under '### Errors'."""
    text = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    section = text.split("### Errors\n", 1)[1].split("\n#", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        match = ROW.match(line)
        if match:
            for code in re.findall(r"`([a-z0-9_]+)`", match["codes"]):
                assert code not in rows, f"{code} is listed twice"
                rows[code] = match["status"]
    return rows


def subclasses(cls: type[RetrievalError]) -> set[type[RetrievalError]]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= subclasses(sub)
    return found


OPTIONAL_EXTRAS = {"mcp", "mcp_types"}


def error_classes() -> set[type[RetrievalError]]:
    """Every RetrievalError class, wherever it is defined (every module of the package imported)."""
    for module in pkgutil.walk_packages(retrieval_core.__path__, "retrieval_core."):
        try:
            importlib.import_module(module.name)
        except ModuleNotFoundError as exc:
            # api.mcp.server needs the optional `mcp` extra (make check-min-deps runs without it); it
            # defines no error class of its own, and the tools it serves are imported here either way.
            if exc.name not in OPTIONAL_EXTRAS:
                raise
    return {RetrievalError} | subclasses(RetrievalError)


def literal_codes() -> set[str]:
    """Codes written as literals in `error_response(status, "code", ...)` calls (the layer, functions)."""
    codes: set[str] = set()
    for path in [*PACKAGE.rglob("*.py"), *(REPO / "functions").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or len(node.args) < 2:
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            code = node.args[1]
            if name == "error_response" and isinstance(code, ast.Constant) and isinstance(code.value, str):
                codes.add(code.value)
    return codes


def test_the_errors_table_lists_every_code_and_only_those() -> None:
    from_code = (
        {cls.code for cls in error_classes()}
        | literal_codes()
        | set(HTTP_EXCEPTION_CODES.values())
        | {OTHER_HTTP_EXCEPTION_CODE}
    )
    listed = set(readme_rows())
    assert from_code - listed == set(), "codes the Errors table of docs/api.md lacks"
    assert listed - from_code == set(), "codes in the Errors table of docs/api.md that no code produces"


def test_the_list_of_codes_is_the_docs_table_s() -> None:
    assert set(readme_rows()) == ERROR_CODES


def test_each_listed_code_has_its_status() -> None:
    rows = readme_rows()
    for cls in error_classes():
        if cls.code in rows and cls is not RetrievalError:
            assert rows[cls.code] == str(cls.status_code), f"{cls.__name__}: {cls.code}"
    for status, code in HTTP_EXCEPTION_CODES.items():
        assert rows[code] == str(status), code


def test_the_scan_finds_the_codes_the_http_layer_writes_itself() -> None:
    # error_response(500, "internal_error", ...) in api/errors.py: the scan must see it, or it checks nothing.
    assert "internal_error" in literal_codes()
