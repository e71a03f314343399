"""Powertools' names and calls, accepted as they are: each an alias of ours, with the same meaning."""

from __future__ import annotations

import datetime as dt
import functools
import logging
import threading
import types

import pytest
from events import kinesis_record, sqs_event, sqs_record
from fakes import FakeClock, FakeContext
from records import NOW_MS

import consumer
import consumer._reports as unguarded
from consumer import (
    BatchProcessor,
    EventType,
    IdempotencyAlreadyInProgressError,
    IdempotencyConfig,
    IdempotencyConfigError,
    IdempotencyError,
    IdempotencyGuard,
    IdempotencyPersistenceLayerError,
    IdempotencyValidationError,
    PersistenceLayerError,
    PowertoolsCutover,
    SqsFifoPartialProcessor,
    current_lambda_context,
    idempotency_disabled,
    idempotent,
    idempotent_function,
    make_key,
    process_partial_response,
    register_lambda_context,
)
from consumer import _context as context_module
from persistence import InMemoryPersistenceLayer

FAR_FUTURE = dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc)

LOGGER = "idempotent_consumer"
EVENT = {"id": "e-1", "detail-type": "OrderPlaced", "source": "shop", "detail": {"order": "o-1"}}


@pytest.fixture(autouse=True)
def _no_registered_context():
    yield
    context_module.register_invocation_context(None)
    context_module._latest[0] = None


# -- persistence_store= ------------------------------------------------------------------------------------------


def test_persistence_store_is_an_alias_of_store_on_both_decorators():
    store, calls = InMemoryPersistenceLayer(), []

    @idempotent(persistence_store=store)
    def handler(event, context):
        calls.append("handler")
        return "booked"

    @idempotent_function(data_keyword_argument="order", persistence_store=store)
    def charge(order):
        calls.append("charge")
        return "charged"

    assert [handler(EVENT, None), handler(EVENT, None), charge(order={"id": 1}), charge(order={"id": 1})] == [
        "booked",
        "booked",
        "charged",
        "charged",
    ]
    assert calls == ["handler", "charge"]
    assert len(list(store.scan())) == 2


@pytest.mark.parametrize("decorator", ["idempotent", "idempotent_function"])
def test_one_store_is_required_and_two_different_ones_are_refused(decorator):
    def make(**stores):
        if decorator == "idempotent":
            return idempotent(**stores)
        return idempotent_function(data_keyword_argument="x", **stores)

    with pytest.raises(TypeError, match="pass store="):
        make()
    with pytest.raises(TypeError, match="not two different stores"):
        make(store=InMemoryPersistenceLayer(), persistence_store=InMemoryPersistenceLayer())
    same = InMemoryPersistenceLayer()
    make(store=same, persistence_store=same)  # the same store twice is one store


def test_key_prefix_on_idempotent_is_the_exact_prefix():
    store = InMemoryPersistenceLayer()
    idempotent(persistence_store=store, key_prefix="bookings")(lambda event, context: "ok")(EVENT, None)
    assert [r.key for r in store.scan()] == [make_key(EVENT, IdempotencyConfig(), "bookings")]
    with pytest.raises(ValueError, match="non-empty"):
        idempotent(store=store, key_prefix="")


# -- config.register_lambda_context ------------------------------------------------------------------------------


def lock_deadline(config, context_for_guard=None):
    """The lock deadline an @idempotent_function called now would take (read inside its body)."""
    store, clock, seen = InMemoryPersistenceLayer(), FakeClock(), []

    @idempotent_function(data_keyword_argument="order", store=store, config=config, clock=clock, key_prefix="p")
    def charge(order):
        seen.append(next(iter(store.scan())).in_progress_expires_at)

    charge(order={"id": 1})
    return seen[0] - NOW_MS


def test_register_lambda_context_on_the_config_sets_the_lock_deadline_as_in_powertools():
    config = IdempotencyConfig(lock_grace_ms=1000)
    config.register_lambda_context(FakeContext(remaining_ms=10_000))
    assert lock_deadline(config) == 11_000
    assert lock_deadline(IdempotencyConfig(lock_grace_ms=0)) == 10_000  # the invocation's, whatever the config


def test_on_a_warm_container_each_invocation_replaces_the_last_ones_context():
    config = IdempotencyConfig(lock_grace_ms=0)
    first, second = FakeContext(remaining_ms=900_000), FakeContext(remaining_ms=3_000)
    config.register_lambda_context(first)
    assert lock_deadline(config) == 900_000
    config.register_lambda_context(second)  # the next invocation, 15 minutes of timeout no longer left
    assert lock_deadline(config) == 3_000
    assert not context_module._running  # nothing piles up, nothing to close
    seen = []
    thread = threading.Thread(target=lambda: seen.append(current_lambda_context()))  # a plain thread sees it too
    thread.start()
    thread.join()
    assert seen == [second]


def test_a_context_left_by_the_last_invocation_never_sets_the_next_ones_deadline():
    config = IdempotencyConfig(lock_grace_ms=0, lock_timeout_seconds=60)
    config.register_lambda_context(FakeContext(remaining_ms=900_000))  # invocation 1 registers, then ends early
    # Invocation 2 does not register: its context reaches the library through the processor.
    processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    deadlines = []
    process_partial_response(
        sqs_event(sqs_record("m-1", 1)), lambda record: deadlines.append(lock_deadline(config)), processor,
        FakeContext(remaining_ms=5_000),
    )  # fmt: skip
    assert deadlines == [5_000]  # inside the batch: its own context
    assert lock_deadline(config) == 60_000  # after it: not invocation 1's context, the lock timeout
    assert current_lambda_context() is None


def test_a_registered_stand_in_context_without_a_deadline_is_used_and_the_lock_lasts_the_lock_timeout():
    # A test's stand-in for the Lambda context (a request id, no get_remaining_time_in_millis) knows no deadline:
    # registered the Powertools way, it is the invocation's context, and the lock lasts lock_timeout_seconds.
    stand_in = types.SimpleNamespace(aws_request_id="r-1")
    config = IdempotencyConfig(lock_grace_ms=0, lock_timeout_seconds=60)
    config.register_lambda_context(stand_in)
    assert current_lambda_context() is stand_in
    assert lock_deadline(config) == 60_000


def test_a_registered_context_past_its_deadline_is_not_used():
    config = IdempotencyConfig(lock_grace_ms=0, lock_timeout_seconds=60)
    config.register_lambda_context(FakeContext(remaining_ms=0))
    assert lock_deadline(config) == 60_000
    assert current_lambda_context() is None


def test_a_registered_context_counts_to_its_last_millisecond():
    context = FakeContext(remaining_ms=1)
    IdempotencyConfig().register_lambda_context(context)
    assert current_lambda_context() is context


def test_registering_none_unregisters_and_with_blocks_come_first():
    config, context, inner = IdempotencyConfig(), FakeContext(), FakeContext()
    config.register_lambda_context(context)
    assert current_lambda_context() is context
    with register_lambda_context(inner):
        assert current_lambda_context() is inner
    assert current_lambda_context() is None  # the with block's invocation started last: the old one is over
    config.register_lambda_context(context)
    assert current_lambda_context() is context  # registered again: now it is the invocation that started last
    config.register_lambda_context(None)
    assert current_lambda_context() is None


# -- POWERTOOLS_IDEMPOTENCY_DISABLED -----------------------------------------------------------------------------


@pytest.fixture
def fresh_warnings(monkeypatch):
    monkeypatch.delenv("IDEMPOTENCY_DISABLED", raising=False)
    monkeypatch.delenv("POWERTOOLS_IDEMPOTENCY_DISABLED", raising=False)
    unguarded._warn_disabled.cache_clear()
    unguarded._warn_unrecognised_disabled.cache_clear()
    yield monkeypatch
    unguarded._warn_disabled.cache_clear()


@pytest.mark.parametrize("value", ["1", "true", "True", "t", "yes", "y", "on"])
def test_powertools_disabled_variable_is_an_alias_of_ours(fresh_warnings, value):
    fresh_warnings.setenv("POWERTOOLS_IDEMPOTENCY_DISABLED", value)
    assert idempotency_disabled() is True


def test_disabled_runs_every_body_as_powertools_does_and_warns_once_per_process(fresh_warnings, caplog):
    fresh_warnings.setenv("POWERTOOLS_IDEMPOTENCY_DISABLED", "1")
    store, calls = InMemoryPersistenceLayer(), []

    @idempotent(persistence_store=store)
    def handler(event, context):
        calls.append(1)
        return "ok"

    with caplog.at_level(logging.WARNING, LOGGER):
        assert [handler(EVENT, None) for _ in range(3)] == ["ok"] * 3
    assert calls == [1, 1, 1]
    assert list(store.scan()) == []
    warnings = [r.getMessage() for r in caplog.records if "idempotency is OFF" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].startswith("POWERTOOLS_IDEMPOTENCY_DISABLED is set")


def test_our_variable_decides_when_both_are_set(fresh_warnings):
    fresh_warnings.setenv("POWERTOOLS_IDEMPOTENCY_DISABLED", "1")
    fresh_warnings.setenv("IDEMPOTENCY_DISABLED", "false")
    assert idempotency_disabled() is False
    fresh_warnings.setenv("IDEMPOTENCY_DISABLED", "")  # empty: unset
    assert idempotency_disabled() is True


def test_an_unrecognised_powertools_value_keeps_idempotency_on_and_names_the_variable(fresh_warnings, caplog):
    fresh_warnings.setenv("POWERTOOLS_IDEMPOTENCY_DISABLED", "maybe")
    with caplog.at_level(logging.WARNING, LOGGER):
        assert idempotency_disabled() is False
    assert "POWERTOOLS_IDEMPOTENCY_DISABLED='maybe' is not a true or false value" in caplog.text


@pytest.mark.parametrize("value", ["f", "F", "0", "off"])
def test_false_values_of_the_powertools_variable_keep_it_on(fresh_warnings, value):
    fresh_warnings.setenv("POWERTOOLS_IDEMPOTENCY_DISABLED", value)
    assert idempotency_disabled() is False


# -- event_key_jmespath="" ---------------------------------------------------------------------------------------


def test_an_empty_key_expression_keys_the_whole_event_as_powertools_does():
    record = sqs_record("m-1", {"order": 1})
    whole = IdempotencyConfig(event_key_jmespath="", key_prefix="p")
    assert make_key(record, whole) == make_key(record, IdempotencyConfig(event_key_jmespath="@", key_prefix="p"))
    assert make_key(record, whole) != make_key(record, IdempotencyConfig(key_prefix="p"))  # ours: its messageId
    # The whole SQS record changes from one delivery to the next (receive count): Powertools' meaning, kept.
    assert make_key(sqs_record("m-1", {"order": 1}, receive_count=2), whole) != make_key(record, whole)


def test_an_empty_validation_expression_validates_nothing():
    store = InMemoryPersistenceLayer()
    config = IdempotencyConfig(event_key_jmespath="id", payload_validation_jmespath="")
    with IdempotencyGuard({"id": 1, "amount": 5}, store=store, config=config) as guard:
        guard.result = "ok"
    with pytest.raises(consumer.AlreadyProcessed):
        IdempotencyGuard({"id": 1, "amount": 9}, store=store, config=config).__enter__()
    assert config.validation_expression is None


# -- EventType, SqsFifoPartialProcessor --------------------------------------------------------------------------


def test_powertools_event_type_names_are_our_members():
    assert EventType.KinesisDataStreams is EventType.KINESIS
    assert EventType.DynamoDBStreams is EventType.DYNAMODB_STREAMS
    assert EventType.Kafka is EventType.KAFKA
    members = [EventType.SQS, EventType.SQS_FIFO, EventType.KINESIS, EventType.DYNAMODB_STREAMS, EventType.KAFKA]
    assert list(EventType) == members
    processor = BatchProcessor(event_type=EventType.KinesisDataStreams, store=InMemoryPersistenceLayer())
    response = process_partial_response(
        event={"Records": [kinesis_record(1, "k", {"n": 1})]},
        record_handler=lambda record: record.json_data,
        processor=processor,
        context=None,
    )
    assert response == {"batchItemFailures": []}
    assert processor.summary.event_type == "kinesis"


@pytest.mark.parametrize(
    ("options", "failed"),
    [
        ({}, ["a-1", "b-1", "a-2"]),  # Powertools' default: the rest of the batch fails
        ({"skip_group_on_error": False}, ["a-1", "b-1", "a-2"]),
        ({"skip_group_on_error": True}, ["a-1", "a-2"]),
    ],
    ids=["default", "False", "True"],
)
def test_sqs_fifo_partial_processor_is_a_fifo_batch_processor(options, failed):
    processor = SqsFifoPartialProcessor(
        **options, store=InMemoryPersistenceLayer(), raise_on_entire_batch_failure=False
    )

    def handler(record):
        if record.message_id == "a-1":
            raise ValueError("poison")

    event = sqs_event(sqs_record("a-1", 1, group="a"), sqs_record("b-1", 1, group="b"), sqs_record("a-2", 2, group="a"))
    response = process_partial_response(event, handler, processor)
    assert sorted(f["itemIdentifier"] for f in response["batchItemFailures"]) == sorted(failed)
    assert processor.summary.event_type == "sqs_fifo"


# -- exception names ---------------------------------------------------------------------------------------------


def test_powertools_exception_names_catch_what_powertools_code_expects():
    assert IdempotencyPersistenceLayerError is PersistenceLayerError
    assert consumer.IdempotencyPersistenceConnectionError is PersistenceLayerError
    assert IdempotencyAlreadyInProgressError.__module__ == "consumer._errors"
    for name in (
        "IdempotencyItemAlreadyExistsError",
        "IdempotencyItemNotFoundError",
        "IdempotencyInconsistentStateError",
        "IdempotencyInvalidStatusError",
        "IdempotencyPersistenceConfigError",
        "IdempotencyPersistenceConsistencyError",
        "IdempotencyModelTypeError",
        "IdempotencyKeyError",
        "IdempotencyValidationError",
    ):
        assert issubclass(getattr(consumer, name), IdempotencyError), name
        assert name in consumer.__all__
    assert issubclass(consumer.IdempotencyNoSerializationModelError, IdempotencyConfigError)


class FailingStore(InMemoryPersistenceLayer):
    def acquire(self, record, now_ms):  # noqa: ARG002 - the store contract's signature
        raise PersistenceLayerError("table not found", key=record.key)


def test_a_store_failure_is_caught_by_its_powertools_name():
    @idempotent_function(data_keyword_argument="data", persistence_store=FailingStore())
    def call_external_service(data):
        raise AssertionError("not reached: the lock was never taken")

    with pytest.raises(IdempotencyPersistenceLayerError, match="table not found"):
        call_external_service(data={"id": 1})


def test_a_validation_error_is_caught_by_its_powertools_name():
    store = InMemoryPersistenceLayer()
    config = IdempotencyConfig(event_key_jmespath="user", payload_validation_jmespath="amount")
    charge = idempotent(persistence_store=store, config=config)(lambda event, context: "charged")
    charge({"user": "u", "amount": 5}, None)
    with pytest.raises(IdempotencyValidationError):
        charge({"user": "u", "amount": 6}, None)


def _audited(function):
    """A decorator that copies its function's attributes, as Powertools' tracer.capture_method does."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        AUDITED.append(kwargs["record"].message_id)
        return function(*args, **kwargs)

    return wrapper


AUDITED: list[str] = []


def test_a_decorator_stacked_above_an_idempotent_function_handler_is_refused_not_skipped():
    # functools.wraps copies the function's marker onto the wrapper: run as that function, the wrapper (a
    # validation, a trace) would be skipped silently. Refused before any record runs; the order that works runs it.
    store, ran = InMemoryPersistenceLayer(), []

    @_audited
    @idempotent_function(data_keyword_argument="record", persistence_store=store)
    def above(record):
        ran.append(record.message_id)

    event = sqs_event(sqs_record("m-1", 1))
    with pytest.raises(TypeError, match="wraps an @idempotent_function") as refused:
        process_partial_response(event, above, BatchProcessor(EventType.SQS))
    assert ran == []
    assert str(refused.value) == (
        f"record handler {above.__qualname__} wraps an @idempotent_function (a decorator above it copied its "
        "attributes with functools.wraps): the processor would run the record in that function's guard and skip "
        "your wrapper. Put @idempotent_function outermost (directly above def), or call the wrapped function from a "
        "plain record handler"
    )

    @idempotent_function(data_keyword_argument="record", persistence_store=store)
    @_audited
    def below(record):
        ran.append(record.message_id)

    AUDITED.clear()
    processor = BatchProcessor(EventType.SQS)
    for _ in range(2):
        assert process_partial_response(event, below, processor) == {"batchItemFailures": []}
    assert (ran, AUDITED) == (["m-1"], ["m-1"])  # the wrapper ran inside the guard, once; the redelivery replayed


def test_a_cutover_on_the_processors_config_that_its_idempotent_function_handler_would_drop_is_refused():
    cutover = PowertoolsCutover(table_name="powertools", until=FAR_FUTURE, key_prefix="orders", boto3_client=object())
    ran = []

    @idempotent_function(data_keyword_argument="record", persistence_store=InMemoryPersistenceLayer())
    def handler(record):
        ran.append(record.message_id)

    processor = BatchProcessor(EventType.SQS, config=IdempotencyConfig(powertools_cutover=cutover))
    with pytest.raises(TypeError, match="put powertools_cutover on the function's config") as refused:
        process_partial_response(sqs_event(sqs_record("m-1", 1)), handler, processor)
    assert ran == []  # nothing ran: the whole batch comes back, and no record Powertools processed runs again
    assert str(refused.value).startswith("the processor's config reads a Powertools table (powertools_cutover), ")
    assert str(refused.value).endswith(" (records Powertools processed would otherwise run again)")


class PowertoolsTable:  # a boto3 client stand-in: a table in which Powertools processed no record
    def get_item(self, **_request: object) -> dict:
        return {}


@pytest.mark.parametrize("on_both", [True, False], ids=["cutover-on-both-configs", "cutover-on-neither"])
def test_an_idempotent_function_handler_whose_config_has_the_processors_cutover_runs(on_both):
    # Refused is only the cut-over the function's guard would drop: on both configs, or on neither, nothing is.
    cutover = PowertoolsCutover(table_name="pt", until=FAR_FUTURE, key_prefix="p", boto3_client=PowertoolsTable())
    config = IdempotencyConfig(powertools_cutover=cutover if on_both else None)
    ran = []

    @idempotent_function(data_keyword_argument="record", store=InMemoryPersistenceLayer(), config=config)
    def handler(record):
        ran.append(record.message_id)

    processor = BatchProcessor(EventType.SQS, config=config)
    assert process_partial_response(sqs_event(sqs_record("m-1", 1)), handler, processor) == {"batchItemFailures": []}
    assert ran == ["m-1"]
