"""Builders for records at a fixed point in time, shared by the tests."""

from __future__ import annotations

import dataclasses

from persistence import IdempotencyRecord, RecordStatus

NOW_MS = 1_700_000_000_000
NOW_S = NOW_MS // 1000
HOUR_S = 3600


def lock(key: str, *, now_ms: int = NOW_MS, lock_ms: int = 60_000, expires_in_s: int = HOUR_S) -> IdempotencyRecord:
    """An IN_PROGRESS record taken at ``now_ms``, with a lock of ``lock_ms`` and a new lease."""
    return IdempotencyRecord.in_progress(
        key, expires_at=now_ms // 1000 + expires_in_s, lock_deadline_ms=now_ms + lock_ms
    )


def done(held: IdempotencyRecord, response: str | None = "{}", *, expires_at: int | None = None) -> IdempotencyRecord:
    """The COMPLETE record the holder of ``held`` commits."""
    return dataclasses.replace(
        held,
        status=RecordStatus.COMPLETE,
        response=response,
        expires_at=held.expires_at if expires_at is None else expires_at,
    )


def taken_over(store, key: str = "k") -> tuple[IdempotencyRecord, IdempotencyRecord]:
    """A holder whose 1 s lock lapsed, and the holder that took the key over 2 s later: (stale, new)."""
    stale = lock(key, lock_ms=1000)
    store.acquire(stale, NOW_MS)
    new = lock(key, now_ms=NOW_MS + 2000)
    store.acquire(new, NOW_MS + 2000)
    return stale, new
