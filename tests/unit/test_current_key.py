"""``current_idempotency_key()``: the key of the guarded body running now, in threads and asyncio tasks alike."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest
from events import sqs_event, sqs_record

from consumer import (
    AlreadyProcessed,
    AsyncBatchProcessor,
    BatchProcessor,
    EventType,
    IdempotencyConfig,
    IdempotencyGuard,
    NestedReplayError,
    async_process_partial_response,
    current_idempotency_key,
    idempotent,
    idempotent_function,
    make_key,
    process_partial_response,
)
from persistence import InMemoryPersistenceLayer

EVENT = {"id": "e-1", "detail-type": "OrderPlaced", "source": "shop", "detail": {"order": "o-1"}}


def test_outside_a_guarded_body_there_is_no_key():
    seen = []
    assert current_idempotency_key() is None
    with IdempotencyGuard({"messageId": "m-1"}, store=InMemoryPersistenceLayer()) as guard:
        assert current_idempotency_key() == guard.key
    assert current_idempotency_key() is None
    thread = threading.Thread(target=lambda: seen.append(current_idempotency_key()))  # a context of its own
    thread.start()
    thread.join()
    assert seen == [None]


def test_idempotent_and_idempotent_function_bodies_read_their_own_key(face):
    store, seen = InMemoryPersistenceLayer(), []

    def handler(event, context):
        seen.append(("handler", current_idempotency_key()))
        return face.call(charge, order=event["detail"]) if face.name == "sync" else None

    def charge_body(order):
        seen.append(("charge", current_idempotency_key()))
        return "charged"

    charge = idempotent_function(data_keyword_argument="order", store=store, key_prefix="pay")(face.define(charge_body))
    face.call(idempotent(store=store, key_prefix="book")(face.define(handler)), EVENT, None)
    face.call(charge, order={"order": "o-2"})
    expected = [("handler", make_key(EVENT, IdempotencyConfig(), "book"))]
    if face.name == "sync":
        expected.append(("charge", make_key({"order": "o-1"}, IdempotencyConfig(), "pay")))
    expected.append(("charge", make_key({"order": "o-2"}, IdempotencyConfig(), "pay")))
    assert seen == expected
    assert current_idempotency_key() is None


def test_nested_guards_see_the_innermost_key_then_the_outer_one_again(face):
    store, seen = InMemoryPersistenceLayer(), []
    step = IdempotencyConfig(event_key_jmespath="step", key_prefix="steps")

    def outer(guard):
        seen.append(current_idempotency_key())
        with IdempotencyGuard({"step": "charge"}, store=store, config=step) as inner:
            seen.append(current_idempotency_key())
            inner.result = "charged"
        seen.append(current_idempotency_key())
        try:
            with IdempotencyGuard({"step": "charge"}, store=store, config=step):
                seen.append("not reached: a replay")
        except AlreadyProcessed:
            seen.append(current_idempotency_key())  # a replay never ran a body: still the outer key
        return guard.key

    outer_key = face.guarded({"messageId": "m-1"}, outer, store=store)
    step_key = make_key({"step": "charge"}, step)
    assert seen == [outer_key, step_key, outer_key, outer_key]
    assert current_idempotency_key() is None


def test_the_key_is_cleared_when_the_body_raises_and_when_a_nested_replay_escapes():
    store = InMemoryPersistenceLayer()
    with pytest.raises(ValueError), IdempotencyGuard({"messageId": "m-1"}, store=store):
        raise ValueError("boom")
    assert current_idempotency_key() is None
    with IdempotencyGuard({"messageId": "done"}, store=store) as guard:
        guard.result = 1
    with (
        pytest.raises(NestedReplayError),
        IdempotencyGuard({"messageId": "m-2"}, store=store),
        IdempotencyGuard({"messageId": "done"}, store=store),
    ):
        pass
    assert current_idempotency_key() is None


def test_an_unguarded_body_has_no_key_even_inside_a_guarded_one(monkeypatch):
    store, seen = InMemoryPersistenceLayer(), []
    missing = IdempotencyConfig(event_key_jmespath="missing", raise_on_no_idempotency_key=False)
    with IdempotencyGuard({"messageId": "m-1"}, store=store):
        with IdempotencyGuard({"other": 1}, store=store, config=missing):
            seen.append(current_idempotency_key())  # this body runs unguarded: not the outer record's key
        with IdempotencyGuard({"messageId": "m-2"}, store=store, disabled=True):
            seen.append(current_idempotency_key())
    assert seen == [None, None]


def test_batch_worker_threads_each_see_their_own_records_key():
    store, seen, lock = InMemoryPersistenceLayer(), {}, threading.Lock()
    barrier = threading.Barrier(4)

    def handler(record):
        barrier.wait(timeout=10)  # four records at once, one in each worker thread
        with lock:
            seen[record.message_id] = (current_idempotency_key(), threading.current_thread().name)

    processor = BatchProcessor(EventType.SQS, store=store, max_workers=4)
    process_partial_response(sqs_event(*(sqs_record(f"m-{i}", i) for i in range(4))), handler, processor)
    config = IdempotencyConfig()
    assert {m: key for m, (key, _) in seen.items()} == {
        f"m-{i}": make_key({"messageId": f"m-{i}"}, config) for i in range(4)
    }
    assert len({thread for _, thread in seen.values()}) == 4
    assert current_idempotency_key() is None


def test_a_thread_the_body_starts_sees_the_key_when_it_copies_the_context():
    seen = []
    with IdempotencyGuard({"messageId": "m-1"}, store=InMemoryPersistenceLayer()) as guard:
        plain = threading.Thread(target=lambda: seen.append(current_idempotency_key()))
        copied = threading.Thread(
            target=contextvars.copy_context().run, args=(lambda: seen.append(current_idempotency_key()),)
        )
        for thread in (plain, copied):
            thread.start()
            thread.join()
    assert seen == [None, guard.key]


def test_concurrent_async_records_and_the_tasks_they_start_see_their_own_key():
    store, seen = InMemoryPersistenceLayer(), {}

    async def handler(record):
        await asyncio.sleep(0.01 * (3 - int(record.body)))  # finish in the reverse order of starting
        seen[record.message_id] = [current_idempotency_key()]
        seen[record.message_id].append(await asyncio.create_task(read_key_later()))

    async def read_key_later():
        await asyncio.sleep(0)
        return current_idempotency_key()

    processor = AsyncBatchProcessor(EventType.SQS, store=store, max_concurrency=3)
    event = sqs_event(*(sqs_record(f"m-{i}", i) for i in range(3)))
    assert async_process_partial_response(event, handler, processor) == {"batchItemFailures": []}
    config = IdempotencyConfig()
    assert seen == {f"m-{i}": [make_key({"messageId": f"m-{i}"}, config)] * 2 for i in range(3)}


def test_async_guards_nest_and_unwind_per_task():
    store = InMemoryPersistenceLayer()

    async def record(message_id):
        async with IdempotencyGuard({"messageId": message_id}, store=store) as guard:
            await asyncio.sleep(0)
            inner_config = IdempotencyConfig(event_key_jmespath="step", key_prefix=message_id)
            async with IdempotencyGuard({"step": 1}, store=store, config=inner_config) as inner:
                await asyncio.sleep(0)
                inside = current_idempotency_key() == inner.key
            await asyncio.sleep(0)
            return inside and current_idempotency_key() == guard.key

    async def main():
        return await asyncio.gather(*(record(f"m-{i}") for i in range(5))), current_idempotency_key()

    assert asyncio.run(main()) == ([True] * 5, None)
