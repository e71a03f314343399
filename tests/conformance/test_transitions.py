"""Every row of DESIGN.md's transition table, on every backend."""

from __future__ import annotations

import pytest
from records import HOUR_S, NOW_MS, NOW_S, done, lock, taken_over

from persistence import IdempotencyRecord, LockLostError, RecordStatus


class TestAcquire:
    def test_absent_key_is_acquired_and_stored_as_given(self, store):
        held = lock("k")
        assert store.acquire(held, NOW_MS) is None
        assert store.get("k") == held

    def test_live_in_progress_blocks_and_returns_the_holder(self, store):
        first = lock("k")
        store.acquire(first, NOW_MS)
        existing = store.acquire(lock("k"), NOW_MS + 59_999)
        assert existing == first
        assert store.get("k").lease == first.lease

    def test_in_progress_at_exactly_its_deadline_still_blocks(self, store):
        first = lock("k", lock_ms=1000)
        store.acquire(first, NOW_MS)
        assert store.acquire(lock("k"), NOW_MS + 1000) == first

    def test_in_progress_past_its_deadline_is_taken_over(self, store):
        store.acquire(lock("k", lock_ms=1000), NOW_MS)
        takeover = lock("k", now_ms=NOW_MS + 1001)
        assert store.acquire(takeover, NOW_MS + 1001) is None
        assert store.get("k") == takeover

    def test_live_complete_blocks_and_returns_the_result(self, store):
        held = lock("k")
        store.acquire(held, NOW_MS)
        store.complete(done(held, '{"charged": 42}'))
        existing = store.acquire(lock("k"), NOW_MS + 1000)
        assert existing.status is RecordStatus.COMPLETE
        assert existing.response == '{"charged": 42}'
        assert existing.lease == held.lease

    def test_complete_within_its_window_blocks_even_past_the_old_lock_deadline(self, store):
        held = lock("k", lock_ms=1000)
        store.acquire(held, NOW_MS)
        store.complete(done(held))
        assert store.acquire(lock("k"), NOW_MS + 10_000).status is RecordStatus.COMPLETE

    def test_expired_complete_is_acquired_again(self, store):
        held = lock("k", lock_ms=1000, expires_in_s=10)
        store.acquire(held, NOW_MS)
        store.complete(done(held))
        later = NOW_MS + 11_000
        again = lock("k", now_ms=later)
        assert store.acquire(again, later) is None
        assert store.get("k") == again

    def test_complete_at_exactly_its_expiry_second_still_blocks(self, store):
        held = lock("k", lock_ms=1000, expires_in_s=10)
        store.acquire(held, NOW_MS)
        store.complete(done(held))
        assert store.acquire(lock("k"), (NOW_S + 10) * 1000 + 999) is not None

    def test_in_progress_with_an_expired_window_is_acquired(self, store):
        # The lock deadline is after expires_at only if a writer broke the in_progress() clamp; the
        # expiry condition alone still frees the key.
        stale = IdempotencyRecord("k", RecordStatus.IN_PROGRESS, NOW_S - 1, NOW_MS + HOUR_S * 1000, "old")
        store.acquire(stale, NOW_MS - 5000)
        assert store.acquire(lock("k"), NOW_MS) is None

    def test_acquire_retried_after_it_succeeded_is_ours(self, store):
        held = lock("k")
        store.acquire(held, NOW_MS)
        assert store.acquire(held, NOW_MS + 1) is None  # the same lease: our own earlier attempt
        assert store.get("k") == held

    def test_acquire_takes_only_in_progress_records(self, store):
        with pytest.raises(ValueError, match="acquire takes a IN_PROGRESS record"):
            store.acquire(done(lock("k")), NOW_MS)


class TestComplete:
    def test_holder_completes(self, store):
        held = lock("k")
        store.acquire(held, NOW_MS)
        committed = done(held, "[1, 2]", expires_at=NOW_S + 7200)
        store.complete(committed)
        stored = store.get("k")
        assert (stored.status, stored.response, stored.expires_at) == (RecordStatus.COMPLETE, "[1, 2]", NOW_S + 7200)
        assert stored.in_progress_expires_at is None

    def test_stale_holder_is_refused_after_a_takeover(self, store):
        stale, new = taken_over(store)
        with pytest.raises(LockLostError) as caught:
            store.complete(done(stale, '"stale"'))
        assert caught.value.key == "k"
        assert caught.value.existing_record == new
        assert store.get("k") == new

    def test_completing_twice_is_a_no_op_for_the_holder(self, store):
        # A retried request whose first attempt succeeded must not fail, nor overwrite.
        held = lock("k")
        store.acquire(held, NOW_MS)
        store.complete(done(held, '"first"'))
        store.complete(done(held, '"second"'))
        assert store.get("k").response == '"first"'

    def test_completing_a_record_that_is_gone_is_refused(self, store):
        held = lock("k")
        store.acquire(held, NOW_MS)
        store.delete("k")
        with pytest.raises(LockLostError) as caught:
            store.complete(done(held))
        assert caught.value.existing_record is None
        assert store.get("k") is None

    def test_complete_without_a_response_stores_none(self, store):
        held = lock("k")
        store.acquire(held, NOW_MS)
        store.complete(done(held, None))
        assert store.get("k").response is None
        assert store.get("k").status is RecordStatus.COMPLETE


class TestRelease:
    def test_holder_releases_and_the_key_is_free(self, store):
        held = lock("k")
        store.acquire(held, NOW_MS)
        store.release("k", held.lease)
        assert store.get("k") is None
        assert store.acquire(lock("k"), NOW_MS) is None

    def test_stale_holder_release_is_refused_and_deletes_nothing(self, store):
        stale, new = taken_over(store)
        with pytest.raises(LockLostError) as caught:
            store.release("k", stale.lease)
        assert caught.value.existing_record == new
        assert store.get("k") == new

    def test_release_of_a_missing_record_counts_as_released(self, store):
        held = lock("k")
        store.acquire(held, NOW_MS)
        store.release("k", held.lease)
        store.release("k", held.lease)  # a retried request whose first attempt succeeded
        assert store.get("k") is None

    def test_release_of_a_completed_record_is_refused_and_deletes_nothing(self, store):
        held = lock("k")
        store.acquire(held, NOW_MS)
        store.complete(done(held))
        other = lock("k2")
        store.acquire(other, NOW_MS)
        with pytest.raises(LockLostError):
            store.release("k", other.lease)
        assert store.get("k").status is RecordStatus.COMPLETE
