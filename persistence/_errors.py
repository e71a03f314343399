"""The one exception hierarchy of the library.

Every error raised by ``persistence`` or ``consumer`` derives from :class:`IdempotencyError`, carries the
data a handler needs to act on it (``key``, ``existing_record``) and chains its cause.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from persistence._record import IdempotencyRecord


class IdempotencyError(Exception):
    """Base class of every error the library raises.

    Attributes:
        key: The idempotency key involved, when there is one.
        existing_record: The stored record that caused the error, when the store returned one.
    """

    def __init__(
        self,
        message: str,
        *,
        key: str | None = None,
        existing_record: IdempotencyRecord | None = None,
    ) -> None:
        """Build the error.

        Args:
            message: What went wrong, in words.
            key: The idempotency key involved.
            existing_record: The stored record involved.
        """
        super().__init__(message)
        self.key = key
        self.existing_record = existing_record


class PersistenceLayerError(IdempotencyError):
    """The store could not be read or written (throttling, network, bad table); the cause is chained."""


class ItemTooLargeError(PersistenceLayerError):
    """A record would exceed DynamoDB's 400 KB item limit.

    Attributes:
        size: The item's size in bytes, counted as DynamoDB counts it.
        limit: The largest size allowed.
    """

    def __init__(self, *, key: str, size: int, limit: int) -> None:
        """Build the error.

        Args:
            key: The record's key.
            size: The item's size in bytes.
            limit: The limit it exceeds.
        """
        super().__init__(f"record {key!r} is {size} bytes, over the {limit}-byte item limit", key=key)
        self.size = size
        self.limit = limit


class LockLostError(IdempotencyError):
    """A holder's complete or release was refused: its lease no longer owns the record.

    This happens when the holder ran past its lock deadline and another invocation took the record over.
    ``existing_record`` is the record as it stands now (``None`` when it is gone).
    """
