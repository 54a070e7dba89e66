"""Where settings come from: the process environment and a `.env` file. Pure: reads one file at most.

The settings are all scalars, so reading them takes a few lines here. pydantic-settings, which did it
before, loaded 30 more modules at every cold start and took about 12 ms to import with python-dotenv
once FastAPI and pydantic were loaded (python3.12, the built layer, median of 15; docs/benchmarks.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path


def environment_values(
    names: Iterable[str], environ: Mapping[str, str], env_file: Path | None
) -> dict[str, str]:
    """The values of the settings `names` from `env_file` (if it exists), overridden by `environ`."""
    wanted = {name.lower(): name for name in names}
    found: dict[str, str] = {}
    sources = [read_env_file(env_file) if env_file is not None and env_file.is_file() else {}, environ]
    for source in sources:
        for key, value in source.items():
            name = wanted.get(key.lower())
            if name is not None:
                found[name] = value
    return found


_ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")
_ESCAPES = {"n": "\n", '"': '"', "\\": "\\"}


def read_env_file(path: Path) -> dict[str, str]:
    """`NAME=value` lines of a `.env` file: `export ` may lead, a value may be quoted ('...' as written,
    "..." with \\n, \\" and \\\\ escapes), `#` starts a comment outside quotes. No `${...}` expansion."""
    values: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        match = _ENV_LINE.match(line)
        if match is None:
            continue
        name, raw = match.groups()
        quoted = _quoted(raw) if raw[:1] in ("'", '"') else None
        values[name] = quoted if quoted is not None else re.split(r"\s+#", raw, maxsplit=1)[0].strip()
    return values


def _quoted(raw: str) -> str | None:
    """The text inside the quotes `raw` starts with; None when they are never closed."""
    quote, out, i = raw[0], [], 1
    while i < len(raw):
        char = raw[i]
        if quote == '"' and char == "\\" and i + 1 < len(raw):
            out.append(_ESCAPES.get(raw[i + 1], raw[i : i + 2]))
            i += 2
            continue
        if char == quote:
            return "".join(out)
        out.append(char)
        i += 1
    return None
