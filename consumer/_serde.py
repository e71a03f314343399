"""JSON for keys (canonical) and for stored results."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import json
from typing import Any


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if hasattr(value, "model_dump"):  # pydantic v2 models
        return value.model_dump(mode="json")
    if isinstance(value, decimal.Decimal):  # DynamoDB numbers
        return int(value) if value == value.to_integral_value() else str(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=canonical_json)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    msg = f"{type(value).__name__} is not JSON serializable"
    raise TypeError(msg)


# Built once: json.dumps() with options builds a new encoder on every call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_jsonable)
_RESULT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_jsonable)


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace, so equal payloads serialize (and hash) equally."""
    return _CANONICAL.encode(value)


def dumps_result(value: Any) -> str:
    """JSON text of a handler's result (dataclasses, pydantic models, Decimals converted).

    Raises:
        TypeError: The result cannot be represented as JSON.
        ValueError: The result holds NaN or infinity, or a circular reference.
    """
    return _RESULT.encode(value)
