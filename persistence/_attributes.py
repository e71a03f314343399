"""Attribute names of a stored record, and its size as DynamoDB counts it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from persistence._errors import ItemTooLargeError
from persistence._fields import ByFields

if TYPE_CHECKING:
    from persistence._record import IdempotencyRecord

#: DynamoDB's item size limit, in bytes (400 KB).
MAX_ITEM_BYTES = 400 * 1024


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # shown, compared, hashed: ByFields
class AttributeNames(ByFields):
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


def text_size(text: str) -> int:
    r"""Return the bytes DynamoDB counts for ``text``: its UTF-8 length. Never raises.

    A lone surrogate (``"\ud83d"``, which has no UTF-8 form) counts 3 bytes: the size of both forms a server
    can keep in its place, the replacement character U+FFFD and the surrogate's own 3-byte (CESU-8) form.
    botocore sends it as its 6-character JSON escape, but DynamoDB counts the decoded string, not the escape.
    Two surrogates that form a pair count 6 where DynamoDB may count 4: an overcount, on the safe side.
    """
    return len(text.encode("utf-8", "surrogatepass"))


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
    size = sum(text_size(n) + text_size(v) for n, v in strings.items() if v is not None)
    return size + sum(text_size(n) + _number_size(v) for n, v in numbers.items() if v is not None)


def check_size(record: IdempotencyRecord, names: AttributeNames = DEFAULT_ATTRIBUTES, extra_bytes: int = 0) -> None:
    """Raise :class:`ItemTooLargeError` if the record would exceed :data:`MAX_ITEM_BYTES`; nothing else.

    Text that has no UTF-8 form is counted, not refused (see :func:`text_size`): whether it can be stored
    is the store's to say.

    Args:
        record: The record about to be written.
        names: The attribute names it is stored under.
        extra_bytes: Bytes stored beside the record (a composite table's static partition key).
    """
    # Fast path: UTF-8 takes at most 4 bytes a character (a lone surrogate counts 3), numbers at most 21,
    # names are short.
    chars = len(record.key) + len(record.lease) + len(record.response or "") + len(record.payload_hash or "")
    if 4 * chars + extra_bytes + _SMALL_ITEM_SLACK < MAX_ITEM_BYTES:
        return
    size = record_size(record, names) + extra_bytes
    if size > MAX_ITEM_BYTES:
        raise ItemTooLargeError(key=record.key, size=size, limit=MAX_ITEM_BYTES)
