"""Every branch of IdempotencyGuard with an injected clock, on every backend (the conftest ``store``
fixture: in-memory, SQLite, and DynamoDB Local with simple, composite and custom-named tables), through
``with`` and ``async with`` alike (the ``face`` fixture, ``tests/faces.py``)."""

from __future__ import annotations

import collections
import logging
import sys

import pytest
from fakes import CountingStore, FakeClock, FakeContext
from records import NOW_MS, NOW_S

from consumer import (
    AlreadyProcessed,
    IdempotencyAlreadyInProgressError,
    IdempotencyConfig,
    IdempotencyGuard,
    IdempotencyKeyError,
    IdempotencyValidationError,
    InvalidResultError,
    LockLostError,
    PersistenceLayerError,
)
from persistence import MAX_ITEM_BYTES, InMemoryPersistenceLayer, RecordStatus

SQS_RECORD = {
    "messageId": "m-1",
    "body": '{"order_id": "o-1", "amount": 30}',
    "attributes": {"ApproximateReceiveCount": "1"},
}


@pytest.fixture
def clock():
    return FakeClock()


def run(face, record, store, clock, result="done", *, config=None, context=None, calls=None):
    """Run a guarded body (through ``face``) that appends to ``calls``; return the result or the replayed response."""

    def body(guard):
        if calls is not None:
            calls.append(guard.key)
        guard.result = result
        return guard.result

    try:
        return ("ran", face.guarded(record, body, store=store, config=config, context=context, clock=clock))
    except AlreadyProcessed as done:
        return ("replayed", done.response)


def keep(guards, result=None):
    """A body that keeps its guard in ``guards`` (to look at it after the block) and sets ``result``."""

    def body(guard):
        guards.append(guard)
        guard.result = result

    return body


class TestFirstRunAndReplay:
    def test_first_run_commits_the_result(self, face, store, clock):
        guards = []
        face.guarded(SQS_RECORD, keep(guards, {"charged": 30}), store=store, clock=clock)
        stored = store.get(guards[0].key)
        assert stored.status is RecordStatus.COMPLETE
        assert stored.response == '{"charged":30}'
        assert stored.expires_at == NOW_S + 3600

    def test_duplicate_does_not_run_the_body_and_replays_the_result(self, face, store, clock):
        calls = []
        assert run(face, SQS_RECORD, store, clock, {"charged": 30}, calls=calls) == ("ran", {"charged": 30})
        assert run(face, SQS_RECORD, store, clock, "other", calls=calls) == ("replayed", {"charged": 30})
        assert len(calls) == 1

    @pytest.mark.parametrize("result", [0, "", [], False, None, {}, "ü"], ids=repr)
    def test_falsy_results_replay_exactly(self, face, store, clock, result):
        run(face, SQS_RECORD, store, clock, result)
        kind, replayed = run(face, SQS_RECORD, store, clock, "not this")
        assert kind == "replayed"
        assert replayed == result
        assert type(replayed) is type(result)

    def test_already_processed_carries_key_record_and_stored_flag(self, face, store, clock):
        run(face, SQS_RECORD, store, clock, 5)
        with pytest.raises(AlreadyProcessed) as caught:
            face.guarded(SQS_RECORD, keep([]), store=store, clock=clock)
        assert caught.value.record.status is RecordStatus.COMPLETE
        assert caught.value.key == caught.value.record.key
        assert caught.value.response_stored is True

    def test_redelivery_with_a_new_receive_count_is_still_a_duplicate(self, face, store, clock):
        run(face, SQS_RECORD, store, clock, 1)
        redelivered = {**SQS_RECORD, "attributes": {"ApproximateReceiveCount": "2"}}
        assert run(face, redelivered, store, clock, 2) == ("replayed", 1)

    def test_response_hook_shapes_the_replayed_response(self, face, store, clock):
        config = IdempotencyConfig(response_hook=lambda response, record: {"replayed": response, "key": record.key})
        run(face, SQS_RECORD, store, clock, 7, config=config)
        kind, replayed = run(face, SQS_RECORD, store, clock, 8, config=config)
        assert kind == "replayed"
        assert replayed["replayed"] == 7
        assert replayed["key"].startswith("local#")

    def test_expired_complete_runs_again(self, face, store, clock):
        config = IdempotencyConfig(expires_after_seconds=60)
        run(face, SQS_RECORD, store, clock, 1, config=config)
        clock.advance(60)
        assert run(face, SQS_RECORD, store, clock, 2, config=config) == ("replayed", 1)
        clock.advance(1)
        assert run(face, SQS_RECORD, store, clock, 3, config=config) == ("ran", 3)


class TestLocks:
    def test_live_lock_raises_in_progress_with_the_holder(self, face, store, clock):
        first = face.enter(IdempotencyGuard(SQS_RECORD, store=store, clock=clock))
        with pytest.raises(IdempotencyAlreadyInProgressError) as caught:
            face.enter(IdempotencyGuard(SQS_RECORD, store=store, clock=clock))
        assert caught.value.key == first.key
        assert caught.value.existing_record.status is RecordStatus.IN_PROGRESS
        first.result = "ok"
        face.exit(first)
        assert run(face, SQS_RECORD, store, clock, "x") == ("replayed", "ok")

    def test_without_context_the_lock_lasts_lock_timeout_seconds(self, face, store, clock):
        config = IdempotencyConfig(lock_timeout_seconds=45, expires_after_seconds=7200)
        held = face.guarded(SQS_RECORD, lambda guard: store.get(guard.key), store=store, clock=clock, config=config)
        assert held.in_progress_expires_at == NOW_MS + 45_000
        assert held.expires_at == NOW_S + 7200

    def test_with_context_the_lock_ends_at_the_lambda_deadline_plus_grace(self, face, store, clock):
        config = IdempotencyConfig(lock_grace_ms=250)
        held = face.guarded(
            SQS_RECORD, lambda g: store.get(g.key), store=store, clock=clock, config=config, context=FakeContext(9000)
        )
        assert held.in_progress_expires_at == NOW_MS + 9250

    def test_timeout_then_takeover_then_the_stale_commit_is_refused(self, face, store, clock):
        context = FakeContext(remaining_ms=3000, clock=clock)
        stale = face.enter(IdempotencyGuard(SQS_RECORD, store=store, clock=clock, context=context))
        clock.advance(4.001)  # past 3 s + 1 s grace: the invocation was killed, or so it seems
        assert run(face, SQS_RECORD, store, clock, "new holder") == ("ran", "new holder")
        stale.result = "stale holder"
        with pytest.raises(LockLostError) as caught:
            face.exit(stale)
        assert caught.value.existing_record.response == '"new holder"'
        assert run(face, SQS_RECORD, store, clock, "x") == ("replayed", "new holder")

    def test_lock_never_expires_before_the_record(self, face, store, clock):
        config = IdempotencyConfig(expires_after_seconds=1)
        held = face.enter(
            IdempotencyGuard(SQS_RECORD, store=store, clock=clock, config=config, context=FakeContext(900_000))
        )
        clock.advance(10)
        with pytest.raises(IdempotencyAlreadyInProgressError):
            face.enter(IdempotencyGuard(SQS_RECORD, store=store, clock=clock, config=config))
        held.result = 1
        face.exit(held)


class TestFailures:
    def test_body_exception_releases_the_lock_and_propagates_unchanged(self, face, store, clock):
        boom, guards = RuntimeError("card declined"), []

        def body(guard):
            guards.append(guard)
            raise boom

        with pytest.raises(RuntimeError) as caught:
            face.guarded(SQS_RECORD, body, store=store, clock=clock)
        assert caught.value is boom
        assert store.get(guards[0].key) is None
        assert run(face, SQS_RECORD, store, clock, "retried") == ("ran", "retried")

    def test_failed_release_keeps_the_body_exception_and_records_the_release_error(self, face, store, clock):
        config = IdempotencyConfig(lock_timeout_seconds=1)
        guard = face.enter(IdempotencyGuard(SQS_RECORD, store=store, clock=clock, config=config))
        clock.advance(2)
        run(face, SQS_RECORD, store, clock, "taken over")
        boom = ValueError("bad order")
        assert face.exit(guard, boom) is False
        assert isinstance(guard.release_error, LockLostError)
        if sys.version_info >= (3, 11):  # add_note() is 3.11+
            assert "releasing" in boom.__notes__[0]
        assert store.get(guard.key).response == '"taken over"'

    def test_a_release_that_raises_a_foreign_error_keeps_the_body_exception(self, face, store, clock):
        class ReleaseFails:  # a user's store whose release raises its own error, not the library's
            def __getattr__(self, name):
                return getattr(store, name)

            def release(self, *_):
                raise OSError("disk gone")

        guard = face.enter(IdempotencyGuard(SQS_RECORD, store=ReleaseFails(), clock=clock))
        boom = ValueError("bad order")
        assert face.exit(guard, boom) is False
        assert isinstance(guard.release_error, PersistenceLayerError)
        assert guard.release_error.key == guard.key
        assert isinstance(guard.release_error.__cause__, OSError)
        assert store.get(guard.key).status is RecordStatus.IN_PROGRESS  # left to expire, never committed

    def test_unserializable_result_commits_without_response_and_warns(self, face, store, clock, caplog):
        guards = []
        face.guarded(SQS_RECORD, keep(guards, object()), store=store, clock=clock)
        assert "cannot be stored" in caplog.text
        assert store.get(guards[0].key).status is RecordStatus.COMPLETE
        with pytest.raises(AlreadyProcessed) as caught:
            face.guarded(SQS_RECORD, keep([]), store=store, clock=clock)
        assert caught.value.response is None
        assert caught.value.response_stored is False

    def test_oversized_result_commits_without_response_and_warns(self, face, store, clock, caplog):
        guards = []
        face.guarded(SQS_RECORD, keep(guards, "x" * MAX_ITEM_BYTES), store=store, clock=clock)
        assert "too large to store" in caplog.text
        assert guards[0].key in caplog.text
        stored = store.get(guards[0].key)
        assert (stored.status, stored.response) == (RecordStatus.COMPLETE, None)
        assert run(face, SQS_RECORD, store, clock, "again")[0] == "replayed"

    def test_store_failure_on_acquire_propagates_and_the_body_does_not_run(self, face, clock):
        class Broken(InMemoryPersistenceLayer):
            def acquire(self, record, now_ms):  # noqa: ARG002 - the contract's signature
                raise PersistenceLayerError("throttled", key=record.key)

        calls = []
        with pytest.raises(PersistenceLayerError):
            run(face, SQS_RECORD, Broken(), clock, calls=calls)
        assert calls == []

    def test_a_result_standing_for_unrun_work_is_refused_and_the_lock_released(self, face, store, clock):
        class Pending:  # an awaitable nobody awaited: the work it stands for has not run
            def __await__(self):
                yield

        guards = []
        with pytest.raises(InvalidResultError, match="has not run"):
            face.guarded(SQS_RECORD, keep(guards, Pending()), store=store, clock=clock)
        assert store.get(guards[0].key) is None  # released: a fixed body runs on the redelivery
        assert run(face, SQS_RECORD, store, clock, "ran now") == ("ran", "ran now")

    def test_exit_never_swallows(self, face, store, clock):
        guard = face.enter(IdempotencyGuard(SQS_RECORD, store=store, clock=clock))
        assert face.exit(guard, KeyError("x")) is False
        assert store.get(guard.key) is None


class TestValidationAndKeys:
    def test_same_key_different_payload_is_a_validation_error(self, face, store, clock):
        config = IdempotencyConfig(
            event_key_jmespath="messageId", payload_validation_jmespath="powertools_json(body).amount"
        )
        run(face, SQS_RECORD, store, clock, 1, config=config)
        tampered = {**SQS_RECORD, "body": '{"order_id": "o-1", "amount": 3000}'}
        with pytest.raises(IdempotencyValidationError) as caught:
            run(face, tampered, store, clock, 2, config=config)
        assert caught.value.existing_record.response == "1"
        assert run(face, SQS_RECORD, store, clock, 3, config=config) == ("replayed", 1)

    def test_validation_also_applies_to_local_cache_hits(self, face, store, clock):
        config = IdempotencyConfig(payload_validation_jmespath="body", use_local_cache=True)
        run(face, SQS_RECORD, store, clock, 1, config=config)
        with pytest.raises(IdempotencyValidationError):
            run(face, {**SQS_RECORD, "body": "{}"}, store, clock, 2, config=config)

    def test_a_missing_key_raises_by_default_and_the_body_does_not_run(self, face, store, clock):
        config = IdempotencyConfig(event_key_jmespath="powertools_json(body).missing")
        calls = []
        with pytest.raises(
            IdempotencyKeyError, match=r"'powertools_json\(body\).missing' selected nothing on SQS message m-1$"
        ):
            run(face, SQS_RECORD, store, clock, config=config, calls=calls)
        assert calls == []
        assert list(store.scan()) == []

    def test_missing_key_runs_unguarded_and_warns_once_per_invocation(self, face, store, clock, caplog):
        missing = "powertools_json(body).missing"
        config = IdempotencyConfig(event_key_jmespath=missing, raise_on_no_idempotency_key=False)
        context, calls = FakeContext(), []
        with caplog.at_level(logging.WARNING, logger="idempotent_consumer"):
            for _ in range(3):
                ran = run(face, SQS_RECORD, store, clock, "r", config=config, context=context, calls=calls)
                assert ran == ("ran", "r")
            run(face, SQS_RECORD, store, clock, "r", config=config, context=FakeContext(), calls=calls)
        assert calls == [None] * 4
        assert caplog.text.count("no idempotency key selected") == 2
        assert list(store.scan()) == []

    def test_key_is_public_and_prefixed_by_the_function_name(self, face, store, clock, monkeypatch):
        monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "orders-consumer")
        calls = []
        run(face, SQS_RECORD, store, clock, calls=calls)
        assert calls[0].startswith("orders-consumer#")
        assert len(calls[0]) == len("orders-consumer#") + 64


class TestLocalCacheAndDisabling:
    def test_cache_hit_makes_no_store_request(self, face, store, clock):
        store = CountingStore(store)
        config = IdempotencyConfig(use_local_cache=True)
        run(face, SQS_RECORD, store, clock, 1, config=config)
        assert store.calls["complete"] == 1
        store.calls.clear()
        assert run(face, SQS_RECORD, store, clock, 2, config=config) == ("replayed", 1)
        assert sum(store.calls.values()) == 0

    def test_a_record_a_duplicate_read_from_the_store_is_cached_for_the_next(self, face, store, clock):
        assert run(face, SQS_RECORD, store, clock, 1) == ("ran", 1)  # committed by a process without the cache
        counting, config = CountingStore(store), IdempotencyConfig(use_local_cache=True)
        assert run(face, SQS_RECORD, counting, clock, 2, config=config) == ("replayed", 1)
        counting.calls.clear()
        assert run(face, SQS_RECORD, counting, clock, 3, config=config) == ("replayed", 1)
        assert sum(counting.calls.values()) == 0

    def test_cache_never_holds_in_progress_and_drops_expired(self, face, store, clock):
        config = IdempotencyConfig(use_local_cache=True, expires_after_seconds=10)

        def body(guard):
            guard.result = 1
            return len(config.cache_for(store))

        assert face.guarded(SQS_RECORD, body, store=store, clock=clock, config=config) == 0
        assert len(config.cache_for(store)) == 1
        clock.advance(11)
        assert run(face, SQS_RECORD, store, clock, 2, config=config) == ("ran", 2)

    def test_cache_is_bounded(self, face, store, clock):
        config = IdempotencyConfig(use_local_cache=True, local_cache_max_items=3)
        for i in range(5):
            run(face, {"messageId": str(i)}, store, clock, i, config=config)
        assert len(config.cache_for(store)) == 3

    def test_disabled_guard_is_a_pass_through(self, face, store, clock, monkeypatch):
        monkeypatch.setenv("IDEMPOTENCY_DISABLED", "1")
        calls = []
        assert run(face, SQS_RECORD, store, clock, 1, calls=calls) == ("ran", 1)
        assert run(face, SQS_RECORD, store, clock, 2, calls=calls) == ("ran", 2)
        assert calls == [None, None]
        assert list(store.scan()) == []

    def test_a_disabled_guard_never_touches_its_store(self, face, clock):
        class Untouchable:  # a unit test's placeholder store: a pass-through must not even look at it
            def __getattr__(self, name):
                raise AssertionError(f"the pass-through reached its store for {name!r}")

        key = face.guarded(SQS_RECORD, lambda guard: guard.key, store=Untouchable(), clock=clock, disabled=True)
        assert key is None


class TestConcurrentDuplicates:
    def test_eight_deliveries_at_once_run_the_body_once(self, face, store):
        effects = []
        outcomes = collections.Counter(face.race(8, SQS_RECORD, lambda guard: effects.append(guard.key), store=store))
        assert len(effects) == 1
        assert outcomes == {"ran": 1, "in progress": 7}  # the holder held its lock until the others met it
