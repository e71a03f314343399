"""Producer-set idempotency keys: a header (or message attribute, or detail field) of a record, by name.

Many producers put their own key on a message (``Idempotency-Key``): a retried send is a new message with a new
id (SQS ``messageId``, a new Kafka offset), but it carries the same key. :func:`producer_header` reads it from
the record as Lambda delivers it, matching the name's ASCII letters in any case (only those: a name spelled with
a KELVIN SIGN for its ``k`` is another name, as for a filter upstream that compares names in ASCII):

- a Kafka record: its headers (arrays of byte integers); a repeated name gives its last value. A value that is
  UTF-8 is its text; any other value (a binary key: a UUID's 16 bytes, a hash) is its bytes, keyed in a form of
  their own (:class:`~consumer._serde.BinaryKey`): the same on every delivery, and never equal to a text value or
  to anything a payload holds, so it cannot collide with one;
- an SQS message: its ``messageAttributes``' ``stringValue``; a binary attribute's bytes (its ``binaryValue``,
  decoded from base64) key as a Kafka header's do: their text when UTF-8, else in the form of their own;
- an EventBridge event: the top-level field of its ``detail``, as it is (a string, a number, an object).

Anything else, or a record without it, has no such header: ``None``, which the missing-key rules then judge.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from consumer._serde import BinaryKey
from consumer.sources._kafka import folded_name, header_bytes

_ABSENT = object()


def _lookup(fields: Mapping[str, Any], name: str) -> Any:
    folded = folded_name(name)
    found = None
    for field, value in fields.items():  # the last match wins, as for a repeated Kafka header
        if isinstance(field, str) and folded_name(field) == folded:
            found = value
    return found


def kafka_header(headers: Any, name: str) -> str | BinaryKey | None:
    """The key material of Kafka header ``name`` (its last value): UTF-8 text, else its bytes; or ``None``.

    Only the named header is decoded: another header, however malformed, is not read.

    Raises:
        ValueError: ``headers`` is not a list (Lambda's shape), or the named header's value is not an array of
            byte integers.
    """
    if headers is None:
        return None
    if not isinstance(headers, list):
        msg = f"headers are not a list, got {type(headers).__name__}"
        raise ValueError(msg)  # noqa: TRY004 - a key error naming the record (keys.select), as any bad input
    folded, value = folded_name(name), _ABSENT
    for entry in headers:  # in record order, so that the last value wins
        if not isinstance(entry, Mapping):
            continue  # names no header: not the one asked for
        for field, raw in entry.items():
            if isinstance(field, str) and folded_name(field) == folded and raw is not None:  # null: no value
                value = raw
    if value is _ABSENT:
        return None
    return _key_of(header_bytes(value, name))


def _key_of(data: bytes) -> str | BinaryKey:
    """Bytes as key material: their text when they are UTF-8, else the bytes themselves, in a form of their own."""
    try:
        return data.decode()
    except UnicodeDecodeError:
        return BinaryKey(data)  # a binary key: stable, and keyed unlike any text or payload value


def _sqs_attribute(attribute: Mapping[str, Any], name: str) -> str | BinaryKey | None:
    """A message attribute's key material: its ``stringValue``, else the bytes of its base64 ``binaryValue``."""
    text = attribute.get("stringValue")
    if text is not None:
        return text  # type: ignore[no-any-return]  # a String or Number attribute's value, as SQS delivers it
    encoded = attribute.get("binaryValue")
    if encoded is None:
        return None
    try:
        return _key_of(base64.b64decode(encoded, validate=True))
    except (TypeError, ValueError) as e:  # binascii.Error is a ValueError
        msg = f"message attribute {name!r}: binaryValue is not base64 ({type(e).__name__})"
        raise ValueError(msg) from None


def producer_header(record: Any, name: str) -> Any:
    """The value ``name`` names on ``record`` (its ASCII letters in any case), or ``None`` when it has none.

    Raises:
        ValueError: Kafka headers not of Lambda's shape (see :func:`kafka_header`), or an SQS binary attribute
            that is not base64.
    """
    if not isinstance(record, Mapping):
        return None
    if "topic" in record and "offset" in record:  # Kafka
        return kafka_header(record.get("headers"), name)
    attributes = record.get("messageAttributes")
    if isinstance(attributes, Mapping):  # SQS
        attribute = _lookup(attributes, name)
        if not isinstance(attribute, Mapping):
            return None
        return _sqs_attribute(attribute, name)
    detail = record.get("detail")
    if "detail-type" in record and isinstance(detail, Mapping):  # EventBridge
        return _lookup(detail, name)
    return None
