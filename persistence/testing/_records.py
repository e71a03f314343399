"""Records at a fixed point in time, for the contract's tests and for yours."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from persistence._record import IdempotencyRecord, RecordStatus

if TYPE_CHECKING:
    from persistence._base import PersistenceLayer

#: The contract's "now": a fixed instant, so every expiry in it is exact. Stores judge time only by the
#: ``now_ms`` they are given, never by their own clock.
NOW_MS = 1_700_000_000_000
NOW_S = NOW_MS // 1000
HOUR_S = 3600


def lock(key: str, *, now_ms: int = NOW_MS, lock_ms: int = 60_000, expires_in_s: int = HOUR_S) -> IdempotencyRecord:
    """Return an ``IN_PROGRESS`` record taken at ``now_ms``, locked for ``lock_ms``, with a new lease."""
    return IdempotencyRecord.in_progress(
        key, expires_at=now_ms // 1000 + expires_in_s, lock_deadline_ms=now_ms + lock_ms
    )


def acquired(
    store: PersistenceLayer, key: str, *, now_ms: int = NOW_MS, lock_ms: int = 60_000, expires_in_s: int = HOUR_S
) -> IdempotencyRecord:
    """Return the lock :func:`lock` makes, once ``store`` has granted it at ``now_ms`` (a test's set-up)."""
    held = lock(key, now_ms=now_ms, lock_ms=lock_ms, expires_in_s=expires_in_s)
    assert store.acquire(held, now_ms) is None, f"{key!r} was not free"
    return held


def done(held: IdempotencyRecord, response: str | None = "{}", *, expires_at: int | None = None) -> IdempotencyRecord:
    """Return the ``COMPLETE`` record the holder of ``held`` commits (same key and lease)."""
    return dataclasses.replace(
        held,
        status=RecordStatus.COMPLETE,
        response=response,
        expires_at=held.expires_at if expires_at is None else expires_at,
    )


def taken_over(store: PersistenceLayer, key: str = "k") -> tuple[IdempotencyRecord, IdempotencyRecord]:
    """Return a holder whose 1 s lock lapsed and the holder that took ``key`` over 2 s later: (stale, new)."""
    stale = acquired(store, key, lock_ms=1000)
    return stale, acquired(store, key, now_ms=NOW_MS + 2000)


def stored(store: PersistenceLayer, key: str) -> IdempotencyRecord:
    """Return the record stored under ``key``, failing the test if there is none."""
    record = store.get(key)
    assert record is not None, f"no record stored under {key!r}"
    return record
