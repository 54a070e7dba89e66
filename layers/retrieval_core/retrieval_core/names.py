"""What a document id may not be: a name that a URL would read as a path step.

Clients put ids into request paths. A browser, `fetch` and most HTTP libraries resolve `.` and `..` path
segments (also spelt `%2e`, and with `\\` for `/`, tabs and newlines dropped) before a request leaves,
so a document `../../bravo` in store `alpha` would address the store `bravo`. Ids holding such a segment
are refused on every write; ids stored before the rule stay readable and deletable through the routes
that take the id as a query parameter (docs/documents-api.md, "Ids").
"""

from __future__ import annotations

import re
from urllib.parse import unquote

DOT_SEGMENT_RULE = (
    "must not hold a '.' or '..' path segment (between '/' or '\\', also percent-encoded as %2e): "
    "a URL would read it as a step up the path"
)
# Each round decodes one layer of percent-encoding (%252e -> %2e -> .); ids are at most 1,024 bytes.
_MAX_DECODES = 8
_SEPARATORS = re.compile(r"[/\\]")
# The characters a browser drops from a URL wherever they stand.
_DROPPED = str.maketrans("", "", "\t\n\r")
# A superset of the ids that hold a dot segment, for a database to look for them by (PostgreSQL `~*`):
# between separators (also percent-encoded ones), nothing but dots, tabs, newlines and the characters of
# %2e and %25.
_SEPARATOR = r"([/\\]|%(25)*(2f|5c))"
CANDIDATE_PATTERN = rf"(^|{_SEPARATOR})[.%25e\t\n\r]+({_SEPARATOR}|$)"


def holds_dot_segment(document_id: str) -> bool:
    """True when a URL would resolve a segment of `document_id` as `.` or `..`, in any spelling."""
    text = document_id
    for _ in range(_MAX_DECODES):
        decoded = unquote(text.translate(_DROPPED))
        if decoded == text:
            break
        text = decoded
    return any(segment in {".", ".."} for segment in _SEPARATORS.split(text))
