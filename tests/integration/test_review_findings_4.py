"""Findings of a review of the per-record fast path (store type's face looked up once, records built through a
draft, the IN_PROGRESS record built by position, ``__exit__`` trusting the store is sync): each a test of the
promise that every record ends committed after its body ran once, reported in batchItemFailures (or raised), or
replayed from a committed record. Each test names the ending it defends.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import warnings

import pytest

from consumer import (
    AlreadyProcessed,
    AsyncBatchProcessor,
    BatchProcessor,
    EventType,
    IdempotencyAlreadyInProgressError,
    IdempotencyConfig,
    IdempotencyGuard,
    async_process_partial_response,
    process_partial_response,
)
from consumer._context import register_invocation_context
from consumer.config import function_config
from persistence import InMemoryPersistenceLayer, RecordStatus, as_async_store

# -- a guard given the async face of an in-memory store: `async with` left the record IN_PROGRESS ------------------


def _only_record(memory: InMemoryPersistenceLayer):
    records = list(memory.scan())
    assert len(records) == 1
    return records[0]


def test_async_with_on_the_in_memory_stores_async_face_commits():
    # as_async_store(memory) is an InlineStore: __aenter__ took the lock through its sync store, then __aexit__
    # handed the exit to __exit__, which (no longer checking the store is sync) called the adapter's async complete
    # and dropped the coroutine: the body ran, the guard exited as if committed, and the record stayed IN_PROGRESS
    # (a "coroutine was never awaited" warning the only trace): none of the three endings. Ending 1, then 3.
    memory = InMemoryPersistenceLayer()
    store = as_async_store(memory)
    config = IdempotencyConfig(event_key_jmespath="id")
    ran = []

    async def run() -> None:
        guard = IdempotencyGuard({"id": "o-1"}, store=store, config=config)
        async with guard:
            ran.append(1)
            guard.result = {"charged": 30}

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a dropped coroutine fails the test, not just logs
        asyncio.run(run())
        gc.collect()
    assert _only_record(memory).status is RecordStatus.COMPLETE

    async def again() -> None:
        async with IdempotencyGuard({"id": "o-1"}, store=store, config=config):
            ran.append(2)  # pragma: no cover - a replay: the body must not run

    with pytest.raises(AlreadyProcessed) as replayed:
        asyncio.run(again())
    assert replayed.value.response == {"charged": 30}
    assert ran == [1]


def test_async_with_on_the_in_memory_stores_async_face_releases_when_the_body_raises():
    # The same exit, by the release: the body raised, the lock must be let go at once (ending 2), not left held.
    memory = InMemoryPersistenceLayer()
    store = as_async_store(memory)

    async def run() -> None:
        async with IdempotencyGuard({"id": "o-1"}, store=store, config=IdempotencyConfig(event_key_jmespath="id")):
            raise ValueError("declined")

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ValueError, match="declined"):
            asyncio.run(run())
        gc.collect()
    assert list(memory.scan()) == []  # released: nothing left behind


def test_async_batch_processor_on_the_in_memory_stores_async_face_commits_each_record():
    # An AsyncBatchProcessor given the shared async face of its store (as_async_store, as a guard elsewhere uses):
    # each record must commit (ending 1) and its redelivery replay (ending 3), not run again.
    memory = InMemoryPersistenceLayer()
    processor = AsyncBatchProcessor(EventType.SQS, store=as_async_store(memory))
    ran = []

    async def handler(record):
        ran.append(record.message_id)
        return {"done": record.message_id}

    event = {"Records": [{"messageId": "m-1", "body": "{}"}, {"messageId": "m-2", "body": "{}"}]}
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert async_process_partial_response(event, handler, processor) == {"batchItemFailures": []}
        gc.collect()
    assert sorted(r.status.value for r in memory.scan()) == ["COMPLETE", "COMPLETE"]
    assert async_process_partial_response(event, handler, processor) == {"batchItemFailures": []}
    assert ran == ["m-1", "m-2"]


# -- a batch run without a context: its records took their lock deadline from a context registered elsewhere ------


class _Context:
    """A Lambda context whose remaining time is fixed."""

    def __init__(self, remaining_ms: int) -> None:
        self.remaining_ms = remaining_ms
        self.aws_request_id = "an-earlier-invocation"
        self.function_name = "f"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def test_a_batch_without_a_context_does_not_take_a_registered_contexts_deadline_and_lose_its_lock():
    # A context registered Powertools' way (config.register_lambda_context) by an earlier invocation of a warm
    # container, with 1 s of its own left; this invocation calls the processor without its context. "A batch uses its
    # own context for the length of its call" (IdempotencyConfig.register_lambda_context): with none, the lock lasts
    # lock_timeout_seconds (60 s). The records' guards resolved their context once per batch, before the batch
    # registered its own (none), and so took the earlier invocation's deadline: a lock of 2 s, taken over by a
    # redelivery 5 s into a body that still ran. The body ran twice: none of the three endings. Ending 1, once.
    now = 1_800_000_000.0
    memory = InMemoryPersistenceLayer()
    processor = BatchProcessor(EventType.SQS, store=memory, clock=lambda: now)
    ran = []

    def handler(record):
        ran.append("batch")
        # The same message delivered again to another invocation, 5 s later, while this body still runs.
        rival = IdempotencyGuard(record.raw_event, store=memory, config=function_config(), clock=lambda: now + 5)
        with contextlib.suppress(IdempotencyAlreadyInProgressError), rival:
            ran.append("rival")
            rival.result = "rival"
        return "done"

    IdempotencyConfig().register_lambda_context(_Context(remaining_ms=1_000))
    try:
        response = process_partial_response({"Records": [{"messageId": "m-1", "body": "{}"}]}, handler, processor)
    finally:
        register_invocation_context(None)
    assert ran == ["batch"]
    assert response == {"batchItemFailures": []}
    assert [record.status for record in memory.scan()] == [RecordStatus.COMPLETE]
