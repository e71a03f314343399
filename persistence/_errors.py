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


class WriteConditionError(IdempotencyError):
    """A write queued with ``guard.write`` was refused by its own condition: nothing was written.

    The record was not committed and the lock was released, so a redelivery runs the body again. Effects the
    body had outside the store's transaction (an HTTP call, a message sent, a write to another store) did
    happen.

    Attributes:
        index: Which write failed, counted from 0 in the order the body queued them.
        reason: The store's reason: DynamoDB's cancellation code (``ConditionalCheckFailed``), or the SQLite
            error's class name (``IntegrityError``).
        detail: The store's own message, if it gave one.
    """

    def __init__(self, *, key: str, index: int, reason: str, detail: str | None) -> None:
        """Build the error.

        Args:
            key: The idempotency key whose commit carried the write.
            index: The write's position among those queued.
            reason: The store's reason code.
            detail: The store's message.
        """
        said = f": {detail}" if detail else ""
        super().__init__(
            f"write {index} queued by the body of {key!r} was refused ({reason}{said}); nothing was written, "
            "the lock was released",
            key=key,
        )
        self.index = index
        self.reason = reason
        self.detail = detail
