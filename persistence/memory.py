"""An in-process store for users' unit tests."""

from __future__ import annotations

import dataclasses
import itertools
import threading
from typing import TYPE_CHECKING

from persistence._attributes import check_size
from persistence._base import blocking, confirm_complete, confirm_release, require_status, require_stored_status
from persistence._record import IdempotencyRecord, RecordStatus

if TYPE_CHECKING:
    from collections.abc import Iterator


class InMemoryPersistenceLayer:
    """A thread-safe dictionary with the same conditional semantics as the real stores.

    Examples:
        >>> from persistence import InMemoryPersistenceLayer
        >>> store = InMemoryPersistenceLayer()
        >>> store.get("local#abc") is None
        True
    """

    #: Its calls never wait on I/O: async code calls them on the event loop (see :func:`as_async_store`).
    blocking = False

    def __init__(self) -> None:
        """Create an empty store."""
        self._records: dict[str, IdempotencyRecord] = {}
        self._lock = threading.Lock()

    def acquire(self, record: IdempotencyRecord, now_ms: int) -> IdempotencyRecord | None:
        """See :meth:`persistence.PersistenceLayer.acquire`."""
        require_status(record, RecordStatus.IN_PROGRESS, "acquire")
        check_size(record)
        # write IN_PROGRESS  IF absent OR expired OR (IN_PROGRESS past its deadline)  ELSE return the holder
        with self._lock:
            existing = self._records.get(record.key)
            if existing is not None and not existing.can_be_acquired(now_ms):
                return blocking(record, existing)
            self._records[record.key] = record
            return None

    def complete(self, record: IdempotencyRecord) -> None:
        """See :meth:`persistence.PersistenceLayer.complete`."""
        require_status(record, RecordStatus.COMPLETE, "complete")
        check_size(record)
        # write COMPLETE  IF lease = mine AND status = IN_PROGRESS  ELSE ours already (a retry) or LockLostError
        with self._lock:
            existing = self._records.get(record.key)
            if existing is None or existing.lease != record.lease or existing.status is not RecordStatus.IN_PROGRESS:
                confirm_complete(record, existing)
                return
            if record.in_progress_expires_at is not None:
                record = dataclasses.replace(record, in_progress_expires_at=None)
            self._records[record.key] = record

    def release(self, record: IdempotencyRecord) -> None:
        """See :meth:`persistence.PersistenceLayer.release`."""
        # delete  IF status = as read AND lease = as read
        #   ELSE gone already (released) or LockLostError(what is there: committed meanwhile, taken over, ...)
        with self._lock:
            existing = self._records.get(record.key)
            if existing is None or existing.status is not record.status or existing.lease != record.lease:
                confirm_release(record, existing)
                return
            del self._records[record.key]

    def get(self, key: str) -> IdempotencyRecord | None:
        """See :meth:`persistence.PersistenceLayer.get`."""
        with self._lock:
            return self._records.get(key)

    def delete(self, key: str) -> bool:
        """See :meth:`persistence.PersistenceLayer.delete`."""
        with self._lock:
            return self._records.pop(key, None) is not None

    def scan(self, status: RecordStatus | None = None, limit: int | None = None) -> Iterator[IdempotencyRecord]:
        """See :meth:`persistence.PersistenceLayer.scan`."""
        require_stored_status(status)
        with self._lock:
            records = [r for r in self._records.values() if status is None or r.status is status]
        return itertools.islice(records, limit)
