"""A thread-safe LRU of COMPLETE records, so a warm duplicate costs no request."""

from __future__ import annotations

import threading
from collections import OrderedDict

from persistence import IdempotencyRecord, RecordStatus


class LocalCache:
    """Completed records by key, least recently used evicted first. Never holds ``IN_PROGRESS``."""

    def __init__(self, max_items: int) -> None:
        """Create an empty cache holding at most ``max_items`` records."""
        self._max_items = max_items
        self._records: OrderedDict[str, IdempotencyRecord] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str, now_ms: int) -> IdempotencyRecord | None:
        """Return the unexpired record for ``key``, dropping it if it has expired."""
        with self._lock:
            record = self._records.get(key)
            if record is None:
                return None
            if record.is_expired(now_ms):
                del self._records[key]
                return None
            self._records.move_to_end(key)
            return record

    def put(self, record: IdempotencyRecord) -> None:
        """Remember a ``COMPLETE`` record (others are ignored)."""
        if record.status is not RecordStatus.COMPLETE:
            return
        with self._lock:
            self._records[record.key] = record
            self._records.move_to_end(record.key)
            while len(self._records) > self._max_items:
                self._records.popitem(last=False)

    def discard(self, key: str) -> None:
        """Forget ``key``."""
        with self._lock:
            self._records.pop(key, None)

    def __len__(self) -> int:
        """Number of records held."""
        return len(self._records)
