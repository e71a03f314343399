"""Every row of the transition table (DESIGN.md): acquire, complete and release, one store at a time."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from persistence._errors import LockLostError
from persistence._record import IdempotencyRecord, RecordStatus
from persistence.testing._records import HOUR_S, NOW_MS, NOW_S, acquired, done, lock, stored, taken_over

if TYPE_CHECKING:
    from persistence._base import PersistenceLayer


class AcquireContract:
    """``acquire``: a free key is taken; a held one answers with its holder, in the same call."""

    def test_absent_key_is_acquired_and_stored_as_given(self, store: PersistenceLayer) -> None:
        held = lock("k")
        assert store.acquire(held, NOW_MS) is None
        assert store.get("k") == held

    def test_live_in_progress_blocks_and_returns_the_holder(self, store: PersistenceLayer) -> None:
        first = acquired(store, "k")
        assert store.acquire(lock("k"), NOW_MS + 59_999) == first
        assert stored(store, "k").lease == first.lease

    def test_in_progress_at_exactly_its_deadline_still_blocks(self, store: PersistenceLayer) -> None:
        first = acquired(store, "k", lock_ms=1000)
        assert store.acquire(lock("k"), NOW_MS + 1000) == first

    def test_in_progress_past_its_deadline_is_taken_over(self, store: PersistenceLayer) -> None:
        store.acquire(lock("k", lock_ms=1000), NOW_MS)
        takeover = lock("k", now_ms=NOW_MS + 1001)
        assert store.acquire(takeover, NOW_MS + 1001) is None
        assert store.get("k") == takeover

    def test_live_complete_blocks_and_returns_the_result(self, store: PersistenceLayer) -> None:
        held = acquired(store, "k")
        store.complete(done(held, '{"charged": 42}'))
        existing = store.acquire(lock("k"), NOW_MS + 1000)
        assert existing is not None
        assert existing.status is RecordStatus.COMPLETE
        assert existing.response == '{"charged": 42}'
        assert existing.lease == held.lease

    def test_complete_within_its_window_blocks_even_past_the_old_lock_deadline(self, store: PersistenceLayer) -> None:
        held = acquired(store, "k", lock_ms=1000)
        store.complete(done(held))
        existing = store.acquire(lock("k"), NOW_MS + 10_000)
        assert existing is not None
        assert existing.status is RecordStatus.COMPLETE

    def test_expired_complete_is_acquired_again(self, store: PersistenceLayer) -> None:
        held = acquired(store, "k", lock_ms=1000, expires_in_s=10)
        store.complete(done(held))
        later = NOW_MS + 11_000
        again = lock("k", now_ms=later)
        assert store.acquire(again, later) is None
        assert store.get("k") == again

    def test_complete_at_exactly_its_expiry_second_still_blocks(self, store: PersistenceLayer) -> None:
        held = acquired(store, "k", lock_ms=1000, expires_in_s=10)
        store.complete(done(held))
        assert store.acquire(lock("k"), (NOW_S + 10) * 1000 + 999) is not None

    def test_in_progress_with_an_expired_window_is_acquired(self, store: PersistenceLayer) -> None:
        # The lock deadline is after expires_at only if a writer broke the in_progress() clamp; the
        # expiry condition alone still frees the key.
        stale = IdempotencyRecord("k", RecordStatus.IN_PROGRESS, NOW_S - 1, NOW_MS + HOUR_S * 1000, "old")
        store.acquire(stale, NOW_MS - 5000)
        assert store.acquire(lock("k"), NOW_MS) is None

    def test_acquire_retried_after_it_succeeded_is_ours(self, store: PersistenceLayer) -> None:
        held = acquired(store, "k")
        assert store.acquire(held, NOW_MS + 1) is None  # the same lease: our own earlier attempt
        assert store.get("k") == held

    def test_acquire_takes_only_in_progress_records(self, store: PersistenceLayer) -> None:
        with pytest.raises(ValueError, match="acquire takes a IN_PROGRESS record"):
            store.acquire(done(lock("k")), NOW_MS)


class CompleteContract:
    """``complete``: only the holder's lease turns its ``IN_PROGRESS`` record ``COMPLETE``."""

    def test_holder_completes(self, store: PersistenceLayer) -> None:
        held = acquired(store, "k")
        store.complete(done(held, "[1, 2]", expires_at=NOW_S + 7200))
        record = stored(store, "k")
        assert (record.status, record.response, record.expires_at) == (RecordStatus.COMPLETE, "[1, 2]", NOW_S + 7200)
        assert record.in_progress_expires_at is None

    def test_stale_holder_is_refused_after_a_takeover(self, store: PersistenceLayer) -> None:
        stale, new = taken_over(store)
        with pytest.raises(LockLostError) as caught:
            store.complete(done(stale, '"stale"'))
        assert caught.value.key == "k"
        assert caught.value.existing_record == new
        assert store.get("k") == new

    def test_completing_twice_is_a_no_op_for_the_holder(self, store: PersistenceLayer) -> None:
        # A retried request whose first attempt succeeded must not fail, nor overwrite.
        held = acquired(store, "k")
        store.complete(done(held, '"first"'))
        store.complete(done(held, '"second"'))
        assert stored(store, "k").response == '"first"'

    def test_completing_a_record_that_is_gone_is_refused(self, store: PersistenceLayer) -> None:
        held = acquired(store, "k")
        store.delete("k")
        with pytest.raises(LockLostError) as caught:
            store.complete(done(held))
        assert caught.value.existing_record is None
        assert store.get("k") is None

    def test_complete_without_a_response_stores_none(self, store: PersistenceLayer) -> None:
        held = acquired(store, "k")
        store.complete(done(held, None))
        assert stored(store, "k").response is None
        assert stored(store, "k").status is RecordStatus.COMPLETE

    def test_complete_takes_only_complete_records(self, store: PersistenceLayer) -> None:
        held = acquired(store, "k")
        with pytest.raises(ValueError, match="complete takes a COMPLETE record"):
            store.complete(held)
        assert store.get("k") == held


class ReleaseContract:
    """``release``: deletes the record only as it was read, its status and lease; a record gone counts as released.

    The holder releases the ``IN_PROGRESS`` lock it acquired; an operator (``records delete``) releases the record
    it read. A record changed since (committed by its holder, taken over, acquired again) is left alone.
    """

    def test_holder_releases_and_the_key_is_free(self, store: PersistenceLayer) -> None:
        held = acquired(store, "k")
        store.release(held)
        assert store.get("k") is None
        assert store.acquire(lock("k"), NOW_MS) is None

    def test_stale_holder_release_is_refused_and_deletes_nothing(self, store: PersistenceLayer) -> None:
        stale, new = taken_over(store)
        with pytest.raises(LockLostError) as caught:
            store.release(stale)
        assert caught.value.existing_record == new
        assert store.get("k") == new

    def test_release_of_a_missing_record_counts_as_released(self, store: PersistenceLayer) -> None:
        held = acquired(store, "k")
        store.release(held)
        store.release(held)  # a retried request whose first attempt succeeded
        assert store.get("k") is None

    def test_release_of_a_completed_record_is_refused_and_deletes_nothing(self, store: PersistenceLayer) -> None:
        held = acquired(store, "k")
        store.complete(done(held))
        with pytest.raises(LockLostError):
            store.release(lock("k"))  # another lease, never stored
        assert stored(store, "k").status is RecordStatus.COMPLETE

    def test_release_of_a_lock_its_holder_committed_since_it_was_read_is_refused(self, store: PersistenceLayer) -> None:
        # An operator reads the lock (past its deadline: its holder looks crashed, but is only slow) and is asked
        # to confirm; meanwhile the holder commits. The COMPLETE record carries the lock's lease: only its status
        # tells it apart, and deleting it would run the record again.
        held = acquired(store, "k", lock_ms=1000)
        read = stored(store, "k")
        committed = done(held, '"charged"')
        store.complete(committed)
        with pytest.raises(LockLostError) as caught:
            store.release(read)
        assert caught.value.key == "k"
        assert caught.value.existing_record == stored(store, "k")
        assert (stored(store, "k").status, stored(store, "k").response) == (RecordStatus.COMPLETE, '"charged"')

    def test_release_of_a_complete_record_as_read_deletes_it(self, store: PersistenceLayer) -> None:
        held = acquired(store, "k")
        store.complete(done(held))
        store.release(stored(store, "k"))  # an operator lets the record run again
        assert store.get("k") is None

    def test_release_of_an_expired_complete_record_acquired_again_is_refused(self, store: PersistenceLayer) -> None:
        held = acquired(store, "k", lock_ms=1000, expires_in_s=10)
        store.complete(done(held))
        read = stored(store, "k")
        again = acquired(store, "k", now_ms=NOW_MS + 11_000)
        with pytest.raises(LockLostError):
            store.release(read)  # the new lock: the same key, another lease
        store.complete(done(again, '"second"'))
        with pytest.raises(LockLostError):
            store.release(read)  # COMPLETE again, under another lease
        assert stored(store, "k").response == '"second"'
