"""Powertools' older batch API and its sync ``async_process_partial_response``, as faces of the one batch run.

``with processor(records, handler, lambda_context=...)`` with ``processor.process()`` (or ``async_process()``) and
``processor.response()``, ``@batch_processor`` and ``@async_batch_processor``: each record runs in its own guard, by
the same scheduling rules, with the same summary, as ``process_partial_response`` runs it. The older form keeps its
call per thread (and per asyncio task), so one processor still serves several at once.
"""

from __future__ import annotations

import asyncio
import threading
import warnings

import pytest
from events import kinesis_record, sqs_event, sqs_record
from fakes import FakeContext

from consumer import (
    AsyncBatchProcessor,
    BatchProcessingError,
    BatchProcessor,
    EventType,
    IdempotencyConfig,
    UnexpectedBatchTypeError,
    async_batch_processor,
    async_process_partial_response,
    batch_processor,
    process_partial_response,
)
from persistence import InMemoryPersistenceLayer, RecordStatus


def body_as_int(record):
    return int(record.json_body)


async def async_body_as_int(record):
    await asyncio.sleep(0)
    return int(record.json_body)


#: The decorators warn as Powertools' do; the tests that are not about it keep quiet.
quiet = pytest.mark.filterwarnings("ignore::DeprecationWarning")


# -- the with-form ------------------------------------------------------------------------------------------------


def test_the_with_form_runs_each_record_once_in_its_guard_and_answers_as_powertools_does():
    store, ran = InMemoryPersistenceLayer(), []
    processor = BatchProcessor(EventType.SQS, store=store)
    records = [sqs_record("a", 1), sqs_record("b", "x")]

    def handler(record):
        ran.append(record.message_id)
        return body_as_int(record)

    with processor(records, handler) as batch:
        outcomes = batch.process()
    assert batch is processor
    assert outcomes[0] == ("success", 1, records[0])
    assert outcomes[1][0] == "fail"
    assert outcomes[1][1].startswith("<class 'ValueError'>:")
    assert outcomes[1][2].message_id == "b"
    assert processor.response() == {"batchItemFailures": [{"itemIdentifier": "b"}]}
    assert [r.message_id for r in processor.fail_messages] == ["b"]
    assert processor.success_messages == [records[0]]

    with processor(records, handler):  # redelivered: a replays, b runs again
        again = processor.process()
    assert again[0] == ("success", 1, records[0])
    assert ran == ["a", "b", "b"]
    assert (processor.summary.processed, processor.summary.replayed, processor.summary.failed) == (0, 1, 1)
    assert store.get(processor.items[0].key).status is RecordStatus.COMPLETE


def test_the_with_form_passes_its_lambda_context_and_bounds_locks_by_it():
    store = InMemoryPersistenceLayer()
    processor = BatchProcessor(EventType.SQS, store=store)
    context, seen = FakeContext(remaining_ms=5_000), []

    def handler(record, lambda_context):
        seen.append(lambda_context)

    with processor([sqs_record("a", 1)], handler, lambda_context=context):
        processor.process()
    assert seen == [context]
    assert processor.summary.processed == 1


def test_the_end_of_the_block_raises_when_every_record_failed_and_the_response_still_names_them():
    processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    after_process = []

    def invocation():
        with processor([sqs_record("a", "x")], body_as_int):
            processor.process()
            after_process.append(True)  # as in Powertools: the block runs on, the end of it raises

    with pytest.raises(BatchProcessingError) as raised:
        invocation()
    assert after_process == [True]
    assert raised.value.response == {"batchItemFailures": [{"itemIdentifier": "a"}]}
    assert processor.response() == {"batchItemFailures": [{"itemIdentifier": "a"}]}  # never an empty answer


def test_a_block_that_never_processes_its_records_fails_rather_than_acknowledge_them():
    store = InMemoryPersistenceLayer()
    processor = BatchProcessor(EventType.SQS, store=store)
    with pytest.raises(RuntimeError, match="without processing its records"), processor([sqs_record("a", 1)], int):
        pass
    with pytest.raises(RuntimeError, match="no batch was processed"):
        processor.response()
    assert list(store.scan()) == []


def test_the_older_form_is_refused_where_it_is_not_set_up():
    processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    with pytest.raises(TypeError, match="with processor"), processor:
        pass
    with pytest.raises(TypeError, match="process\\(\\) without arguments"):
        processor.process()
    with pytest.raises(ValueError, match="list of records"):
        processor({"Records": []}, int)
    with pytest.raises(ValueError, match="no 'Records' list"):
        processor.process(None, int)


def test_an_event_without_a_handler_is_refused_in_a_block_and_out_of_one():
    processor, ran = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer()), []
    event = sqs_event(sqs_record("a", 1))
    with pytest.raises(TypeError, match="record_handler is missing"):
        processor.process(event)
    with processor([sqs_record("b", 2)], lambda record: ran.append(record.message_id)) as batch:
        with pytest.raises(TypeError, match="record_handler is missing"):
            batch.process(event)  # not the block's records in its place
        batch.process()
    assert ran == ["b"]


def test_one_processor_serves_several_threads_each_in_its_own_block():
    """Both blocks are open at once (a barrier between entering and processing): each thread's call is its own."""
    processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    entered, processed = threading.Barrier(2), threading.Barrier(2)
    answers: dict[str, object] = {}

    def invocation(prefix: str) -> None:
        records = [sqs_record(f"{prefix}-1", 1), sqs_record(f"{prefix}-2", "x")]
        with processor(records, body_as_int):
            entered.wait(5)
            outcomes = processor.process()
            processed.wait(5)
        answers[prefix] = ([o[0] for o in outcomes], processor.response(), processor.summary.records)

    threads = [threading.Thread(target=invocation, args=(p,)) for p in ("p", "q")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert answers == {
        prefix: (["success", "fail"], {"batchItemFailures": [{"itemIdentifier": f"{prefix}-2"}]}, 2)
        for prefix in ("p", "q")
    }


def test_the_with_form_keeps_the_scheduling_rules_and_the_summary_of_process_partial_response():
    """A Kinesis batch: after a failure the rest of its partition key is reported, and the summary agrees."""
    event = {
        "Records": [
            kinesis_record(1, "k1", 1),
            kinesis_record(2, "k1", "x"),
            kinesis_record(3, "k1", 3),
            kinesis_record(4, "k2", 4),
        ]
    }

    def on_kinesis(record):
        return int(record.json_data)

    expected = process_partial_response(
        event, on_kinesis, BatchProcessor(EventType.KINESIS, store=InMemoryPersistenceLayer())
    )
    reference = BatchProcessor(EventType.KINESIS, store=InMemoryPersistenceLayer())
    process_partial_response(event, on_kinesis, reference)

    older = BatchProcessor(EventType.KinesisDataStreams, store=InMemoryPersistenceLayer())
    with older(event["Records"], on_kinesis):
        older.process()
    assert older.response() == expected
    assert len(expected["batchItemFailures"]) == 2
    summary, reference_summary = older.summary, reference.summary
    assert (
        (summary.processed, summary.failed, summary.skipped)
        == (
            reference_summary.processed,
            reference_summary.failed,
            reference_summary.skipped,
        )
        == (2, 1, 1)
    )


# -- the decorators -------------------------------------------------------------------------------------------------


def test_batch_processor_runs_the_batch_before_the_handler_which_returns_the_response():
    store, calls = InMemoryPersistenceLayer(), []
    processor = BatchProcessor(EventType.SQS, store=store)

    @batch_processor(record_handler=lambda r: calls.append(r.message_id), processor=processor)
    def handler(event, context):
        return processor.response()

    event = sqs_event(sqs_record("a", 1), sqs_record("a", 1), sqs_record("b", 2))
    with pytest.warns(DeprecationWarning, match="The `batch_processor` decorator is deprecated in V3"):
        assert handler(event, {}) == {"batchItemFailures": []}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert handler(event, {}) == {"batchItemFailures": []}
    assert calls == ["a", "b"]  # each record in its guard: duplicates and redeliveries replay
    assert processor.summary.replayed == 3


@quiet
def test_batch_processor_raises_before_the_handler_when_every_record_failed():
    processor, handled = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer()), []

    @batch_processor(record_handler=body_as_int, processor=processor)
    def handler(event, context):
        handled.append(True)

    with pytest.raises(BatchProcessingError):
        handler(sqs_event(sqs_record("a", "x")), None)
    assert handled == []


@quiet
def test_async_batch_processor_on_a_plain_def_runs_the_batch_on_its_own_loop():
    store, calls = InMemoryPersistenceLayer(), []
    processor = AsyncBatchProcessor(EventType.SQS, store=store)

    async def record_handler(record):
        calls.append(record.message_id)
        return await async_body_as_int(record)

    @async_batch_processor(record_handler=record_handler, processor=processor)
    def handler(event, context):
        return processor.response()

    event = sqs_event(sqs_record("a", 1), sqs_record("b", "x"))
    with pytest.warns(DeprecationWarning, match="The `async_batch_processor` decorator is deprecated in V3"):
        first = handler(event, {})
    assert first == handler(event, {}) == {"batchItemFailures": [{"itemIdentifier": "b"}]}
    assert calls == ["a", "b", "b"]


@quiet
def test_async_batch_processor_keeps_an_async_def_handler_async():
    processor = AsyncBatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())

    @async_batch_processor(record_handler=async_body_as_int, processor=processor)
    async def handler(event, context):
        return processor.response()

    assert asyncio.run(handler(sqs_event(sqs_record("a", 1)), None)) == {"batchItemFailures": []}


@quiet
def test_a_plain_def_decorated_for_async_and_called_in_a_running_loop_runs_nothing_and_says_why():
    store = InMemoryPersistenceLayer()
    processor = AsyncBatchProcessor(EventType.SQS, store=store)

    @async_batch_processor(record_handler=async_body_as_int, processor=processor)
    def handler(event, context):
        return processor.response()

    async def main():
        handler(sqs_event(sqs_record("a", 1)), None)

    with pytest.raises(RuntimeError, match="make it async def"):
        asyncio.run(main())
    assert list(store.scan()) == []


def test_each_decorator_refuses_the_other_kind_of_processor():
    with pytest.raises(TypeError, match="use @async_batch_processor"):
        batch_processor(record_handler=int, processor=AsyncBatchProcessor(EventType.SQS))
    with pytest.raises(TypeError, match="takes an AsyncBatchProcessor"):
        async_batch_processor(record_handler=int, processor=BatchProcessor(EventType.SQS))


# -- the async with-form and async_process_partial_response from sync code -----------------------------------------


def test_async_process_runs_the_block_from_sync_code_and_is_awaited_in_a_coroutine():
    processor = AsyncBatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    records = [sqs_record("a", 1), sqs_record("b", "x")]
    with processor(records, async_body_as_int) as batch:
        outcomes = batch.async_process()
    assert [o[0] for o in outcomes] == ["success", "fail"]
    assert processor.response() == {"batchItemFailures": [{"itemIdentifier": "b"}]}

    async def main():
        with processor(records, async_body_as_int):
            awaited = await processor.async_process()
        return awaited, processor.response(), processor.summary.replayed

    awaited, response, replayed = asyncio.run(main())
    assert [o[0] for o in awaited] == ["success", "fail"]
    assert (response, replayed) == ({"batchItemFailures": [{"itemIdentifier": "b"}]}, 1)


def test_tasks_of_one_loop_each_keep_their_own_block():
    processor = AsyncBatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())

    async def invocation(prefix, entered):
        with processor([sqs_record(f"{prefix}-1", 1), sqs_record(f"{prefix}-2", "x")], async_body_as_int):
            entered.set()
            await asyncio.sleep(0.01)  # the other task enters its block meanwhile
            await processor.process()
        return processor.response()

    async def main():
        first, second = asyncio.Event(), asyncio.Event()
        one = asyncio.ensure_future(invocation("p", first))
        await first.wait()
        two = asyncio.ensure_future(invocation("q", second))
        return await asyncio.gather(one, two)

    assert asyncio.run(main()) == [{"batchItemFailures": [{"itemIdentifier": f"{p}-2"}]} for p in ("p", "q")]


def test_async_process_partial_response_called_from_sync_code_returns_the_response():
    processor = AsyncBatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    event = sqs_event(sqs_record("a", 1), sqs_record("b", "x"))

    def lambda_handler(event, context):  # Powertools' documented pattern: no await, no asyncio.run
        return async_process_partial_response(event, async_body_as_int, processor, context)

    assert lambda_handler(event, FakeContext()) == {"batchItemFailures": [{"itemIdentifier": "b"}]}
    assert (processor.summary.processed, processor.summary.failed) == (1, 1)
    assert lambda_handler(event, FakeContext()) == {"batchItemFailures": [{"itemIdentifier": "b"}]}
    assert (processor.summary.replayed, processor.summary.failed) == (1, 1)  # the caller's own summary, not stale


def test_async_process_partial_response_from_a_plain_def_in_a_running_loop_runs_nothing_and_says_why():
    # It returned a coroutine there, which the plain def handed on as its response: unawaited, the whole batch's
    # outcome was dropped in silence. Refused instead, as @async_batch_processor refuses a plain def there.
    store = InMemoryPersistenceLayer()
    processor = AsyncBatchProcessor(EventType.SQS, store=store)

    def lambda_handler(event, context):
        return async_process_partial_response(event, async_body_as_int, processor, context)

    async def main():
        return lambda_handler(sqs_event(sqs_record("a", 1)), None)

    with pytest.raises(RuntimeError, match=r"'.*lambda_handler' is a plain def .* make it async def and await"):
        asyncio.run(main())
    assert list(store.scan()) == []


def test_async_process_from_a_plain_def_in_a_running_loop_runs_nothing_and_says_why():
    store = InMemoryPersistenceLayer()
    processor = AsyncBatchProcessor(EventType.SQS, store=store)

    def lambda_handler(event, context):
        with processor(event["Records"], async_body_as_int, context):
            return processor.async_process()

    async def main():
        return lambda_handler(sqs_event(sqs_record("a", 1)), None)

    with pytest.raises(RuntimeError, match=r"'.*lambda_handler' is a plain def .* make it async def and await"):
        asyncio.run(main())
    assert list(store.scan()) == []


def test_async_process_partial_response_is_awaited_in_a_coroutine():
    processor = AsyncBatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())

    async def main():
        pending = async_process_partial_response(sqs_event(sqs_record("a", 1)), async_body_as_int, processor)
        assert asyncio.iscoroutine(pending)  # a loop runs here: nothing ran yet, the caller awaits
        return await pending

    assert asyncio.run(main()) == {"batchItemFailures": []}
    assert processor.summary.processed == 1


def test_async_process_partial_response_takes_an_async_processor():
    with pytest.raises(TypeError, match="takes an AsyncBatchProcessor"):
        async_process_partial_response(sqs_event(sqs_record("a", 1)), int, BatchProcessor(EventType.SQS))


def _fails_on_bad(record):
    if record.body == "bad":
        raise ValueError("bad record")
    return record.body


def test_a_nested_block_gives_the_outer_block_its_own_call_back():
    # The inner block ended by clearing the call: the outer block then kept no batch, and response() answered the
    # inner block's, acknowledging the outer's failed record.
    processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    outer = [sqs_record("a1", "bad", raw_body=True), sqs_record("a2", "ok", raw_body=True)]
    with processor(outer, _fails_on_bad):
        processor.process()
        with processor([sqs_record("b1", "ok", raw_body=True)], _fails_on_bad):
            processor.process()
    assert processor.response() == {"batchItemFailures": [{"itemIdentifier": "a1"}]}


def test_an_outer_block_that_processed_nothing_raises_though_an_inner_one_did():
    processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    refused = pytest.raises(RuntimeError, match="ended without processing its records")
    outer, inner = [sqs_record("a1", "ok", raw_body=True)], [sqs_record("b1", "ok", raw_body=True)]
    with refused, processor(outer, _fails_on_bad), processor(inner, _fails_on_bad):  # the inner block inside the outer
        processor.process()


def test_kafka_records_handed_without_their_cluster_are_refused_under_the_default_key():
    # Without eventSourceArn or bootstrapServers, two clusters' records at one offset shared a key: the second
    # replayed the first's result and its body never ran.
    record = {"topic": "orders", "partition": 0, "offset": 5, "timestamp": 1, "timestampType": "CREATE_TIME",
              "key": None, "value": "b2s=", "headers": []}  # fmt: skip
    processor = BatchProcessor(EventType.KAFKA, store=InMemoryPersistenceLayer())
    with pytest.raises(UnexpectedBatchTypeError, match="has no eventSourceArn or bootstrapServers"):
        processor([record], lambda r: 1)
    keyed = BatchProcessor(EventType.KAFKA, store=InMemoryPersistenceLayer(), config=IdempotencyConfig(
        event_key_jmespath="[topic, partition, offset]"))  # fmt: skip
    with keyed([record], lambda r: 1):
        keyed.process()
    assert keyed.response() == {"batchItemFailures": []}


def test_an_async_processors_response_is_this_threads_latest_batch():
    # A sync call left its batch in the caller's context; a later asyncio.run processed another in a copy of it,
    # and response() answered the first.
    async def handler(record):
        if record.body == "bad":
            raise ValueError("bad record")
        return 1

    processor = AsyncBatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    first = async_process_partial_response(sqs_event(sqs_record("a", "ok", raw_body=True)), handler, processor)
    assert first == {"batchItemFailures": []}

    async def invocation(event):
        await processor.process(event, handler, None)

    asyncio.run(invocation(sqs_event(sqs_record("b", "bad", raw_body=True), sqs_record("c", "ok", raw_body=True))))
    assert processor.response() == {"batchItemFailures": [{"itemIdentifier": "b"}]}
    assert processor.summary.records == 2
