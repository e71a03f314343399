"""``on_outcome``: once per record, in batch order, after the outcomes are decided; it can never change one."""

from __future__ import annotations

import logging

import pytest
from events import failures, sqs_event, sqs_record
from fakes import FakeContext
from outcome_batches import run_every_outcome

from consumer import (
    AsyncBatchProcessor,
    BatchProcessor,
    EventType,
    IdempotencyConfig,
    IdempotencyKeyError,
    Item,
    Outcome,
)
from persistence import InMemoryPersistenceLayer, RecordStatus

EVENT = sqs_event(sqs_record("m-1", 1), sqs_record("m-2", 2), sqs_record("m-1", 1), sqs_record("m-3", 3))


def handler(record):
    if record.message_id == "m-2":
        raise ValueError("declined")
    return {"done": record.message_id}


def test_the_hook_sees_every_record_once_in_batch_order_with_its_outcome(face):
    seen: list[Item] = []
    processor = face.processor(EventType.SQS, store=InMemoryPersistenceLayer(), on_outcome=seen.append)
    response = face.process(EVENT, handler, processor, FakeContext())
    assert failures(response) == ["m-2"]
    assert [(i.item_id, i.outcome) for i in seen] == [
        ("m-1", Outcome.PROCESSED),
        ("m-2", Outcome.FAILED),
        ("m-1", Outcome.REPLAYED),
        ("m-3", Outcome.PROCESSED),
    ]
    assert seen == processor.items  # the same objects the processor keeps
    assert isinstance(seen[1].error, ValueError)
    assert seen[0].key == seen[2].key is not None
    assert seen[2].result == {"done": "m-1"}


def test_the_hook_sees_every_outcome_of_the_batches_that_have_them_all():
    seen: list[Item] = []
    run = run_every_outcome(on_outcome=seen.append)
    assert seen == list(run.items.values())
    assert {i.outcome for i in seen} == set(Outcome)


def test_a_record_running_unguarded_carries_why_only_when_no_key_was_selected(face, monkeypatch):
    seen: list[Item] = []
    config = IdempotencyConfig(event_key_jmespath="missing", raise_on_no_idempotency_key=False)
    processor = face.processor(EventType.SQS, store=InMemoryPersistenceLayer(), config=config, on_outcome=seen.append)
    face.process(sqs_event(sqs_record("m-1", 1)), handler, processor)
    monkeypatch.setenv("IDEMPOTENCY_DISABLED", "1")  # by request: no key was looked for, so none is missing
    face.process(sqs_event(sqs_record("m-1", 1)), handler, processor)
    assert [(i.outcome, i.key) for i in seen] == [(Outcome.UNGUARDED, None)] * 2
    assert isinstance(seen[0].error, IdempotencyKeyError)
    assert "'missing'" in str(seen[0].error)  # the expression that selected nothing
    assert seen[1].error is None


def test_a_hook_that_raises_is_logged_and_changes_no_outcome(face, caplog):
    calls: list[str] = []

    def flaky(item):
        calls.append(item.item_id)
        raise RuntimeError(f"tracing backend down ({item.item_id})")

    store = InMemoryPersistenceLayer()
    processor = face.processor(EventType.SQS, store=store, on_outcome=flaky)
    with caplog.at_level(logging.ERROR, "idempotent_consumer"):
        response = face.process(EVENT, handler, processor, FakeContext(aws_request_id="r-hook"))
    assert failures(response) == ["m-2"]  # as without the hook
    assert calls == ["m-1", "m-2", "m-1", "m-3"]  # every record still reached it
    assert [i.outcome for i in processor.items] == [
        Outcome.PROCESSED,
        Outcome.FAILED,
        Outcome.REPLAYED,
        Outcome.PROCESSED,
    ]
    assert {r.status for r in store.scan()} == {RecordStatus.COMPLETE}  # m-1 and m-3 committed, m-2 released
    hook_errors = [r for r in caplog.records if r.getMessage().startswith("on_outcome hook raised")]
    assert len(hook_errors) == 4
    first = hook_errors[0]
    assert first.getMessage() == (
        "on_outcome hook raised for record m-1 (its outcome, processed, stands): "
        "RuntimeError('tracing backend down (m-1)')"
    )
    assert (first.levelno, first.item_identifier, first.lambda_request_id) == (logging.ERROR, "m-1", "r-hook")
    assert first.exc_info[0] is RuntimeError  # with its traceback


def test_a_keyboard_interrupt_in_the_hook_fails_the_invocation_and_the_redelivery_loses_nothing(face):
    store, runs = InMemoryPersistenceLayer(), []

    def counting(record):
        runs.append(record.message_id)
        return handler(record)

    def interrupted(item):
        raise KeyboardInterrupt

    processor = face.processor(EventType.SQS, store=store, on_outcome=interrupted)
    with pytest.raises(KeyboardInterrupt):
        face.process(EVENT, counting, processor, FakeContext())
    assert runs == ["m-1", "m-2", "m-3"]  # every record ran (or replayed) before the hook was called
    # Lambda redelivers the whole batch: what committed replays, what failed runs again.
    again = face.processor(EventType.SQS, store=store)
    response = face.process(EVENT, counting, again, FakeContext())
    assert failures(response) == ["m-2"]
    assert runs == ["m-1", "m-2", "m-3", "m-2"]
    assert [i.outcome for i in again.items] == [Outcome.REPLAYED, Outcome.FAILED, Outcome.REPLAYED, Outcome.REPLAYED]


async def async_hook(item):
    return None


def generator_hook(item):
    yield item


@pytest.mark.parametrize("processor_class", [BatchProcessor, AsyncBatchProcessor])
def test_a_hook_that_would_never_run_is_refused_when_the_processor_is_built(processor_class):
    store = InMemoryPersistenceLayer()
    for hook in (async_hook, generator_hook):
        with pytest.raises(TypeError, match="on_outcome is called and never awaited or iterated"):
            processor_class(EventType.SQS, store=store, on_outcome=hook)
    with pytest.raises(TypeError, match="on_outcome must be callable"):
        processor_class(EventType.SQS, store=store, on_outcome="print")


def test_an_awaitable_a_hook_returns_is_closed_and_logged(caplog):
    processor = BatchProcessor(
        EventType.SQS,
        store=InMemoryPersistenceLayer(),
        on_outcome=lambda item: async_hook(item),  # noqa: PLW0108 - a plain def
    )
    with caplog.at_level(logging.ERROR, "idempotent_consumer"):
        response = processor.process(sqs_event(sqs_record("m-1", 1)), handler)
    assert response == {"batchItemFailures": []}
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("on_outcome hook returned an awaitable for record m-1")


def test_an_item_is_shown_and_compared_by_its_attributes_and_is_not_hashable():
    item = Item({"messageId": "m-1"}, "typed", "m-1", None, Outcome.PROCESSED, result={"done": 1}, key="k")
    assert repr(item) == (
        "Item(raw={'messageId': 'm-1'}, record='typed', item_id='m-1', group=None, outcome=<Outcome.PROCESSED: "
        "'processed'>, error=None, result={'done': 1}, key='k', release_error=None)"
    )
    same = Item({"messageId": "m-1"}, "typed", "m-1", None, Outcome.PROCESSED, result={"done": 1}, key="k")
    assert item == same
    same.outcome = Outcome.FAILED
    assert item != same
    assert item != ("m-1",)
    with pytest.raises(TypeError):
        hash(item)
    with pytest.raises(AttributeError):
        item.other = 1  # type: ignore[attr-defined]
