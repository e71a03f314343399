"""A process's cache of completed records, one per store: a duplicate met again in a warm process replays
without a read (``IdempotencyConfig(use_local_cache=True)``)."""  # noqa: D205, D209 - one sentence

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any

from persistence._record import IdempotencyRecord, RecordStatus


class LocalCache:
    """Completed records of one store by key, least recently used evicted first. Never holds ``IN_PROGRESS``.

    An entry is trusted for at most ``max_age_ms`` after it was cached (and never past the record's
    expiry), so an operator's ``records delete`` reaches every warm process within that bound.
    """

    def __init__(self, max_items: int, max_age_ms: int) -> None:
        """Create an empty cache holding at most ``max_items`` records, each for at most ``max_age_ms``."""
        self._max_items = max_items
        self._max_age_ms = max_age_ms
        self._records: OrderedDict[str, tuple[IdempotencyRecord, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str, now_ms: int) -> IdempotencyRecord | None:
        """Return the record for ``key`` if it is unexpired and young enough, dropping it otherwise."""
        with self._lock:
            entry = self._records.get(key)
            if entry is None:
                return None
            record, cached_at_ms = entry
            if record.is_expired(now_ms) or now_ms - cached_at_ms > self._max_age_ms:
                del self._records[key]
                return None
            self._records.move_to_end(key)
            return record

    def put(self, record: IdempotencyRecord, now_ms: int) -> None:
        """Remember a ``COMPLETE`` record read or written at ``now_ms`` (others are ignored)."""
        if record.status is not RecordStatus.COMPLETE:
            return
        with self._lock:
            self._records[record.key] = (record, now_ms)
            self._records.move_to_end(record.key)
            while len(self._records) > self._max_items:
                self._records.popitem(last=False)

    def __len__(self) -> int:
        """Number of records held."""
        return len(self._records)


class LocalCaches:
    """One :class:`LocalCache` per store: two stores sharing a config never replay each other's records."""

    def __init__(self, max_items: int, max_age_ms: int) -> None:
        """Caches of ``max_items`` records each, entries trusted for ``max_age_ms``."""
        self._max_items = max_items
        self._max_age_ms = max_age_ms
        self._weak: weakref.WeakKeyDictionary[Any, LocalCache] = weakref.WeakKeyDictionary()
        # Stores that cannot be weakly referenced (or hashed) are kept by identity, with the store itself,
        # so an id is never reused by another store while its cache lives.
        self._by_id: dict[int, tuple[object, LocalCache]] = {}
        self._lock = threading.Lock()

    def for_store(self, store: object) -> LocalCache:
        """The cache of ``store``, made on first use."""
        with self._lock:
            try:
                cache = self._weak.get(store)
                if cache is None:
                    cache = self._weak[store] = LocalCache(self._max_items, self._max_age_ms)
            except TypeError:  # not weakly referenceable, or unhashable
                _, cache = self._by_id.setdefault(id(store), (store, LocalCache(self._max_items, self._max_age_ms)))
            return cache
