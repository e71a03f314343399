"""The store contract every backend fulfils, and the checks they share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from persistence._errors import LockLostError
from persistence._record import IdempotencyRecord, RecordStatus

if TYPE_CHECKING:
    from collections.abc import Iterator


@runtime_checkable
class PersistenceLayer(Protocol):
    """Where idempotency records live.

    Each of ``acquire``, ``complete`` and ``release`` is ONE atomic conditional write. Bring your own
    store by implementing these methods; ``tests/conformance`` is the suite it must pass.
    """

    def acquire(self, record: IdempotencyRecord, now_ms: int) -> IdempotencyRecord | None:
        """Write ``record`` (``IN_PROGRESS``, with a new lease) if the key is free.

        The key is free when no record exists, the stored record has expired (``expires_at`` before
        ``now_ms``), or it is ``IN_PROGRESS`` past its lock deadline.

        Args:
            record: The ``IN_PROGRESS`` record to write.
            now_ms: The caller's clock, epoch milliseconds.

        A retried request whose first attempt succeeded finds the record under its own lease: that is
        success too.

        Returns:
            ``None`` when the lock is now ours; otherwise the record that holds the key.

        Raises:
            PersistenceLayerError: The store failed.
        """
        ...

    def complete(self, record: IdempotencyRecord) -> None:
        """Replace the holder's ``IN_PROGRESS`` record by ``record`` (``COMPLETE``, same lease).

        Args:
            record: The ``COMPLETE`` record; its ``lease`` is the holder's.

        A retried request whose first attempt succeeded finds the record ``COMPLETE`` under the same lease
        and returns without writing: the lease is unique to one acquire, so this is unambiguous.

        Raises:
            LockLostError: The stored record is gone, or held under another lease.
            ItemTooLargeError: The record would exceed the 400 KB item limit.
            PersistenceLayerError: The store failed.
        """
        ...

    def release(self, key: str, lease: str) -> None:
        """Delete the record the holder of ``lease`` wrote, so the key can run again.

        A record that is already gone counts as released (a retried request, or an operator's delete).

        Raises:
            LockLostError: The record is held under another lease (it was taken over).
            PersistenceLayerError: The store failed.
        """
        ...

    def get(self, key: str) -> IdempotencyRecord | None:
        """Return the stored record for ``key`` (strongly consistent), or ``None``."""
        ...

    def delete(self, key: str) -> bool:
        """Delete ``key`` unconditionally (an operator's reset); return whether it existed."""
        ...

    def scan(self, status: RecordStatus | None = None, limit: int | None = None) -> Iterator[IdempotencyRecord]:
        """Yield stored records, optionally only those with the stored ``status``, at most ``limit``."""
        ...


def require_status(record: IdempotencyRecord, status: RecordStatus, operation: str) -> None:
    """Raise ``ValueError`` unless ``record`` has ``status`` (guards against misuse of the contract)."""
    if record.status is not status:
        msg = f"{operation} takes a {status.value} record; got {record.status.value} for {record.key!r}"
        raise ValueError(msg)


def require_stored_status(status: RecordStatus | None) -> None:
    """Raise ``ValueError`` for a filter on ``EXPIRED``, which is derived and never stored."""
    if status is RecordStatus.EXPIRED:
        msg = "EXPIRED is derived from timestamps, not stored: scan all and use effective_status()"
        raise ValueError(msg)


def lock_lost(operation: str, key: str, existing: IdempotencyRecord | None) -> LockLostError:
    """Build the :class:`LockLostError` a fenced-out ``complete`` or ``release`` raises."""
    now = "gone" if existing is None else f"{existing.status.value} under another lease"
    return LockLostError(
        f"cannot {operation} {key!r}: the lock is no longer ours (the record is {now})",
        key=key,
        existing_record=existing,
    )


def confirm_complete(record: IdempotencyRecord, existing: IdempotencyRecord | None) -> None:
    """After a refused complete: return if ``existing`` is already our ``COMPLETE`` record, else raise."""
    if existing is not None and existing.lease == record.lease and existing.status is RecordStatus.COMPLETE:
        return
    raise lock_lost("complete", record.key, existing)


def confirm_release(key: str, existing: IdempotencyRecord | None) -> None:
    """After a refused release: return if the record is gone (the key is free), else raise."""
    if existing is not None:
        raise lock_lost("release", key, existing)


def blocking(record: IdempotencyRecord, existing: IdempotencyRecord | None) -> IdempotencyRecord | None:
    """After a refused acquire: the record that holds the key, or ``None`` if it is ours already (a retry)."""
    return None if existing is not None and existing.lease == record.lease else existing
