"""Behaviour the rest of the fast suite left open: each test fails for a change to the core modules that
every other test let through (found by ``make mutation``). Names say what is pinned."""

from __future__ import annotations

import contextvars
import gc
import hashlib
import logging
import operator
import re
import sys
import threading
import types
import weakref
from dataclasses import dataclass

import pytest
from events import sqs_event, sqs_record
from fakes import CountingStore, FakeClock, FakeContext
from records import NOW_MS, NOW_S

import consumer._reports as disabled_module
from consumer import (
    AlreadyProcessed,
    BatchEventError,
    BatchProcessingError,
    BatchProcessor,
    EventType,
    IdempotencyAlreadyInProgressError,
    IdempotencyConfig,
    IdempotencyConfigError,
    IdempotencyGuard,
    IdempotencyKeyError,
    IdempotencyValidationError,
    InvalidResultError,
    NestedReplayError,
    SQSRecord,
    current_lambda_context,
    idempotency_disabled,
    make_key,
    process_partial_response,
    register_lambda_context,
)
from persistence import (
    MAX_ITEM_BYTES,
    IdempotencyRecord,
    InMemoryPersistenceLayer,
    LockLostError,
    PersistenceLayerError,
    RecordStatus,
)
from persistence._base import decode_record

LOGGER = "idempotent_consumer"


@pytest.fixture
def store():
    return InMemoryPersistenceLayer()


def deliver(record, store, *, config=None, clock=None, result="done", context=None):
    """Run ``record`` through a guard; ``"ran"`` or ``"replayed"``."""
    try:
        with IdempotencyGuard(record, store=store, config=config, clock=clock or FakeClock(), context=context) as g:
            g.result = result
    except AlreadyProcessed:
        return "replayed"
    return "ran"


def messages(caplog, level=logging.WARNING):
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == level]


# -- the local cache ----------------------------------------------------------------------------------------


def test_a_cache_entry_is_trusted_up_to_exactly_its_max_age_and_not_after(store):
    clock = FakeClock()
    config = IdempotencyConfig(use_local_cache=True, local_cache_max_age_seconds=30)
    assert deliver({"messageId": "m-1"}, store, config=config, clock=clock) == "ran"
    store.delete(next(iter(store.scan())).key)  # an operator's delete, unseen by the cache
    clock.advance(30)
    assert deliver({"messageId": "m-1"}, store, config=config, clock=clock) == "replayed"  # from the cache
    clock.advance(0.02)  # 20 ms past the bound
    assert deliver({"messageId": "m-1"}, store, config=config, clock=clock) == "ran"


def test_the_cache_evicts_the_least_recently_used_record(store):
    config = IdempotencyConfig(use_local_cache=True, local_cache_max_items=2)
    for message_id in ("a", "b", "a", "c"):  # a is used again after b, so b is the least recently used
        deliver({"messageId": message_id}, store, config=config)
    for record in list(store.scan()):
        store.delete(record.key)  # only the cache remembers them now
    outcomes = {m: deliver({"messageId": m}, store, config=config) for m in ("a", "c", "b")}
    assert outcomes == {"a": "replayed", "c": "replayed", "b": "ran"}


def test_a_configs_cache_does_not_keep_a_store_alive():
    config = IdempotencyConfig(use_local_cache=True)
    store = InMemoryPersistenceLayer()
    deliver({"messageId": "m-1"}, store, config=config)
    gone = weakref.ref(store)
    del store
    gc.collect()
    assert gone() is None


class SlottedStore:
    """A store that cannot be weakly referenced; counts its requests."""

    __slots__ = ("inner", "requests")

    def __init__(self) -> None:
        self.inner = InMemoryPersistenceLayer()
        self.requests = 0

    def acquire(self, record, now_ms):
        self.requests += 1
        return self.inner.acquire(record, now_ms)

    def complete(self, record):
        self.requests += 1
        self.inner.complete(record)

    def release(self, record):
        self.requests += 1
        self.inner.release(record)


def test_stores_that_cannot_be_weakly_referenced_each_get_a_working_cache_of_their_own():
    with pytest.raises(TypeError):
        weakref.ref(SlottedStore())
    config = IdempotencyConfig(use_local_cache=True)
    first, second = SlottedStore(), SlottedStore()
    assert deliver({"messageId": "m-1"}, first, config=config) == "ran"
    assert deliver({"messageId": "m-1"}, second, config=config) == "ran"  # not first's record
    first.requests = 0
    assert deliver({"messageId": "m-1"}, first, config=config) == "replayed"
    assert first.requests == 0


def test_a_cache_hit_with_the_same_payload_replays_without_a_request():
    store = CountingStore(InMemoryPersistenceLayer())
    config = IdempotencyConfig(payload_validation_jmespath="body", use_local_cache=True)
    record = {"messageId": "m-1", "body": "order 1"}
    assert deliver(record, store, config=config) == "ran"
    store.calls.clear()
    assert deliver(record, store, config=config) == "replayed"
    assert sum(store.calls.values()) == 0


def test_a_record_completed_elsewhere_is_cached_once_read_from_the_store():
    store = CountingStore(InMemoryPersistenceLayer())
    deliver({"messageId": "m-1"}, store, config=IdempotencyConfig())  # another process, no cache
    cached = IdempotencyConfig(use_local_cache=True)
    assert deliver({"messageId": "m-1"}, store, config=cached) == "replayed"
    store.calls.clear()
    assert deliver({"messageId": "m-1"}, store, config=cached) == "replayed"
    assert sum(store.calls.values()) == 0


# -- the guard ----------------------------------------------------------------------------------------------


def test_a_guard_without_a_context_uses_the_registered_invocations_context(store):
    config = IdempotencyConfig(lock_grace_ms=0)
    with (
        register_lambda_context(FakeContext(remaining_ms=5_000)),
        IdempotencyGuard({"messageId": "m"}, store=store, config=config, clock=FakeClock()) as guard,
    ):
        assert store.get(guard.key).in_progress_expires_at == NOW_MS + 5_000


def test_the_disabled_argument_wins_over_the_environment(store, monkeypatch):
    monkeypatch.setenv("IDEMPOTENCY_DISABLED", "1")
    with IdempotencyGuard({"messageId": "on"}, store=store, disabled=False) as guard:
        assert store.get(guard.key).status is RecordStatus.IN_PROGRESS
    monkeypatch.delenv("IDEMPOTENCY_DISABLED")
    with IdempotencyGuard({"messageId": "off"}, store=store, disabled=True) as guard:
        assert guard.key is None
    assert [r.key for r in store.scan()] == [make_key({"messageId": "on"}, IdempotencyConfig())]


def test_an_unset_disabled_variable_is_off_without_a_warning(monkeypatch, caplog):
    monkeypatch.delenv("IDEMPOTENCY_DISABLED", raising=False)
    disabled_module._warn_unrecognised_disabled.cache_clear()  # it warns once per value and process
    with caplog.at_level(logging.WARNING, LOGGER):
        assert idempotency_disabled() is False
    assert messages(caplog) == []


def test_the_unrecognised_disabled_warning_quotes_the_value(monkeypatch, caplog):
    monkeypatch.setenv("IDEMPOTENCY_DISABLED", "Pinned-Maybe")
    with caplog.at_level(logging.WARNING, LOGGER):
        assert idempotency_disabled() is False
    assert len(messages(caplog)) == 1
    assert messages(caplog)[0].startswith("IDEMPOTENCY_DISABLED='pinned-maybe' is not a true or false value")


def test_the_unguarded_warning_names_the_invocation_and_says_why(store, caplog):
    config = IdempotencyConfig(event_key_jmespath="body.order_id", raise_on_no_idempotency_key=False)
    context = FakeContext(aws_request_id="req-pinned-1")
    with caplog.at_level(logging.WARNING, LOGGER):
        assert deliver({"messageId": "m", "body": '{"order_id": 1}'}, store, config=config, context=context) == "ran"
    assert messages(caplog) == [
        (
            "no idempotency key selected: running the record(s) unguarded, as raise_on_no_idempotency_key=False asks "
            "(invocation req-pinned-1): no idempotency key: 'body.order_id' selected nothing on SQS message m; body "
            "holds JSON text; select inside it with powertools_json(body).order_id"
        )
    ]


def test_a_body_that_sets_no_result_replays_none(store):
    with IdempotencyGuard({"messageId": "m-1"}, store=store):
        pass
    with pytest.raises(AlreadyProcessed) as done, IdempotencyGuard({"messageId": "m-1"}, store=store):
        pytest.fail("a committed record must not run again")
    assert done.value.response is None
    assert done.value.response_stored is True


def test_a_guard_has_no_release_error_when_its_release_succeeded(store):
    guard = IdempotencyGuard({"messageId": "m-1"}, store=store)
    with pytest.raises(ValueError, match="declined"), guard:
        raise ValueError("declined")
    assert guard.release_error is None
    assert store.get(make_key({"messageId": "m-1"}, IdempotencyConfig())) is None


def test_exit_after_a_commit_returns_false(store):
    guard = IdempotencyGuard({"messageId": "m-1"}, store=store)
    guard.__enter__()
    guard.result = 1
    assert guard.__exit__(None, None, None) is False
    assert store.get(guard.key).status is RecordStatus.COMPLETE


def test_a_lock_held_by_another_invocation_says_so_with_its_deadline(store):
    key = make_key({"messageId": "m-1"}, IdempotencyConfig())
    store.acquire(IdempotencyRecord.in_progress(key, expires_at=NOW_S + 3600, lock_deadline_ms=NOW_MS + 60_000), NOW_MS)
    with pytest.raises(IdempotencyAlreadyInProgressError) as caught:
        deliver({"messageId": "m-1"}, store)
    assert str(caught.value) == f"{key!r} is being processed by another invocation until {NOW_MS + 60_000} (epoch ms)"


class ReleaseFails(InMemoryPersistenceLayer):
    def release(self, record):
        raise PersistenceLayerError(f"throttled releasing {record.lease}", key=record.key)


def test_a_lock_left_by_an_exited_guard_is_another_invocations_not_this_process(store):
    store = ReleaseFails()
    guard = IdempotencyGuard({"messageId": "m-1"}, store=store, clock=FakeClock())
    with pytest.raises(ValueError, match="declined"), guard:
        raise ValueError("declined")
    assert guard.release_error is not None  # the lock stays behind until it lapses
    with pytest.raises(IdempotencyAlreadyInProgressError) as caught:
        deliver({"messageId": "m-1"}, store)
    assert f"{guard.key!r} is being processed by another invocation until" in str(caught.value)


def test_a_validation_error_carries_the_key_and_names_the_expression(store):
    config = IdempotencyConfig(payload_validation_jmespath="body")
    deliver({"messageId": "m-1", "body": "a"}, store, config=config)
    with pytest.raises(IdempotencyValidationError) as caught:
        deliver({"messageId": "m-1", "body": "b"}, store, config=config)
    key = make_key({"messageId": "m-1"}, config)
    assert caught.value.key == key
    assert str(caught.value) == (
        f"Payload does not match stored record for this event key: {key!r} was processed for a different payload "
        "(payload_validation_jmespath 'body')"
    )


def test_a_nested_replay_error_carries_the_outer_key_and_names_both(store):
    step = IdempotencyConfig(event_key_jmespath="step", key_prefix="steps")
    with IdempotencyGuard({"step": "charge"}, store=store, config=step) as charged:
        charged.result = "charged"
    outer = IdempotencyGuard({"messageId": "outer"}, store=store)
    with (
        pytest.raises(NestedReplayError) as caught,
        outer,
        IdempotencyGuard({"step": "charge"}, store=store, config=step),
    ):
        pytest.fail("the inner body must not run")
    assert caught.value.key == outer.key
    inner_key = make_key({"step": "charge"}, step)
    assert str(caught.value).startswith(f"a nested guard's replay of {inner_key!r} escaped the body of {outer.key!r}")


class Awaitable:
    """An awaitable with no ``close()``."""

    def __await__(self):
        yield


def test_an_awaitable_without_close_is_refused_as_a_result(store):
    guard = IdempotencyGuard({"messageId": "m-1"}, store=store)
    with pytest.raises(InvalidResultError) as caught, guard:
        guard.result = Awaitable()
    assert caught.value.key == guard.key
    assert guard.result is None
    assert store.get(guard.key) is None  # released


def test_an_unstorable_result_warning_names_the_key_and_the_encoding_error(store, caplog):
    guard = IdempotencyGuard({"messageId": "m-1"}, store=store)
    with caplog.at_level(logging.WARNING, LOGGER), guard:
        guard.result = object()
    (warning,) = messages(caplog)
    pattern = rf"result of {re.escape(repr(guard.key))} cannot be stored \((.+)\): committed without it"
    found = re.fullmatch(pattern, warning)
    assert found is not None
    assert found.group(1) != "None"
    assert not found.group(1).startswith("ResultEncodingError(")  # the error's text, not its repr
    assert "object" in found.group(1)  # it names the type that could not be stored


def test_a_too_large_result_warning_names_the_key_and_the_size_error(store, caplog):
    guard = IdempotencyGuard({"messageId": "m-1"}, store=store)
    with caplog.at_level(logging.WARNING, LOGGER), guard:
        guard.result = "x" * MAX_ITEM_BYTES
    (warning,) = messages(caplog)
    pattern = rf"result of {re.escape(repr(guard.key))} is too large to store \((.+)\): committed without it"
    found = re.fullmatch(pattern, warning)
    assert found is not None
    assert found.group(1) != "None"


def test_a_failed_release_is_logged_with_the_key_the_body_error_and_the_release_error(store, caplog):
    clock = FakeClock()
    guard = IdempotencyGuard(
        {"messageId": "m-1"}, store=store, clock=clock, config=IdempotencyConfig(lock_timeout_seconds=1)
    )
    guard.__enter__()
    clock.advance(2)
    deliver({"messageId": "m-1"}, store, clock=clock)  # took the lapsed lock over and committed
    with caplog.at_level(logging.ERROR, LOGGER):
        guard.__exit__(ValueError, ValueError("declined"), None)
    assert messages(caplog, logging.ERROR) == [
        f"could not release {guard.key!r} after the body raised ValueError('declined'): {guard.release_error}"
    ]
    assert str(guard.release_error)  # the release error's own text is in the line


# -- keys ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "text"), [(42, b"42"), (4.5, b"4.5"), (True, b"true")])
def test_a_scalar_is_keyed_by_its_json_text(value, text):
    assert make_key(value, IdempotencyConfig(key_prefix="p")) == "p#" + hashlib.sha256(text).hexdigest()


def test_a_missing_whole_record_key_says_the_record_selected_nothing():
    with pytest.raises(IdempotencyKeyError) as caught:
        make_key({}, IdempotencyConfig())
    assert str(caught.value) == "no idempotency key: the record selected nothing"


def test_a_failing_key_expression_is_named_in_the_error():
    config = IdempotencyConfig(event_key_jmespath="powertools_json(body)")
    with pytest.raises(
        IdempotencyKeyError, match=r"^event_key_jmespath 'powertools_json\(body\)' failed on the record"
    ):
        make_key({"body": "not json"}, config)


def test_a_failing_payload_validation_expression_is_named_in_the_error(store):
    config = IdempotencyConfig(payload_validation_jmespath="powertools_json(body)")
    with pytest.raises(IdempotencyKeyError, match=r"^payload_validation_jmespath 'powertools_json\(body\)' failed"):
        deliver({"messageId": "m-1", "body": "not json"}, store, config=config)


def test_an_unserializable_payload_validation_selection_is_a_key_error_saying_so(store):
    config = IdempotencyConfig(payload_validation_jmespath="amount")
    with pytest.raises(IdempotencyKeyError, match=r"^the payload validation selection cannot be serialized"):
        deliver({"messageId": "m-1", "amount": object()}, store, config=config)


def test_an_unknown_hash_function_error_lists_the_available_ones():
    with pytest.raises(IdempotencyConfigError, match=r"is not available here \(one of \[.*'sha256'.*\]\)"):
        IdempotencyConfig(hash_function="sha3")


# -- the batch processor ------------------------------------------------------------------------------------


def test_a_fresh_processor_has_no_summary_and_no_items(store):
    processor = BatchProcessor(EventType.SQS, store=store)
    assert processor.summary is None
    assert processor.items == []


def test_the_default_deadline_margin_is_one_second(store):
    ran = []
    processor = BatchProcessor(EventType.SQS, store=store, raise_on_entire_batch_failure=False)
    for remaining, message_id in ((1000, "m-1"), (999, "m-2")):
        process_partial_response(sqs_event(sqs_record(message_id, 1)), ran.append, processor, FakeContext(remaining))
    assert [r.message_id for r in ran] == ["m-1"]


def test_a_zero_deadline_margin_is_valid_and_starts_a_record_with_no_time_left(store):
    ran = []
    processor = BatchProcessor(EventType.SQS, store=store, deadline_margin_ms=0)
    process_partial_response(sqs_event(sqs_record("m-1", 1)), ran.append, processor, FakeContext(remaining_ms=0))
    assert len(ran) == 1
    with pytest.raises(ValueError, match="deadline_margin_ms must not be negative, got -1"):
        BatchProcessor(EventType.SQS, store=store, deadline_margin_ms=-1)


def test_an_event_that_is_not_a_mapping_is_a_batch_event_error(store):
    with pytest.raises(BatchEventError):
        process_partial_response([{"messageId": "m-1"}], lambda r: None, BatchProcessor(EventType.SQS, store=store))


def _fail(record):
    raise ValueError(record.message_id)


def test_an_entire_batch_failure_names_the_first_three_causes():
    event = sqs_event(*(sqs_record(f"m{i}", i) for i in range(4)))
    with pytest.raises(BatchProcessingError) as caught:
        process_partial_response(event, _fail, BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer()))
    assert (
        str(caught.value)
        == "All records failed processing. 4 records, their causes: m0: ValueError('m0'); m1: ValueError('m1'); "
        "m2: ValueError('m2'); ..."
    )
    event = sqs_event(*(sqs_record(f"m{i}", i) for i in range(3)))
    with pytest.raises(BatchProcessingError) as caught:
        process_partial_response(event, _fail, BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer()))
    assert (
        str(caught.value) == "All records failed processing. 3 records, their causes: m0: ValueError('m0'); "
        "m1: ValueError('m1'); m2: ValueError('m2')"
    )


def test_an_entire_batch_deferred_says_why_each_record_did_not_run(store):
    processor = BatchProcessor(EventType.SQS, store=store)
    with pytest.raises(BatchProcessingError) as caught:
        process_partial_response(sqs_event(sqs_record("m-1", 1)), lambda r: None, processor, FakeContext(0))
    ((item_id, error),) = caught.value.errors
    assert item_id == "m-1"
    assert isinstance(error, RuntimeError)
    assert str(error) == "not run: deferred, too little time was left before the Lambda deadline"
    assert "Outcome." not in str(caught.value)


def test_an_entire_fifo_batch_failure_names_the_skipped_records_outcome_in_words(store):
    event = sqs_event(sqs_record("m-1", 1, group="A"), sqs_record("m-2", 2, group="A"))
    with pytest.raises(BatchProcessingError) as caught:
        process_partial_response(event, _fail, BatchProcessor(EventType.SQS_FIFO, store=store))
    assert str(caught.value) == (
        "All records failed processing. 2 records, their causes: m-1: ValueError('m-1'); "
        "m-2: RuntimeError('not run: skipped, an earlier record it must not overtake failed')"
    )


def test_the_summary_duration_is_the_call_in_milliseconds_rounded_to_microseconds(store, monkeypatch):
    ticks = iter([100.0, 100.0123456])
    clock = types.SimpleNamespace(perf_counter=lambda: next(ticks))  # read when the batch starts and ends
    monkeypatch.setattr("consumer.batch._processor.time", clock)
    processor = BatchProcessor(EventType.SQS, store=store)
    process_partial_response(sqs_event(sqs_record("m-1", 1)), lambda r: None, processor)
    assert processor.summary.duration_ms == 12.346


def test_a_failed_record_is_logged_with_its_id_error_and_key(store, caplog):
    processor = BatchProcessor(EventType.SQS, store=store, raise_on_entire_batch_failure=False)
    with caplog.at_level(logging.WARNING, LOGGER):
        process_partial_response(sqs_event(sqs_record("m-1", 1)), _fail, processor)
    key = processor.items[0].key
    assert messages(caplog, logging.ERROR) == [
        f"record m-1 failed: ValueError: m-1 (key {key}); reported for redelivery"
    ]


def test_deferred_records_are_logged_with_the_margin(store, caplog):
    processor = BatchProcessor(EventType.SQS, store=store, deadline_margin_ms=1500, raise_on_entire_batch_failure=False)
    with caplog.at_level(logging.WARNING, LOGGER):
        process_partial_response(sqs_event(sqs_record("m-1", 1)), lambda r: None, processor, FakeContext(1000))
    assert messages(caplog)[0] == (
        "record m-1 deferred: less than 1500 ms were left before the Lambda deadline; reported for redelivery"
    )


def test_the_summary_log_line_is_a_batch_processed_message(store, caplog):
    processor = BatchProcessor(EventType.SQS, store=store)
    with caplog.at_level(logging.INFO, LOGGER):
        process_partial_response(sqs_event(sqs_record("m-1", 1)), lambda r: None, processor)
    (line,) = messages(caplog, logging.INFO)
    assert re.fullmatch(r"batch processed: 1 sqs record: 1 processed \(\d+\.\d ms\)", line)


def test_by_default_records_run_one_after_another_in_the_invoking_thread(store):
    # Powertools' BatchProcessor runs them so: a handler may lean on the invoking thread's state (thread-locals).
    ran = []
    processor = BatchProcessor(EventType.SQS, store=store)
    event = sqs_event(*(sqs_record(f"m{i}", i) for i in range(3)))
    process_partial_response(
        event, lambda record: ran.append((record.message_id, threading.current_thread())), processor
    )
    assert ran == [(f"m{i}", threading.current_thread()) for i in range(3)]


def test_max_workers_records_run_at_once_on_named_worker_threads(store):
    # Each record waits for another to run beside it: two at a time, on the pool's two threads and no more (a wider
    # pool would start threads for the records still queued while the first pairs wait).
    names, lock, two_running = set(), threading.Lock(), threading.Barrier(2, timeout=30)

    def handler(record):
        with lock:
            names.add(threading.current_thread().name)
        two_running.wait()

    processor = BatchProcessor(EventType.SQS, store=store, max_workers=2)
    process_partial_response(sqs_event(*(sqs_record(f"m{i}", i) for i in range(20))), handler, processor)
    assert len(names) == 2
    assert all(name.startswith("idempotent-consumer_") for name in names)


def test_each_concurrent_invocation_sees_its_own_context_in_worker_threads(store):
    both_open = threading.Barrier(2, timeout=10)
    seen = {}

    def invoke(name):
        context = FakeContext(aws_request_id=name)
        processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer(), max_workers=2)

        def handler(record):
            both_open.wait()  # both invocations are registered now
            seen[name] = current_lambda_context()

        process_partial_response(sqs_event(sqs_record(name, 1)), handler, processor, context)
        seen[name] = seen[name] is context

    threads = [threading.Thread(target=invoke, args=(name,)) for name in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"a": True, "b": True}


def _seen_by_a_plain_thread():
    seen = []
    thread = threading.Thread(target=lambda: seen.append(current_lambda_context()))
    thread.start()
    thread.join()
    return seen[0]


@pytest.mark.parametrize("without_first", [True, False])
def test_a_plain_thread_sees_no_context_beside_an_invocation_that_has_none(without_first):
    # Two invocations at once (a test runner, a local server), one given no context: a bare thread cannot tell which
    # it belongs to, so it gets neither (and a missing context is no error).
    contexts = [None, FakeContext()] if without_first else [FakeContext(), None]
    with register_lambda_context(contexts[0]), register_lambda_context(contexts[1]):
        assert _seen_by_a_plain_thread() is None


def test_a_plain_thread_sees_an_invocation_registered_twice_under_one_request_id():
    # One invocation's context, registered twice as two objects (a wrapper the handler made): one invocation.
    first, again, other = FakeContext(aws_request_id="r-1"), FakeContext(aws_request_id="r-1"), FakeContext()
    with register_lambda_context(first), register_lambda_context(again):
        assert _seen_by_a_plain_thread() is first
        with register_lambda_context(other):
            assert _seen_by_a_plain_thread() is None


def test_an_invocation_closed_twice_stays_closed():
    invocation = register_lambda_context(FakeContext())
    invocation.close()
    invocation.close()
    assert current_lambda_context() is None


def test_the_batch_reads_idempotency_disabled_once(store, monkeypatch):
    monkeypatch.delenv("IDEMPOTENCY_DISABLED", raising=False)

    def handler(record):
        monkeypatch.setenv("IDEMPOTENCY_DISABLED", "1")  # too late for this batch

    processor = BatchProcessor(EventType.SQS, store=store)
    process_partial_response(sqs_event(sqs_record("m-1", 1), sqs_record("m-2", 2)), handler, processor)
    assert processor.summary.processed == 2
    assert len(list(store.scan())) == 2


def test_the_processors_clock_dates_the_records(store):
    processor = BatchProcessor(EventType.SQS, store=store, clock=FakeClock())
    process_partial_response(sqs_event(sqs_record("m-1", 1)), lambda r: None, processor)
    assert next(iter(store.scan())).expires_at == NOW_S + 3600


def test_each_item_keeps_its_handlers_result(store):
    processor = BatchProcessor(EventType.SQS, store=store)
    process_partial_response(sqs_event(sqs_record("m-1", 1)), lambda r: {"charged": r.message_id}, processor)
    assert processor.items[0].result == {"charged": "m-1"}


def test_a_record_without_a_key_counts_as_unguarded_not_processed(store):
    config = IdempotencyConfig(event_key_jmespath="missing", raise_on_no_idempotency_key=False)
    processor = BatchProcessor(EventType.SQS, store=store, config=config)
    process_partial_response(sqs_event(sqs_record("m-1", 1)), lambda r: None, processor)
    assert (processor.summary.unguarded, processor.summary.processed) == (1, 0)


def test_a_handler_taking_the_guard_second_also_gets_its_record(store):
    seen = []

    def handler(record, g):
        seen.append((record.message_id, g.key))

    process_partial_response(sqs_event(sqs_record("m-1", 1)), handler, BatchProcessor(EventType.SQS, store=store))
    assert seen == [("m-1", make_key(sqs_record("m-1", 1), IdempotencyConfig()))]


# -- record handlers ----------------------------------------------------------------------------------------


class AsyncHandler:
    async def __call__(self, record):
        return record


class UnhashableGuardTaker:
    __hash__ = None  # type: ignore[assignment]

    def __init__(self) -> None:
        self.guards = []

    def __eq__(self, other):
        return self is other

    def __call__(self, record, guard):
        self.guards.append((record, guard))


def test_an_object_with_an_async_call_is_refused_naming_its_class(store):
    with pytest.raises(TypeError, match=r"^record handler AsyncHandler is async"):
        process_partial_response(
            sqs_event(sqs_record("m-1", 1)), AsyncHandler(), BatchProcessor(EventType.SQS, store=store)
        )
    assert list(store.scan()) == []


def test_an_async_or_generator_handler_is_refused_by_its_name(store):
    async def charge_async(record):
        return 1

    def charge_lazily(record):
        yield 1

    async def charge_async_lazily(record):
        yield 1

    processor = BatchProcessor(EventType.SQS, store=store)
    event = sqs_event(sqs_record("m-1", 1))
    awaitable = (
        "is async: calling it returns an awaitable, not a result, so the record would be committed without its body "
        "running. Use AsyncBatchProcessor (or a plain def)."
    )
    lazy = "calling it runs nothing until {}. Return a value (e.g. a list) instead."
    for handler, why in [
        (charge_async, awaitable),
        (charge_lazily, "is a generator function: " + lazy.format("the generator is consumed")),
        (charge_async_lazily, "is an async generator function: " + lazy.format("it is iterated")),
    ]:
        with pytest.raises(TypeError) as refused:
            process_partial_response(event, handler, processor)
        assert str(refused.value) == f"record handler {handler.__qualname__} {why}"


def test_a_handler_without_a_readable_signature_gets_only_the_record(store):
    processor = BatchProcessor(EventType.SQS, store=store)
    process_partial_response(sqs_event(sqs_record("m-1", 1)), operator.attrgetter("message_id"), processor)
    assert processor.items[0].result == "m-1"


def test_an_unhashable_handler_that_asks_for_the_guard_gets_it(store):
    handler = UnhashableGuardTaker()
    process_partial_response(sqs_event(sqs_record("m-1", 1)), handler, BatchProcessor(EventType.SQS, store=store))
    ((record, guard),) = handler.guards
    assert record.message_id == "m-1"
    assert isinstance(guard, IdempotencyGuard)


# -- records ------------------------------------------------------------------------------------------------


def test_a_lease_is_128_random_bits_in_hex():
    leases = {IdempotencyRecord.in_progress("k", expires_at=1, lock_deadline_ms=1).lease for _ in range(3)}
    assert len(leases) == 3
    assert all(re.fullmatch("[0-9a-f]{32}", lease) for lease in leases)


def test_a_record_lives_at_least_until_its_lock_deadline_in_whole_seconds():
    record = IdempotencyRecord.in_progress("k", expires_at=NOW_S + 1, lock_deadline_ms=NOW_MS + 60_500)
    assert record.expires_at == NOW_S + 61
    assert type(record.expires_at) is int


def test_a_record_is_not_expired_during_its_last_second():
    record = IdempotencyRecord("k", RecordStatus.COMPLETE, expires_at=NOW_S)
    assert not record.is_expired(NOW_MS + 999)
    assert record.is_expired(NOW_MS + 1000)


def test_effective_status_is_expired_only_once_the_expiry_has_passed():
    record = IdempotencyRecord("k", RecordStatus.COMPLETE, expires_at=NOW_S)
    assert record.effective_status(NOW_MS + 999) is RecordStatus.COMPLETE
    assert record.effective_status(NOW_MS + 1000) is RecordStatus.EXPIRED


def test_a_lock_is_live_at_exactly_its_deadline(store):
    held = IdempotencyRecord.in_progress("k", expires_at=NOW_S + 3600, lock_deadline_ms=NOW_MS + 5_000)
    store.acquire(held, NOW_MS)
    contender = IdempotencyRecord.in_progress("k", expires_at=NOW_S + 3600, lock_deadline_ms=NOW_MS + 9_000)
    assert store.acquire(contender, NOW_MS + 5_000) == held
    assert store.acquire(contender, NOW_MS + 5_001) is None


# -- what a store says when the lock is no longer ours ------------------------------------------------------


def test_a_lock_lost_error_names_the_operation_the_key_and_what_holds_it_now(store):
    stale = IdempotencyRecord.in_progress("k", expires_at=NOW_S + 3600, lock_deadline_ms=NOW_MS + 1_000)
    store.acquire(stale, NOW_MS)
    store.acquire(
        IdempotencyRecord.in_progress("k", expires_at=NOW_S + 3600, lock_deadline_ms=NOW_MS + 9_000), NOW_MS + 2_000
    )
    with pytest.raises(LockLostError) as caught:
        store.complete(stale.completed("1", NOW_S + 3600))
    assert (caught.value.key, str(caught.value)) == (
        "k",
        "cannot complete 'k': the lock is no longer ours (the record is IN_PROGRESS under another lease)",
    )
    with pytest.raises(LockLostError) as caught:
        store.release(stale)
    assert (caught.value.key, str(caught.value)) == (
        "k",
        "cannot release 'k': the lock is no longer ours (the record is IN_PROGRESS under another lease)",
    )
    store.delete("k")
    with pytest.raises(LockLostError) as caught:
        store.complete(stale.completed("1", NOW_S + 3600))
    assert str(caught.value) == "cannot complete 'k': the lock is no longer ours (the record is gone)"
    committed = IdempotencyRecord.in_progress("c", expires_at=NOW_S + 3600, lock_deadline_ms=NOW_MS + 1_000)
    store.acquire(committed, NOW_MS)
    store.complete(committed.completed("1", NOW_S + 3600))
    with pytest.raises(LockLostError) as caught:
        store.release(committed)  # the lock as read, committed since
    assert (
        str(caught.value)
        == "cannot release 'c': the lock is no longer ours (the record is COMPLETE under the same lease)"
    )


def test_misuse_of_the_store_contract_names_the_operation(store):
    held = IdempotencyRecord.in_progress("k", expires_at=NOW_S + 3600, lock_deadline_ms=NOW_MS + 1_000)
    with pytest.raises(ValueError, match=r"^complete takes a COMPLETE record; got IN_PROGRESS for 'k'$"):
        store.complete(held)
    with pytest.raises(ValueError, match=r"^EXPIRED is derived from timestamps, not stored: scan all and use"):
        store.scan(RecordStatus.EXPIRED)


# -- decoding what a store read: the one decoder every backend shares ---------------------------------------

VALID_ITEM = {
    "key": "k",
    "status": "COMPLETE",
    "expires_at": NOW_S,
    "in_progress_expires_at": None,
    "lease": "l",
    "response": None,
    "payload_hash": None,
}


def test_a_stored_item_decodes_numbers_given_as_text_and_an_absent_lease_as_empty():
    item = {**VALID_ITEM, "expires_at": str(NOW_S), "in_progress_expires_at": str(NOW_MS), "lease": None}
    record = decode_record(**item)
    assert (record.expires_at, record.in_progress_expires_at, record.lease) == (NOW_S, NOW_MS, "")


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"status": None}, "status is missing"),
        ({"status": 1}, "status is not text: 1"),
        ({"status": "PENDING"}, "status is 'PENDING', not IN_PROGRESS or COMPLETE"),
        ({"expires_at": None}, "expires_at is missing"),
        ({"expires_at": "soon"}, "expires_at is not a whole number: 'soon'"),
        ({"expires_at": True}, "expires_at is not a whole number: True"),
        ({"in_progress_expires_at": "later"}, "in_progress_expires_at is not a whole number: 'later'"),
        ({"lease": 7}, "lease is not text: 7"),
        ({"response": 7}, "response is not text: a value of type int"),  # the application's data: never quoted
        ({"payload_hash": 7}, "payload_hash is not text: 7"),
    ],
)
def test_a_foreign_item_is_refused_naming_the_key_the_attribute_and_the_value(change, reason):
    with pytest.raises(PersistenceLayerError) as caught:
        decode_record(**{**VALID_ITEM, **change})
    assert caught.value.key == "k"
    assert str(caught.value) == f"stored item 'k' is not a record this library wrote: {reason}"


@pytest.mark.parametrize(
    ("key", "name", "reason"), [(7, "7", "the key is not text: 7"), (None, "None", "the key is missing")]
)
def test_a_foreign_item_whose_key_is_not_text_is_named_by_its_repr(key, name, reason):
    with pytest.raises(PersistenceLayerError) as caught:
        decode_record(**{**VALID_ITEM, "key": key})
    assert caught.value.key == name
    assert str(caught.value) == f"stored item {name!r} is not a record this library wrote: {reason}"


# -- results that hold work not yet done --------------------------------------------------------------------


class Ticker:
    """An async iterator (no ``__await__``, no ``__next__``)."""

    def __aiter__(self):
        return self

    async def __anext__(self):
        raise StopAsyncIteration


class ClosableIterator:
    """A user's iterator with a ``close()`` of its own."""

    def __init__(self) -> None:
        self.closed = False

    def __iter__(self):
        return self

    def __next__(self):
        raise StopIteration

    def close(self):
        self.closed = True


@dataclass
class Receipt:
    charge: object


def test_config_without_a_cache_has_no_cache_for_a_store(store):
    assert IdempotencyConfig().cache_for(store) is None


def test_the_bodys_exception_wins_over_an_unrun_result(store):
    guard = IdempotencyGuard({"messageId": "m-1"}, store=store)

    def body():
        with guard:
            guard.result = Awaitable()
            raise ValueError("declined")

    with pytest.raises(ValueError, match="declined"):
        body()
    assert store.get(guard.key) is None  # released


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (Awaitable(), "is a Awaitable"),
        ([Awaitable(), map(str, [])], "holds a Awaitable and a map"),
        ([Ticker()], "holds a Ticker"),
        (Receipt(charge=Awaitable()), "holds a Awaitable"),
    ],
    ids=["awaitable", "list-of-awaitable-and-map", "async-iterator", "dataclass-field"],
)
def test_an_unrun_result_is_refused_saying_whether_it_is_or_holds_the_work(store, result, message):
    guard = IdempotencyGuard({"messageId": "m-1"}, store=store)
    with pytest.raises(InvalidResultError) as caught, guard:
        guard.result = result
    assert str(caught.value) == (
        f"the result of {guard.key!r} {message}: the work it stands for has not run, so it is not committed "
        "(await it or consume it inside the body)"
    )
    assert store.get(guard.key) is None  # released, so a fixed body can run it


def test_a_users_iterator_in_an_unrun_result_is_not_closed_for_them(store):
    iterator = ClosableIterator()
    guard = IdempotencyGuard({"messageId": "m-1"}, store=store)
    with pytest.raises(InvalidResultError), guard:
        guard.result = [iterator]
    assert iterator.closed is False


@pytest.mark.parametrize("result", [Awaitable(), [Awaitable()]], ids=["is", "holds"])
def test_a_failed_release_after_an_unrun_result_is_logged_and_noted_on_that_error(store, caplog, result):
    clock = FakeClock()
    config = IdempotencyConfig(lock_timeout_seconds=1)
    guard = IdempotencyGuard({"messageId": "m-1"}, store=store, clock=clock, config=config)
    guard.__enter__()
    clock.advance(2)
    deliver({"messageId": "m-1"}, store, clock=clock)  # took the lapsed lock over
    guard.result = result
    with caplog.at_level(logging.ERROR, LOGGER), pytest.raises(InvalidResultError) as caught:
        guard.__exit__(None, None, None)
    (line,) = messages(caplog, logging.ERROR)
    assert line.startswith(f"could not release {guard.key!r} after the body raised InvalidResultError(")
    if sys.version_info >= (3, 11):  # add_note() is 3.11+
        assert "releasing" in caught.value.__notes__[0]


def test_a_handlers_return_value_wins_over_the_guard_result_it_set(store):
    def handler(record, guard):
        guard.result = "set on the guard"
        return "returned"

    processor = BatchProcessor(EventType.SQS, store=store)
    process_partial_response(sqs_event(sqs_record("m-1", 1)), handler, processor)
    assert processor.items[0].result == "returned"
    with pytest.raises(AlreadyProcessed) as done, IdempotencyGuard(sqs_record("m-1", 1), store=store):
        pytest.fail("a committed record must not run again")
    assert done.value.response == "returned"


# -- keys of typed and structured data ------------------------------------------------------------------------


@pytest.mark.parametrize("expression", [None, "receiptHandle", "attributes.ApproximateReceiveCount"])
def test_a_typed_record_is_keyed_like_its_raw_event(expression):
    raw = sqs_record("m-1", {"order": 1}, receive_count=3)
    config = IdempotencyConfig(event_key_jmespath=expression)
    assert make_key(SQSRecord.from_raw(raw), config) == make_key(raw, config)
    assert make_key(raw, config) is not None


def test_nested_values_of_a_tuple_or_a_dataclass_are_part_of_the_key():
    config = IdempotencyConfig(key_prefix="p")
    assert make_key((1, "a"), config) != make_key((1, "b"), config)
    assert make_key(Receipt(charge={"amount": 1}), config) != make_key(Receipt(charge={"amount": 2}), config)


class ExplodingModel:
    def model_dump(self):
        raise ArithmeticError("no dump")


def test_a_record_whose_plain_form_cannot_be_built_is_a_key_error_saying_so():
    with pytest.raises(IdempotencyKeyError) as caught:
        make_key(ExplodingModel(), IdempotencyConfig())
    assert str(caught.value) == "the record's plain form cannot be built: ArithmeticError('no dump')"


def test_invocations_closed_in_any_order_leave_the_others_registered():
    context, other = FakeContext(aws_request_id="r-1"), FakeContext(aws_request_id="r-2")

    def open_and_close():  # in a copy of the test's context: closing out of order leaves its variable behind
        first, second, third = (register_lambda_context(c) for c in (context, context, other))
        first.close()  # not the last one opened: the other two stay, two invocations a bare thread cannot tell apart
        assert _seen_by_a_plain_thread() is None
        third.close()
        assert _seen_by_a_plain_thread() is context
        second.close()
        assert _seen_by_a_plain_thread() is None

    contextvars.copy_context().run(open_and_close)
