"""An in-process store for users' unit tests."""

from __future__ import annotations

import dataclasses
import itertools
import threading
from typing import TYPE_CHECKING, Any

from persistence._attributes import check_size
from persistence._base import ConditionalStore, require_stored_status
from persistence._record import IN_PROGRESS, IdempotencyRecord, RecordStatus

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence


class InMemoryPersistenceLayer(ConditionalStore):
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
        """Create an empty store.

        Attributes:
            writes: The writes bodies committed with their records (``guard.write``), as ``(key, write)`` in
                commit order: a unit test reads what its handler committed. A write is kept as the body gave it
                (``(item, params)`` when it gave params), whatever its shape, and never run: this store refuses no
                write's condition.
        """
        self._records: dict[str, IdempotencyRecord] = {}
        self._lock = threading.Lock()
        self.writes: list[tuple[str, Any]] = []

    def _acquire(self, record: IdempotencyRecord, now_ms: int) -> IdempotencyRecord | None:
        check_size(record)
        # write IN_PROGRESS  IF absent OR expired OR (IN_PROGRESS past its deadline)  ELSE return the holder
        with self._lock:
            existing = self._records.get(record.key)
            if existing is not None and not existing.can_be_acquired(now_ms):
                return existing
            self._records[record.key] = record
            return record

    def queue_write(self, key: str, writes: list[Any], item: Any, params: Any) -> None:  # noqa: ARG002 - the contract's
        """See :meth:`persistence.TransactionalStore.queue_write`: any write, kept in :attr:`writes` once committed."""
        writes.append(item if params is None else (item, params))

    def complete_with(self, record: IdempotencyRecord, writes: Sequence[Any]) -> None:
        """See :meth:`persistence.TransactionalStore.complete_with`: the writes join :attr:`writes` with the commit."""
        self._commit(record, writes)

    def _complete(self, record: IdempotencyRecord, writes: Sequence[Any] | None) -> IdempotencyRecord | None:
        check_size(record)
        # write COMPLETE  IF lease = mine AND status = IN_PROGRESS  ELSE ours already (a retry) or LockLostError
        with self._lock:
            existing = self._records.get(record.key)
            if existing is None or existing.lease != record.lease or existing.status is not IN_PROGRESS:
                return existing
            if record.in_progress_expires_at is not None:
                record = dataclasses.replace(record, in_progress_expires_at=None)
            self._records[record.key] = record
            if writes:
                self.writes.extend((record.key, write) for write in writes)
            return record

    def _release(self, record: IdempotencyRecord) -> IdempotencyRecord | None:
        # delete  IF status = as read AND lease = as read
        #   ELSE gone already (released) or LockLostError(what is there: committed meanwhile, taken over, ...)
        with self._lock:
            existing = self._records.get(record.key)
            if existing is None or existing.status is not record.status or existing.lease != record.lease:
                return existing
            del self._records[record.key]
            return None

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
