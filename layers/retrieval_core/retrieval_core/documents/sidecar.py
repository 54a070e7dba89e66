"""Read a metadata sidecar (`<key>.metadata.json`) in Amazon Bedrock Knowledge Bases' shape. Pure."""

from __future__ import annotations

import json
from typing import Any

from retrieval_core.documents.exceptions import SidecarError

# Bedrock's typed attribute values: {"value": {"type": "STRING", "stringValue": "..."}}.
_TYPED_FIELDS = {
    "STRING": "stringValue",
    "NUMBER": "numberValue",
    "BOOLEAN": "booleanValue",
    "STRING_LIST": "stringListValue",
}
Scalar = str | int | float | bool


def read_sidecar(data: bytes) -> dict[str, Any]:
    """The metadata of `{"metadataAttributes": {...}}`, values plain or typed. Raises SidecarError."""
    try:
        document = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SidecarError(f"not UTF-8 JSON ({exc})") from exc
    attributes = document.get("metadataAttributes") if isinstance(document, dict) else None
    if not isinstance(attributes, dict):
        raise SidecarError('expected a JSON object {"metadataAttributes": {...}}')
    return {str(name): _plain(str(name), value) for name, value in attributes.items()}


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
