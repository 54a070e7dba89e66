"""Read a metadata sidecar (`<key>.metadata.json`) in Amazon Bedrock Knowledge Bases' shape. Pure.

Beside `metadataAttributes`, a sidecar of a CSV or JSON Lines file may hold `tableOptions` (the columns
of its id, title, text and metadata: parsers/tables.py), which `retrieval ingest` and `sync` read.
"""

from __future__ import annotations

import json
from typing import Any

from retrieval_core.documents.exceptions import SidecarError
from retrieval_core.parsers.tables import TableOptions

# Bedrock's typed attribute values: {"value": {"type": "STRING", "stringValue": "..."}}.
_TYPED_FIELDS = {
    "STRING": "stringValue",
    "NUMBER": "numberValue",
    "BOOLEAN": "booleanValue",
    "STRING_LIST": "stringListValue",
}
Scalar = str | int | float | bool


def read_sidecar(data: bytes) -> dict[str, Any]:
    """The metadata of `{"metadataAttributes": {...}}`, values plain or typed; none in a sidecar that holds
    only `tableOptions`. Raises SidecarError."""
    document = _json(data)
    attributes = document.get("metadataAttributes") if isinstance(document, dict) else None
    if attributes is None and isinstance(document, dict) and "tableOptions" in document:
        return {}
    if not isinstance(attributes, dict):
        raise SidecarError('expected a JSON object {"metadataAttributes": {...}}')
    return {str(name): _plain(str(name), value) for name, value in attributes.items()}


def read_table_options(data: bytes) -> TableOptions | None:
    """The sidecar's `tableOptions` (None without them). Raises SidecarError, TableOptionsError (422)."""
    document = _json(data)
    found = document.get("tableOptions") if isinstance(document, dict) else None
    return None if found is None else TableOptions.from_json(found)


def _json(data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SidecarError(f"not UTF-8 JSON ({exc})") from exc


def _plain(name: str, value: Any) -> Any:
    if isinstance(value, dict) and isinstance(value.get("value"), dict):
        typed = value["value"]
        field = _TYPED_FIELDS.get(str(typed.get("type", "")).upper())
        if field is None or field not in typed:
            raise SidecarError(f"{name}: a typed value needs type {sorted(_TYPED_FIELDS)} and its field")
        value = typed[field]
    if isinstance(value, Scalar) or (isinstance(value, list) and all(isinstance(v, Scalar) for v in value)):
        return value
    raise SidecarError(f"{name}: values are strings, numbers, booleans or lists of them")
