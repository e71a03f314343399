"""Attribute names of a stored record, and its size as DynamoDB counts it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from persistence._errors import ItemTooLargeError

if TYPE_CHECKING:
    from persistence._record import IdempotencyRecord

#: DynamoDB's item size limit, in bytes (400 KB).
MAX_ITEM_BYTES = 400 * 1024


@dataclass(frozen=True, slots=True)
class AttributeNames:
    """Names of the stored attributes. The defaults match Powertools' table layout.

    Attributes:
        key: Partition key (or, on a composite-key table, the sort key holding the idempotency key).
        expires_at: TTL attribute, epoch seconds.
        in_progress_expires_at: Lock deadline, epoch milliseconds.
        status: ``IN_PROGRESS`` or ``COMPLETE``.
        response: JSON text of the stored result.
        payload_hash: Payload-validation hash.
        lease: Fencing token of the holder.
    """

    key: str = "id"
    expires_at: str = "expiration"
    in_progress_expires_at: str = "in_progress_expiration"
    status: str = "status"
    response: str = "data"
    payload_hash: str = "validation"
    lease: str = "lease"


DEFAULT_ATTRIBUTES = AttributeNames()
# Bytes the attribute names, the status and the numbers can take at most (names are up to 255 bytes each).
_SMALL_ITEM_SLACK = 7 * 255 + len("IN_PROGRESS") + 2 * 21


def _number_size(value: int) -> int:
    # DynamoDB stores numbers in up to 38 significant digits, about one byte per two digits plus one.
    return len(str(abs(value))) // 2 + 2


def record_size(record: IdempotencyRecord, names: AttributeNames = DEFAULT_ATTRIBUTES) -> int:
    """Return the record's size in bytes as DynamoDB counts an item (names plus values, UTF-8).

    Args:
        record: The record.
        names: The attribute names it is stored under.
    """
    strings = {
        names.key: record.key,
        names.status: record.status.value,
        names.lease: record.lease,
        names.response: record.response,
        names.payload_hash: record.payload_hash,
    }
    numbers = {names.expires_at: record.expires_at, names.in_progress_expires_at: record.in_progress_expires_at}
    size = sum(len(n.encode()) + len(v.encode()) for n, v in strings.items() if v is not None)
    return size + sum(len(n.encode()) + _number_size(v) for n, v in numbers.items() if v is not None)


def check_size(record: IdempotencyRecord, names: AttributeNames = DEFAULT_ATTRIBUTES, extra_bytes: int = 0) -> None:
    """Raise :class:`ItemTooLargeError` if the record would exceed :data:`MAX_ITEM_BYTES`.

    Args:
        record: The record about to be written.
        names: The attribute names it is stored under.
        extra_bytes: Bytes stored beside the record (a composite table's static partition key).
    """
    # Fast path: UTF-8 takes at most 4 bytes a character, numbers at most 21, names are short.
    texts = (record.key, record.lease, record.response or "", record.payload_hash or "")
    if 4 * sum(map(len, texts)) + extra_bytes + _SMALL_ITEM_SLACK < MAX_ITEM_BYTES:
        return
    size = record_size(record, names) + extra_bytes
    if size > MAX_ITEM_BYTES:
        raise ItemTooLargeError(key=record.key, size=size, limit=MAX_ITEM_BYTES)
