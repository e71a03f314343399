"""DynamoDB attribute values (``{"S": "x"}``) to plain Python, without importing boto3."""

from __future__ import annotations

import base64
import decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping


def _number(value: str) -> int | decimal.Decimal:
    number = decimal.Decimal(value)
    return int(number) if number == number.to_integral_value() and "." not in value else number


_SCALARS: dict[str, Callable[[Any], Any]] = {
    "S": str,
    "N": _number,
    "B": base64.b64decode,
    "BOOL": bool,
    "NULL": lambda _: None,
    "SS": set,
    "NS": lambda values: {_number(v) for v in values},
    "BS": lambda values: {base64.b64decode(v) for v in values},
}


def deserialize(value: Mapping[str, Any]) -> Any:
    """One attribute value to Python: numbers become ``int`` or ``Decimal``, sets ``set``, binary ``bytes``."""
    ((kind, inner),) = value.items()
    if kind == "M":
        return deserialize_item(inner)
    if kind == "L":
        return [deserialize(v) for v in inner]
    return _SCALARS[kind](inner)


def deserialize_item(item: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A whole item (``Keys``, ``NewImage``, ``OldImage``) to a plain dict."""
    return {name: deserialize(value) for name, value in item.items()}
