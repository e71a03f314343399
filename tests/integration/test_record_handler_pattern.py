"""Powertools' batch pattern: an ``@idempotent_function(data_keyword_argument="record")`` handed to our processor.

The processor hands each record to the function by that keyword and runs it inside the function's own guard (its
store, config and key prefix), never inside a second guard of its own: one lock per record, on the function's key.
Proved on both faces (threads and asyncio) against real stores: an SQLite file and DynamoDB Local.
"""

from __future__ import annotations

import logging
import threading

import pytest
from events import kinesis_record, sqs_event, sqs_record
from fakes import CountingStore, FakeClock, FakeContext

from consumer import (
    BatchProcessingError,
    BatchProcessor,
    EventType,
    IdempotencyAlreadyInProgressError,
    IdempotencyConfig,
    IdempotencyGuard,
    KinesisRecord,
    SqsFifoPartialProcessor,
    SQSRecord,
    current_idempotency_key,
    decorators,
    idempotent_function,
    make_key,
    process_partial_response,
)
from persistence import DynamoDBPersistenceLayer, InMemoryPersistenceLayer, RecordStatus, SQLitePersistenceLayer

BY_ID = IdempotencyConfig(event_key_jmespath="messageId")
LOGGER = "idempotent_consumer"


@pytest.fixture(params=["sqlite", "dynamodb"])
def real_store(request, tmp_path):
    if request.param == "sqlite":
        return SQLitePersistenceLayer(str(tmp_path / "records.sqlite3"))
    server = request.getfixturevalue("ddb_server")
    return DynamoDBPersistenceLayer(table_name=server.create_table(), boto3_client=server.client())


@pytest.fixture(autouse=True)
def _forget_earlier_functions():
    """Each parametrization decorates its own function of one name; the one before stays alive in the summary the
    processor left in this thread's context, and a second live function of a name is refused."""
    yield
    decorators._live_functions.clear()


def failures(response):
    return [f["itemIdentifier"] for f in response["batchItemFailures"]]


def function_key(function, message_id, config=BY_ID):
    return make_key({"messageId": message_id}, config, f"{config.prefix}.{function.__module__}.{function.__qualname__}")


def summary_counts(processor):
    s = processor.summary
    return s.processed, s.replayed, s.failed, s.unguarded


def test_each_record_is_handed_by_keyword_and_runs_once_in_the_functions_guard(face, real_store):
    ran = []

    def record_handler(record):
        ran.append((type(record).__name__, record.message_id))
        return {"message": record.body}

    handler = idempotent_function(data_keyword_argument="record", config=BY_ID, persistence_store=real_store)(
        face.define(record_handler)
    )
    processor = face.processor(EventType.SQS)  # no store of its own, as in Powertools' documentation
    event = sqs_event(sqs_record("m-1", "a"), sqs_record("m-2", "b"), sqs_record("m-1", "a"))
    assert face.process(event, handler, processor, FakeContext()) == {"batchItemFailures": []}
    assert ran == [("SQSRecord", "m-1"), ("SQSRecord", "m-2")]
    assert summary_counts(processor) == (2, 1, 0, 0)
    assert [item.result for item in processor.items] == [{"message": '"a"'}, {"message": '"b"'}, {"message": '"a"'}]
    # One record per message, on the function's key (what calling the function directly would use).
    keys = sorted(record.key for record in real_store.scan())
    assert keys == sorted(function_key(record_handler, m) for m in ("m-1", "m-2"))
    assert all(real_store.get(key).status is RecordStatus.COMPLETE for key in keys)
    # A redelivery of the whole batch replays every record: nothing runs twice.
    assert face.process(event, handler, processor, FakeContext()) == {"batchItemFailures": []}
    assert summary_counts(processor) == (0, 3, 0, 0)
    assert len(ran) == 2


def test_with_a_processor_store_too_the_record_is_guarded_once_by_the_function(face, real_store):
    """The two layers do not both lock: the function's guard wins (its key, store and config)."""
    processor_store = CountingStore(InMemoryPersistenceLayer())
    ran = []

    def body(record):
        ran.append(record.message_id)
        return "done"

    # async def on the async face, the decorator outermost (a wrapper above it is refused)
    record_handler = idempotent_function(data_keyword_argument="record", config=BY_ID, persistence_store=real_store)(
        face.define(body)
    )
    processor = face.processor(EventType.SQS, store=processor_store, config=IdempotencyConfig(key_prefix="batch"))
    event = sqs_event(sqs_record("m-1", 1), sqs_record("m-1", 1))
    assert face.process(event, record_handler, processor) == {"batchItemFailures": []}
    assert ran == ["m-1"]
    assert summary_counts(processor) == (1, 1, 0, 0)
    assert sum(processor_store.calls.values()) == 0  # the processor's own store is not used for such a handler
    assert [r.key for r in real_store.scan()] == [function_key(record_handler, "m-1")]


def test_the_function_called_directly_and_through_the_processor_shares_its_records(real_store):
    ran = []

    @idempotent_function(data_keyword_argument="record", config=BY_ID, persistence_store=real_store)
    def record_handler(record):
        ran.append(record.message_id)
        return {"id": record.message_id}

    raw = sqs_record("m-1", 1)
    assert record_handler(record=SQSRecord.from_raw(raw)) == {"id": "m-1"}
    processor = SqsFifoPartialProcessor()
    assert process_partial_response(event=sqs_event(raw), record_handler=record_handler, processor=processor) == {
        "batchItemFailures": []
    }
    assert ran == ["m-1"]
    assert processor.summary.replayed == 1
    assert processor.items[0].result == {"id": "m-1"}


def test_a_failing_record_is_reported_its_lock_released_and_it_runs_again_once_fixed(face, real_store):
    broken = {"m-2"}
    ran = []

    def record_handler(record):
        ran.append(record.message_id)
        if record.message_id in broken:
            raise ValueError(f"cannot process {record.message_id}")
        return "ok"

    handler = idempotent_function(data_keyword_argument="record", config=BY_ID, persistence_store=real_store)(
        face.define(record_handler)
    )
    processor = face.processor(EventType.SQS)
    event = sqs_event(sqs_record("m-1", 1), sqs_record("m-2", 2), sqs_record("m-3", 3))
    assert failures(face.process(event, handler, processor)) == ["m-2"]
    assert real_store.get(function_key(record_handler, "m-2")) is None  # released, not left locked
    assert isinstance(processor.items[1].error, ValueError)
    broken.clear()
    assert face.process(event, handler, processor) == {"batchItemFailures": []}
    assert ran == ["m-1", "m-2", "m-3", "m-2"]
    assert summary_counts(processor) == (1, 2, 0, 0)


def test_a_base_exception_in_the_function_releases_its_lock_and_fails_the_invocation(real_store):
    ran = []

    class Interrupted(BaseException):
        pass

    @idempotent_function(data_keyword_argument="record", config=BY_ID, persistence_store=real_store)
    def record_handler(record):
        ran.append(record.message_id)
        if record.message_id == "m-2" and ran.count("m-2") == 1:
            raise Interrupted
        return "ok"

    processor = SqsFifoPartialProcessor()
    event = sqs_event(sqs_record("m-1", 1), sqs_record("m-2", 2), sqs_record("m-3", 3))
    with pytest.raises(Interrupted):
        process_partial_response(event, record_handler, processor)
    # m-1 committed before; m-2 raised the invocation (its lock released); m-3 never started: the batch comes back.
    assert real_store.get(function_key(record_handler, "m-1")).status is RecordStatus.COMPLETE
    assert real_store.get(function_key(record_handler, "m-2")) is None
    assert ran == ["m-1", "m-2"]
    assert process_partial_response(event, record_handler, processor) == {"batchItemFailures": []}
    assert ran == ["m-1", "m-2", "m-2", "m-3"]


def test_a_record_another_invocation_holds_is_reported_in_progress(face, real_store):
    ran = []

    def record_handler(record):
        ran.append(record.message_id)

    handler = idempotent_function(data_keyword_argument="record", config=BY_ID, persistence_store=real_store)(
        face.define(record_handler)
    )
    prefix = f"{BY_ID.prefix}.{record_handler.__module__}.{record_handler.__qualname__}"
    holder = IdempotencyGuard({"messageId": "m-1"}, store=real_store, config=BY_ID, key_prefix=prefix)
    holder.__enter__()  # another invocation's live lock on the function's key
    try:
        processor = face.processor(EventType.SQS, raise_on_entire_batch_failure=False)
        response = face.process(sqs_event(sqs_record("m-1", 1), sqs_record("m-2", 2)), handler, processor)
    finally:
        holder.__exit__(None, None, None)
    assert failures(response) == ["m-1"]
    assert isinstance(processor.items[0].error, IdempotencyAlreadyInProgressError)
    assert processor.summary.in_progress == 1
    assert ran == ["m-2"]


def test_every_record_failing_raises_with_every_cause(face, real_store):
    def record_handler(record):
        raise RuntimeError(record.message_id)

    handler = idempotent_function(data_keyword_argument="record", config=BY_ID, persistence_store=real_store)(
        face.define(record_handler)
    )
    with pytest.raises(BatchProcessingError) as raised:
        face.process(sqs_event(sqs_record("m-1", 1), sqs_record("m-2", 2)), handler, face.processor(EventType.SQS))
    assert [item_id for item_id, _ in raised.value.errors] == ["m-1", "m-2"]
    assert list(real_store.scan()) == []


def test_threads_each_see_their_own_records_key(real_store):
    seen = {}
    lock = threading.Lock()

    @idempotent_function(data_keyword_argument="record", config=BY_ID, persistence_store=real_store)
    def record_handler(record):
        with lock:
            seen[record.message_id] = current_idempotency_key()

    processor = BatchProcessor(EventType.SQS, max_workers=4)
    response = process_partial_response(
        sqs_event(*(sqs_record(f"m-{i}", i) for i in range(8))), record_handler, processor
    )
    assert response == {"batchItemFailures": []}
    assert seen == {f"m-{i}": function_key(record_handler, f"m-{i}") for i in range(8)}


def test_a_stream_record_goes_by_the_functions_keyword_and_its_failure_fails_the_rest_of_its_key(real_store):
    ran = []

    @idempotent_function(
        data_keyword_argument="item", config=IdempotencyConfig(event_key_jmespath="eventID"), store=real_store
    )
    def handle_click(item: KinesisRecord):
        ran.append(item.json_data["n"])
        if item.json_data["n"] == 2:
            raise ValueError("bad click")

    processor = BatchProcessor(EventType.KinesisDataStreams, raise_on_entire_batch_failure=False)
    event = {"Records": [kinesis_record(i, "user-1", {"n": i}) for i in (1, 2, 3)]}
    response = process_partial_response(event, handle_click, processor)
    assert len(failures(response)) == 2  # the failed record and the one after it, same partition key
    assert ran == [1, 2]


def test_the_lambda_context_reaches_a_handler_that_asks_for_it(face):
    context, seen = FakeContext(), []

    def plain(record, lambda_context=None):
        seen.append(("plain", lambda_context))

    def guarded(record, lambda_context):
        seen.append(("function", lambda_context))

    store = InMemoryPersistenceLayer()
    function = idempotent_function(data_keyword_argument="record", store=store)(face.define(guarded))
    face.process(
        sqs_event(sqs_record("m-1", 1)), face.define(plain), face.processor(EventType.SQS, store=store), context
    )
    face.process(sqs_event(sqs_record("m-1", 1)), function, face.processor(EventType.SQS), context)
    assert seen == [("plain", context), ("function", context)]


def test_a_processor_without_a_store_runs_a_plain_handler_unguarded_and_says_so_once(face, caplog):
    ran = []
    processor = face.processor(EventType.SQS)
    event = sqs_event(sqs_record("m-1", 1), sqs_record("m-1", 1))
    with caplog.at_level(logging.WARNING, LOGGER):
        for _ in range(2):
            assert face.process(event, face.define(lambda record: ran.append(record.message_id)), processor) == {
                "batchItemFailures": []
            }
    assert ran == ["m-1"] * 4  # at least once, as Powertools' BatchProcessor without idempotency
    assert summary_counts(processor) == (0, 0, 0, 2)
    assert caplog.text.count("has no store") == 1


def test_disabled_idempotency_runs_the_function_unguarded(face, real_store, monkeypatch):
    monkeypatch.setenv("POWERTOOLS_IDEMPOTENCY_DISABLED", "1")
    ran = []

    def record_handler(record):
        ran.append(record.message_id)

    handler = idempotent_function(data_keyword_argument="record", config=BY_ID, persistence_store=real_store)(
        face.define(record_handler)
    )
    processor = face.processor(EventType.SQS)
    face.process(sqs_event(sqs_record("m-1", 1), sqs_record("m-1", 1)), handler, processor)
    assert ran == ["m-1", "m-1"]
    assert summary_counts(processor) == (0, 0, 0, 2)
    assert list(real_store.scan()) == []


def test_idempotency_disabled_is_read_once_a_batch(real_store, monkeypatch):
    # A body that turns it on mid-batch (a test double's set-up, say) changes the next batch, not the records left.
    ran = []

    @idempotent_function(data_keyword_argument="record", config=BY_ID, persistence_store=real_store)
    def record_handler(record):
        ran.append((record.message_id, current_idempotency_key()))
        monkeypatch.setenv("IDEMPOTENCY_DISABLED", "1")

    processor = BatchProcessor(EventType.SQS)
    process_partial_response(sqs_event(sqs_record("m-1", 1), sqs_record("m-2", 2)), record_handler, processor)
    process_partial_response(sqs_event(sqs_record("m-3", 3)), record_handler, processor)
    assert ran == [
        ("m-1", function_key(record_handler, "m-1")),
        ("m-2", function_key(record_handler, "m-2")),
        ("m-3", None),
    ]


def test_the_functions_clock_decides_when_its_records_expire(real_store):
    clock, ran = FakeClock(), []
    config = IdempotencyConfig(event_key_jmespath="messageId", expires_after_seconds=60)

    @idempotent_function(data_keyword_argument="record", config=config, persistence_store=real_store, clock=clock)
    def record_handler(record):
        ran.append(record.message_id)

    processor, event = BatchProcessor(EventType.SQS), sqs_event(sqs_record("m-1", 1))
    process_partial_response(event, record_handler, processor)
    process_partial_response(event, record_handler, processor)  # replayed
    clock.advance(61)
    process_partial_response(event, record_handler, processor)  # expired by the function's clock: runs again
    assert ran == ["m-1", "m-1"]


def test_a_decorated_method_is_handed_over_bound(real_store):
    class Refunds:
        def __init__(self):
            self.done = []

        @idempotent_function(data_keyword_argument="record", config=BY_ID, store=real_store, key_prefix="refunds")
        def refund(self, record):
            self.done.append(record.message_id)
            return len(self.done)

    refunds = Refunds()
    event = sqs_event(sqs_record("m-1", 1), sqs_record("m-2", 2), sqs_record("m-1", 1))
    assert process_partial_response(event, refunds.refund, BatchProcessor(EventType.SQS)) == {"batchItemFailures": []}
    assert refunds.done == ["m-1", "m-2"]


def test_a_function_whose_serializer_cannot_be_built_fails_each_record_on_both_faces(face):
    # The return annotation names a type its module imports for type checkers only: the serializer the function
    # asks for cannot be built when the processor builds the function's guard. Each record fails with that error,
    # reported in batchItemFailures: the async processor used to raise it out of the whole batch instead.
    from consumer.serialization import DataclassSerializer  # noqa: PLC0415 - this test's alone

    def record_handler(record) -> UnimportedReceipt:  # noqa: F821 - unresolvable on purpose
        return {"ok": record.message_id}

    handler = idempotent_function(
        data_keyword_argument="record", store=InMemoryPersistenceLayer(), output_serializer=DataclassSerializer
    )(face.define(record_handler))
    processor = face.processor(EventType.SQS, raise_on_entire_batch_failure=False)
    response = face.process(sqs_event(sqs_record("m-1", 1), sqs_record("m-2", 2)), handler, processor)
    assert failures(response) == ["m-1", "m-2"]
    assert [item.outcome.value for item in processor.items] == ["failed", "failed"]
    assert all("UnimportedReceipt" in str(item.error) for item in processor.items)
