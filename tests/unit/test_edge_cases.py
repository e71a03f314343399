"""The API's edges in one process: keys, typed data, the Lambda context, the local cache, threads, settings."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
import time
import types

import pydantic
import pytest
from events import failures, sqs_event, sqs_record
from fakes import FakeClock, FakeContext
from records import NOW_MS

from consumer import (
    AlreadyProcessed,
    AsyncBatchProcessor,
    BatchEventError,
    BatchProcessor,
    EventType,
    IdempotencyAlreadyInProgressError,
    IdempotencyConfig,
    IdempotencyConfigError,
    IdempotencyGuard,
    IdempotencyKeyError,
    SQSRecord,
    _handlers,
    _reports,
    async_process_partial_response,
    current_lambda_context,
    idempotency_disabled,
    idempotent,
    idempotent_function,
    make_key,
    process_partial_response,
)
from consumer.keys import default_key_expression, payload_hash
from persistence import InMemoryPersistenceLayer


@pytest.fixture
def store():
    return InMemoryPersistenceLayer()


# -- 4. a selection of nothing but None is no key -------------------------------------------------------


@pytest.mark.parametrize("selection", [[None, None], {"a": None, "b": None}, [None, [None]], [None, ""], [[], {}]])
def test_a_selection_of_only_nones_is_a_missing_key(selection):
    with pytest.raises(IdempotencyKeyError, match="no idempotency key"):
        make_key({"k": selection}, IdempotencyConfig(event_key_jmespath="k"))
    unguarded = IdempotencyConfig(event_key_jmespath="k", raise_on_no_idempotency_key=False)
    assert make_key({"k": selection}, unguarded) is None


@pytest.mark.parametrize("selection", [[None, "p-1"], {"a": None, "b": 0}, [False, None]])
def test_a_selection_with_one_value_is_a_key(selection):
    assert make_key({"k": selection}, IdempotencyConfig(event_key_jmespath="k")) is not None


def test_two_different_events_without_their_key_fields_both_run(store):
    config = IdempotencyConfig(event_key_jmespath="[user_id, product_id]", raise_on_no_idempotency_key=False)
    runs = []

    @idempotent(store=store, config=config)
    def handler(event, context):
        runs.append(event["id"])

    handler({"id": "e-1", "detail-type": "x"}, None)
    handler({"id": "e-2", "detail-type": "x"}, None)
    assert runs == ["e-1", "e-2"]


# -- 5. typed data is selected from its plain form ---------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class OrderData:
    order_id: str
    amount: int


class OrderModel(pydantic.BaseModel):
    order_id: str
    amount: int


@pytest.mark.parametrize("make", [OrderData, OrderModel], ids=["dataclass", "pydantic"])
def test_a_key_expression_selects_from_a_dataclass_or_model(store, make):
    calls = []

    @idempotent_function(
        data_keyword_argument="order", store=store, config=IdempotencyConfig(event_key_jmespath="order_id")
    )
    def charge(order):
        calls.append(order.amount)
        return order.amount

    assert charge(order=make(order_id="o-1", amount=30)) == 30
    assert charge(order=make(order_id="o-1", amount=31)) == 30  # same order id: replayed
    assert charge(order=make(order_id="o-2", amount=5)) == 5
    assert calls == [30, 5]


def test_a_typed_records_default_key_is_its_id_not_its_delivery(store):
    first = SQSRecord.from_raw(sqs_record("m-1", {"order": 1}, receive_count=1))
    again = SQSRecord.from_raw(sqs_record("m-1", {"order": 1}, receive_count=2))
    config = IdempotencyConfig(key_prefix="p")
    assert make_key(first, config) == make_key(again, config) == make_key({"messageId": "m-1"}, config)


def test_a_key_expression_selects_from_a_typed_records_raw_event():
    record = SQSRecord.from_raw(sqs_record("m-1", {"order": 7}))
    config = IdempotencyConfig(event_key_jmespath="powertools_json(body).order")
    assert make_key(record, config) == make_key({"body": '{"order": 7}'}, config)


# -- 6. the Lambda context lives for one invocation and reaches its threads -------------------------------


def test_the_batch_context_does_not_outlive_its_invocation(store):
    processor = BatchProcessor(EventType.SQS, store=store, raise_on_entire_batch_failure=False)
    dead = FakeContext(remaining_ms=0)
    process_partial_response(sqs_event(sqs_record("m-1", 1)), lambda r: None, processor, dead)
    assert current_lambda_context() is None
    clock = FakeClock()
    with IdempotencyGuard({"messageId": "next-invocation"}, store=store, clock=clock) as guard:
        held = store.get(guard.key)
    assert held.in_progress_expires_at == NOW_MS + 60_000  # lock_timeout_seconds, not the dead context's 0 ms


def test_the_decorator_context_does_not_outlive_its_invocation(store):
    @idempotent(store=store)
    def handler(event, context):
        return current_lambda_context() is context

    assert handler({"id": "e-1", "detail-type": "x"}, FakeContext()) is True
    assert current_lambda_context() is None


@pytest.mark.parametrize("max_workers", [1, 3])
def test_worker_threads_and_user_threads_see_the_invocations_context(store, max_workers):
    context = FakeContext()
    seen = []

    def handler(record):
        seen.append(current_lambda_context())
        thread = threading.Thread(target=lambda: seen.append(current_lambda_context()))
        thread.start()
        thread.join()

    processor = BatchProcessor(EventType.SQS, store=store, max_workers=max_workers)
    process_partial_response(sqs_event(*(sqs_record(f"m{i}", i) for i in range(3))), handler, processor, context)
    assert seen == [context] * 6


def test_negative_remaining_time_is_clamped_to_zero(store):
    clock = FakeClock()
    config = IdempotencyConfig(lock_grace_ms=250)
    context = FakeContext(remaining_ms=-5_000)
    with IdempotencyGuard({"messageId": "m"}, store=store, config=config, clock=clock, context=context) as guard:
        assert store.get(guard.key).in_progress_expires_at == NOW_MS + 250


# -- 7. the local cache belongs to the store, and its entries age out ---------------------------------------


def test_two_stores_sharing_a_config_do_not_replay_each_others_records():
    config = IdempotencyConfig(use_local_cache=True)
    charges, emails = InMemoryPersistenceLayer(), InMemoryPersistenceLayer()
    sent = []
    event = sqs_event(sqs_record("m-1", 1))
    process_partial_response(event, lambda r: "charged", BatchProcessor(EventType.SQS, store=charges, config=config))
    process_partial_response(event, sent.append, BatchProcessor(EventType.SQS, store=emails, config=config))
    assert len(sent) == 1


def test_an_operator_delete_is_seen_once_a_cache_entry_is_older_than_its_bound(store):
    clock = FakeClock()
    config = IdempotencyConfig(use_local_cache=True, local_cache_max_age_seconds=30)
    runs = []

    def run():
        try:
            with IdempotencyGuard({"messageId": "m-1"}, store=store, config=config, clock=clock) as guard:
                runs.append(clock.now)
                guard.result = "done"
        except AlreadyProcessed:
            pass

    run()
    store.delete(next(iter(store.scan())).key)  # the operator's `records delete`
    clock.advance(29)
    run()  # still trusted from the cache
    clock.advance(2)
    run()  # older than 30 s: the store is asked again, and the record runs again
    assert len(runs) == 2


def test_cache_max_age_must_be_positive():
    with pytest.raises(IdempotencyConfigError, match="local_cache_max_age_seconds"):
        IdempotencyConfig(local_cache_max_age_seconds=0)


# -- 8. one processor, two threads, two batches -------------------------------------------------------------


def test_one_processor_serves_two_threads_without_mixing_their_batches(store):
    processor = BatchProcessor(EventType.SQS, store=store, raise_on_entire_batch_failure=False)
    both_running = threading.Barrier(2, timeout=10)
    results = {}

    def handler(record):
        both_running.wait()
        if record.json_body == "bad":
            raise ValueError("bad")

    def worker(name, body):
        event = sqs_event(sqs_record(f"{name}-1", body), sqs_record(f"{name}-2", "ok"))
        response = process_partial_response(event, handler, processor)
        results[name] = (failures(response), processor.summary.failed, processor.summary.processed)

    threads = [threading.Thread(target=worker, args=args) for args in (("a", "bad"), ("b", "ok"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {"a": (["a-1"], 1, 1), "b": ([], 0, 2)}


# -- 10. small edges --------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["off", "n", "0", "false", "no", "", "FALSE"])
def test_idempotency_disabled_stays_enabled_for_false_values(monkeypatch, value):
    monkeypatch.setenv("IDEMPOTENCY_DISABLED", value)
    assert idempotency_disabled() is False


@pytest.mark.parametrize("value", ["1", "true", "True", "yes", "on", "y"])
def test_idempotency_disabled_only_for_explicit_true_values(monkeypatch, value):
    monkeypatch.setenv("IDEMPOTENCY_DISABLED", value)
    assert idempotency_disabled() is True


def test_an_unrecognised_disabled_value_warns_and_stays_enabled(monkeypatch, caplog):
    monkeypatch.setenv("IDEMPOTENCY_DISABLED", "disabled")
    with caplog.at_level(logging.WARNING, "idempotent_consumer"):
        assert idempotency_disabled() is False
    assert "IDEMPOTENCY_DISABLED" in caplog.text


@pytest.mark.parametrize("name", ["shake_128", "shake_256"])
def test_variable_length_digests_are_refused_at_config_time(name):
    with pytest.raises(IdempotencyConfigError, match="fixed-length"):
        IdempotencyConfig(hash_function=name)


@pytest.mark.parametrize(
    "name", sorted(a for a in hashlib.algorithms_available if not hasattr(hashlib, a) and "shake" not in a)
)
def test_any_available_fixed_length_algorithm_hashes_keys(name):
    """Algorithms without a hashlib attribute go through hashlib.new."""
    key = make_key({"messageId": "m"}, IdempotencyConfig(hash_function=name, key_prefix="p"))
    assert key == "p#" + hashlib.new(name, b'"m"').hexdigest()


def test_an_unknown_algorithm_is_refused():
    with pytest.raises(IdempotencyConfigError, match="hash_function"):
        IdempotencyConfig(hash_function="sha3")


def _run_one(store, handler):
    processor = BatchProcessor(EventType.SQS, store=store)
    return process_partial_response(sqs_event(sqs_record("m-1", 1)), handler, processor)


def test_a_handler_parameter_with_a_default_does_not_receive_the_guard(store):
    seen = []

    def handler(record, retries=3):
        seen.append(retries)

    _run_one(store, handler)
    assert seen == [3]


@pytest.mark.parametrize(
    "source",
    [
        "def handler(record, guard): seen.append(guard)",
        "def handler(record, g): seen.append(g)",
        "def handler(record, guard=None): seen.append(guard)",
        "def handler(record, *, guard): seen.append(guard)",
    ],
)
def test_a_handler_that_asks_for_the_guard_gets_it(store, source):
    seen: list = []
    namespace = {"seen": seen}
    exec(source, namespace)  # noqa: S102 - one signature per case
    _run_one(store, namespace["handler"])
    assert len(seen) == 1
    assert isinstance(seen[0], IdempotencyGuard)


@pytest.mark.parametrize(
    ("source", "gets_the_guard"),
    [
        ("def handler(record, lambda_context): seen.append((None, lambda_context))", False),
        ("def handler(record, g, lambda_context): seen.append((g, lambda_context))", True),
        ("def handler(record, *, guard, lambda_context): seen.append((guard, lambda_context))", True),
    ],
)
def test_a_handler_that_asks_for_the_lambda_context_gets_it_beside_the_guard(source, gets_the_guard):
    seen: list = []
    namespace = {"seen": seen}
    exec(source, namespace)  # noqa: S102 - one signature per case
    context, processor = FakeContext(), BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    process_partial_response(sqs_event(sqs_record("m-1", 1)), namespace["handler"], processor, context)
    [(guard, got)] = seen
    assert got is context
    assert isinstance(guard, IdempotencyGuard) is gets_the_guard


def test_an_idempotent_function_handler_that_asks_for_the_lambda_context_gets_it():
    seen = []

    @idempotent_function(data_keyword_argument="record", store=InMemoryPersistenceLayer())
    def handler(record, lambda_context):
        seen.append(lambda_context)

    context = FakeContext()
    process_partial_response(sqs_event(sqs_record("m-1", 1)), handler, BatchProcessor(EventType.SQS), context)
    assert seen == [context]


def test_an_idempotent_function_method_handed_over_bound_runs_in_its_own_guard():
    store = InMemoryPersistenceLayer()

    class Orders:
        def __init__(self):
            self.ran = []

        @idempotent_function(data_keyword_argument="record", store=store)
        def charge(self, record):
            self.ran.append(record.message_id)
            return "charged"

    orders = Orders()
    for _ in range(2):  # the redelivery replays from the method's own store
        response = process_partial_response(
            sqs_event(sqs_record("m-1", 1)), orders.charge, BatchProcessor(EventType.SQS)
        )
        assert failures(response) == []
    assert orders.ran == ["m-1"]
    assert [record.response for record in store.scan()] == ['"charged"']


@pytest.mark.parametrize(
    "handler",
    [
        pytest.param(lambda record, **options: options or record.message_id, id="keyword-options"),
        pytest.param(lambda record, *more: more or record.message_id, id="more-positional"),
    ],
)
def test_a_handler_that_does_not_ask_for_the_guard_is_given_the_record_alone(handler):
    store = InMemoryPersistenceLayer()
    assert failures(_run_one(store, handler)) == []
    assert [record.response for record in store.scan()] == ['"m-1"']


def test_a_handler_is_inspected_once_not_on_every_batch(monkeypatch):
    # Reading a signature costs more than keying a record: a warm container's invocations reuse what was read.
    inspected, inspect = [], _handlers._shape

    def counted(handler, *, async_ok):
        inspected.append(handler)
        return inspect(handler, async_ok=async_ok)

    monkeypatch.setattr(_handlers, "_shape", counted)

    def handler(record):
        return record.message_id

    for _ in range(3):
        assert failures(_run_one(InMemoryPersistenceLayer(), handler)) == []
    assert inspected == [handler]


class _Unhashable:
    """A handler object's base that cannot be hashed (``__eq__`` without ``__hash__``): it notes what it saw."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self):
        self.seen = []

    def __eq__(self, other):
        return self is other


def test_an_unhashable_callable_object_is_a_handler(store):
    class Handler(_Unhashable):
        def __call__(self, record):
            self.seen.append(record.message_id)

    handler = Handler()
    assert failures(_run_one(store, handler)) == []
    assert failures(_run_one(InMemoryPersistenceLayer(), handler)) == []
    assert handler.seen == ["m-1", "m-1"]


def test_an_unhashable_async_callable_object_is_a_handler_of_the_async_processor():
    class Handler(_Unhashable):
        async def __call__(self, record):
            self.seen.append(record.message_id)

    handler = Handler()
    processor = AsyncBatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    assert failures(async_process_partial_response(sqs_event(sqs_record("m-1", 1)), handler, processor)) == []
    assert handler.seen == ["m-1"]


def test_a_handler_that_cannot_be_called_fails_each_record_as_in_powertools(store):
    # Not refused up front: each record fails with the TypeError calling it raises, reported for redelivery; its
    # lock is released, nothing is committed.
    processor = BatchProcessor(EventType.SQS, store=store, raise_on_entire_batch_failure=False)
    response = process_partial_response(sqs_event(sqs_record("m-1", 1), sqs_record("m-2", 2)), 42, processor)
    assert failures(response) == ["m-1", "m-2"]
    assert [str(item.error) for item in processor.items] == ["'int' object is not callable"] * 2
    assert list(store.scan()) == []


# -- 12. boundaries ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("remaining", "started"), [(999, False), (1000, True), (1001, True)])
def test_a_record_starts_when_exactly_the_margin_is_left(store, remaining, started):
    ran = []
    processor = BatchProcessor(EventType.SQS, store=store, deadline_margin_ms=1000, raise_on_entire_batch_failure=False)
    event = sqs_event(sqs_record("m-1", 1))
    response = process_partial_response(event, ran.append, processor, FakeContext(remaining_ms=remaining))
    assert (len(ran) == 1) is started
    assert failures(response) == ([] if started else ["m-1"])


def test_a_zero_grace_lock_ends_exactly_at_the_lambda_deadline(store):
    config = IdempotencyConfig(lock_grace_ms=0)
    clock, context = FakeClock(), FakeContext(remaining_ms=5_000)
    with IdempotencyGuard({"messageId": "m"}, store=store, config=config, clock=clock, context=context) as guard:
        assert store.get(guard.key).in_progress_expires_at == NOW_MS + 5_000


def test_the_eventbridge_default_key_needs_both_detail_type_and_id():
    assert default_key_expression({"id": "e-1"}) is None
    assert default_key_expression({"detail-type": "x"}) is None
    assert default_key_expression({"id": "e-1", "detail-type": "x"}).expression == "id"
    config = IdempotencyConfig(key_prefix="p")
    event = {"id": "e-1", "detail-type": "x", "time": "now"}
    assert make_key(event, config) == make_key({**event, "time": "later"}, config)
    assert make_key({"id": "e-1", "time": "now"}, config) != make_key({"id": "e-1", "time": "later"}, config)


def test_a_guard_nested_on_its_own_records_key_says_an_enclosing_guard_holds_it(store):
    processor = BatchProcessor(EventType.SQS, store=store, raise_on_entire_batch_failure=False)

    def handler(record):
        with IdempotencyGuard(record, store=store):  # the typed record's key is the batch guard's own key
            pass

    processor_response = process_partial_response(sqs_event(sqs_record("m-1", 1)), handler, processor)
    assert failures(processor_response) == ["m-1"]
    error = processor.items[0].error
    assert isinstance(error, IdempotencyAlreadyInProgressError)
    assert "a guard of this same process: an enclosing guard" in str(error)
    assert list(store.scan()) == []  # the outer lock was released: a fixed handler runs it


# -- found by trying to break the promise: keys, identifiers, the pool, guard.result ---------------------


def test_a_mapping_that_is_not_a_dict_still_yields_its_id():
    record = types.MappingProxyType({"messageId": "m-1", "body": "{}"})
    config = IdempotencyConfig(key_prefix="p")
    assert make_key(record, config) == make_key({"messageId": "m-1"}, config)


@pytest.mark.parametrize("message_id", [None, "", 7])
def test_a_record_without_a_usable_identifier_fails_the_invocation(store, message_id):
    processor = BatchProcessor(EventType.SQS, store=store)
    with pytest.raises(BatchEventError, match="record 0"):
        process_partial_response({"Records": [{"messageId": message_id, "body": "{}"}]}, print, processor)


@dataclasses.dataclass
class Job:
    record: SQSRecord
    kind: str


def test_a_typed_record_inside_other_data_is_keyed_by_its_id_not_its_delivery():
    config = IdempotencyConfig(key_prefix="p")
    first, again = (SQSRecord.from_raw(sqs_record("m-1", 1, receive_count=n)) for n in (1, 2))
    assert make_key(Job(first, "card"), config) == make_key(Job(again, "card"), config)
    assert make_key({"records": [first]}, config) == make_key({"records": [again]}, config)
    assert make_key(Job(first, "card"), config) != make_key(Job(first, "bank"), config)


def test_process_returns_only_once_every_record_has_finished(store):
    finished, slow_running, raising = [], threading.Event(), threading.Event()

    def handler(record):
        if record.message_id == "boom":
            assert slow_running.wait(30)  # raised while the other record runs
            raising.set()
            raise SystemExit(1)
        slow_running.set()
        assert raising.wait(30)
        time.sleep(0.2)
        finished.append(record.message_id)

    processor = BatchProcessor(EventType.SQS, store=store, max_workers=2)
    with pytest.raises(SystemExit):
        process_partial_response(sqs_event(sqs_record("boom", 1), sqs_record("slow", 2)), handler, processor)
    assert finished == ["slow"]  # not still running after the invocation raised


def test_a_handler_that_sets_guard_result_and_returns_none_keeps_its_result(store):
    def handler(record, guard):
        guard.result = {"charged": 30}

    _run_one(store, handler)
    with pytest.raises(AlreadyProcessed) as done, IdempotencyGuard(sqs_record("m-1", 1), store=store):
        pytest.fail("committed before")
    assert done.value.response == {"charged": 30}


def test_an_invocation_that_raises_leaves_no_summary_of_the_batch_before(store):
    processor = BatchProcessor(EventType.SQS, store=store)
    process_partial_response(sqs_event(sqs_record("m-1", 1)), lambda r: None, processor)
    assert processor.summary.processed == 1

    def interrupted(record):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        process_partial_response(sqs_event(sqs_record("m-2", 1)), interrupted, processor)
    # What is kept is the interrupted batch's own report: its one record undecided, nothing of m-1's batch.
    assert (processor.summary.records, processor.summary.processed) == (1, 0)
    assert [(i.item_id, i.outcome) for i in processor.items] == [("m-2", None)]


class BrokenModel:
    def model_dump(self, **_):
        raise ArithmeticError("model_dump exploded")


def test_data_whose_plain_form_fails_is_a_key_error_for_the_key_and_the_payload_hash():
    config = IdempotencyConfig(event_key_jmespath="id", payload_validation_jmespath="id")
    for build in (make_key, payload_hash):
        with pytest.raises(IdempotencyKeyError, match="plain form") as raised:
            build(BrokenModel(), config)
        assert isinstance(raised.value.__cause__, ArithmeticError)


def test_a_record_without_a_key_runs_unguarded_under_a_context_with_no_request_id(caplog, monkeypatch):
    # A test's stand-in context (accepted by the guard) may lack aws_request_id: the unguarded warning read it.
    monkeypatch.setattr(_reports, "_warned_invocation", [])  # once per invocation: an earlier test's may match
    context = types.SimpleNamespace(get_remaining_time_in_millis=lambda: 60_000)
    config = IdempotencyConfig(event_key_jmespath="order_id", raise_on_no_idempotency_key=False)
    with IdempotencyGuard({"amount": 1}, store=InMemoryPersistenceLayer(), config=config, context=context) as guard:
        guard.result = "ran"
    assert guard.key is None
    assert "unguarded" in caplog.text
