"""The store contract every backend fulfils, and the checks they share."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from persistence._errors import LockLostError, PersistenceLayerError
from persistence._record import COMPLETE, IN_PROGRESS, IdempotencyRecord, RecordStatus

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence


@runtime_checkable
class PersistenceLayer(Protocol):
    """Where idempotency records live.

    Each of ``acquire``, ``complete`` and ``release`` is ONE atomic conditional write. Bring your own
    store by implementing these methods; :class:`persistence.testing.StoreContract` is the suite it must pass.
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

    def release(self, record: IdempotencyRecord) -> None:
        """Delete ``record`` if the store still holds it as it was read: same key, status and lease.

        A holder releases its ``IN_PROGRESS`` lock after its body failed; an operator's ``records delete``
        releases the record it read, whatever its status. The status and the lease together name one version
        of a key: a lease is new on every acquire, and under one lease a record is written ``IN_PROGRESS``
        once, then turned ``COMPLETE`` at most once. So a lock committed meanwhile (``COMPLETE``, same lease),
        a record taken over or acquired again after it expired (another lease) are left alone.

        A record that is already gone counts as released (a retried request, or an operator's delete).

        Args:
            record: The record as read (a holder's: the ``IN_PROGRESS`` record it acquired).

        Raises:
            LockLostError: The stored record has another status or another lease; ``existing_record`` is it.
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


@runtime_checkable
class TransactionalStore(Protocol):
    """A store that commits the body's own writes (``guard.write``) in one transaction with the record.

    The guard tests for this capability when the body queues a write: a store without it is refused there.
    What a write is belongs to the store: a ``TransactWriteItems`` entry on DynamoDB, SQL and its parameters on
    SQLite. An async store implements ``complete_with`` as ``async def``; ``queue_write`` stays plain.
    """

    def queue_write(self, key: str, writes: list[Any], item: Any, params: Any) -> None:
        """Check one write the body of ``key`` queues and append it to ``writes``; nothing is sent.

        Raises:
            TypeError: ``item`` (or ``params``) is not a write this store takes.
            ValueError: The write breaks a limit of the store's transactions (counted with those queued).
        """
        ...

    def complete_with(self, record: IdempotencyRecord, writes: Sequence[Any]) -> None:
        """Commit ``record`` as :meth:`PersistenceLayer.complete` does, and ``writes`` with it: all or nothing.

        A retried commit whose first attempt applied finds the record ``COMPLETE`` under its lease and returns:
        the writes applied with it, once.

        Raises:
            LockLostError: The lock is not ours (nothing is written).
            WriteConditionError: A write's own condition failed (nothing is written).
            ItemTooLargeError: The record would exceed the item limit (nothing is sent).
            PersistenceLayerError: The store failed.
        """
        ...


def misuse(record: IdempotencyRecord, status: RecordStatus, operation: str) -> ValueError:
    """The ``ValueError`` for a ``record`` without the ``status`` the ``operation`` takes (misuse of the contract)."""
    msg = f"{operation} takes a {status.value} record; got {record.status.value} for {record.key!r}"
    return ValueError(msg)


def require_stored_status(status: RecordStatus | None) -> None:
    """Raise ``ValueError`` for a filter on ``EXPIRED``, which is derived and never stored."""
    if status is RecordStatus.EXPIRED:
        msg = "EXPIRED is derived from timestamps, not stored: scan all and use effective_status()"
        raise ValueError(msg)


def lock_lost(operation: str, record: IdempotencyRecord, existing: IdempotencyRecord | None) -> LockLostError:
    """Build the :class:`LockLostError` a fenced-out ``complete`` or ``release`` of ``record`` raises."""
    lease = "the same lease" if existing is not None and existing.lease == record.lease else "another lease"
    now = "gone" if existing is None else f"{existing.status.value} under {lease}"
    return LockLostError(
        f"cannot {operation} {record.key!r}: the lock is no longer ours (the record is {now})",
        key=record.key,
        existing_record=existing,
    )


class ConditionalStore:
    """The three transitions as one decision each over the store's own conditional write: what every store shares.

    A store implements ``_acquire``, ``_complete`` and ``_release``, each ONE conditional write of the transition
    table (DESIGN.md) that returns the record standing under the key once it has run: the record it wrote when the
    write was applied (``None`` when a release was), else the record the write found, read in the same round trip or
    transaction (``None``: nothing). A write checks first that its item fits (``check_size``, counted as the store
    lays the item out). Which status each transition takes, and what the record standing means, is decided here.
    """

    def _acquire(self, record: IdempotencyRecord, now_ms: int) -> IdempotencyRecord | None:
        raise NotImplementedError

    def _complete(self, record: IdempotencyRecord, writes: Sequence[Any] | None) -> IdempotencyRecord | None:
        raise NotImplementedError

    def _release(self, record: IdempotencyRecord) -> IdempotencyRecord | None:
        raise NotImplementedError

    def acquire(self, record: IdempotencyRecord, now_ms: int) -> IdempotencyRecord | None:
        """See :meth:`persistence.PersistenceLayer.acquire`."""
        if record.status is not IN_PROGRESS:
            raise misuse(record, IN_PROGRESS, "acquire")
        standing = self._acquire(record, now_ms)
        # Ours: this write, or an earlier attempt of it whose answer was lost (our lease). Else the holder.
        return None if standing is record or standing is None or standing.lease == record.lease else standing

    def complete(self, record: IdempotencyRecord) -> None:
        """See :meth:`persistence.PersistenceLayer.complete`."""
        self._commit(record, None)

    def _commit(self, record: IdempotencyRecord, writes: Sequence[Any] | None) -> None:
        """Commit ``record``, and ``writes`` with it (``complete_with``); ``None`` for a ``complete``."""
        if record.status is not COMPLETE:
            raise misuse(record, COMPLETE, "complete")
        standing = self._complete(record, writes)
        if standing is record:  # this write
            return
        # Our COMPLETE record already: a retried commit (its writes went with it, once). Else the lock was lost.
        if standing is None or standing.lease != record.lease or standing.status is not record.status:
            raise lock_lost("complete", record, standing)

    def release(self, record: IdempotencyRecord) -> None:
        """See :meth:`persistence.PersistenceLayer.release`."""
        standing = self._release(record)
        if standing is not None:  # gone, by this write or before it (a retry, an operator's delete): released
            raise lock_lost("release", record, standing)


_STORED_STATUSES = {status.value: status for status in (RecordStatus.IN_PROGRESS, RecordStatus.COMPLETE)}
_INTEGER = r"-?[0-9]+"  # compiled with its first use (re keeps it), not with every cold start


def _missing(name: str) -> ValueError:
    return ValueError(f"{name} is missing")


def _text(name: str, value: object) -> str:
    if not isinstance(value, str):
        # A stored response is the application's data: named by its type, never quoted (this error is logged).
        shown = f"a value of type {type(value).__name__}" if name == "response" else repr(value)
        raise _missing(name) if value is None else TypeError(f"{name} is not text: {shown}")
    return value


def _integer(name: str, value: object) -> int:
    # DynamoDB hands a number over as its decimal text, SQLite as an int; a bool is an int to Python: refused.
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(_INTEGER, value):
        return int(value)
    raise _missing(name) if value is None else TypeError(f"{name} is not a whole number: {value!r}")


def _status(value: object) -> RecordStatus:
    status = _STORED_STATUSES.get(_text("status", value))
    if status is None:
        raise ValueError(f"status is {value!r}, not {' or '.join(_STORED_STATUSES)}")
    return status


def decode_record(
    *,
    key: object,
    status: object,
    expires_at: object,
    in_progress_expires_at: object,
    lease: object,
    response: object,
    payload_hash: object,
) -> IdempotencyRecord:
    """Build the record a store read, checking every value: the one place every backend decodes an item.

    Args:
        key: The stored key.
        status: The stored status: ``IN_PROGRESS`` or ``COMPLETE`` (``EXPIRED`` is never stored).
        expires_at: Epoch seconds, an ``int`` or its decimal text (as DynamoDB returns numbers).
        in_progress_expires_at: Epoch milliseconds, likewise; ``None`` when absent.
        lease: The holder's lease; ``None`` when absent, read as ``""`` (no holder's lease matches it).
        response: The stored result's JSON text, or ``None``.
        payload_hash: The payload-validation hash, or ``None``.

    Raises:
        PersistenceLayerError: The item is not a record this library wrote (another library's status
            such as ``PENDING``, a missing status or expiry, a number that is not a whole number, a value
            of the wrong type). It names the key and chains the cause.
    """
    try:
        return IdempotencyRecord(
            key=_text("the key", key),
            status=_status(status),
            expires_at=_integer("expires_at", expires_at),
            in_progress_expires_at=None
            if in_progress_expires_at is None
            else _integer("in_progress_expires_at", in_progress_expires_at),
            lease="" if lease is None else _text("lease", lease),
            response=None if response is None else _text("response", response),
            payload_hash=None if payload_hash is None else _text("payload_hash", payload_hash),
        )
    except (TypeError, ValueError) as e:
        name = key if isinstance(key, str) else repr(key)
        raise PersistenceLayerError(f"stored item {name!r} is not a record this library wrote: {e}", key=name) from e
