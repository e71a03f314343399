"""Partial batch responses for ``async def`` record handlers: each record in its own guard, as an asyncio task."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, overload

from consumer._context import Invocation, system_clock
from consumer.batch._processor import _Batch, _Processor
from consumer.sources import RecordT
from persistence import as_async_store

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from consumer._context import Clock, LambdaContext
    from consumer.batch._event import BatchEvent, PartialBatchResponse
    from consumer.batch._report import OutcomeHook
    from consumer.batch._types import AsyncBatchOptions, RecordHandler
    from consumer.config import IdempotencyConfig
    from consumer.observability import Metrics
    from consumer.sources import (
        DynamoDBStreamRecord,
        DynamoDBStreamsEventType,
        EventType,
        KafkaEventType,
        KinesisEventType,
        KinesisRecord,
        Record,
        SQSEventType,
        SQSRecord,
    )
    from consumer.sources._kafka import KafkaRecord
    from persistence import AsyncPersistenceLayer, PersistenceLayer


#: Records run at once unless told otherwise: a whole default SQS batch.
DEFAULT_MAX_CONCURRENCY = 10


class AsyncBatchProcessor(_Processor[RecordT]):
    """:class:`~consumer.BatchProcessor` for ``async def`` record handlers: the same rules, records as tasks.

    Records run as asyncio tasks, at most ``max_concurrency`` at once; records sharing an ordering key (FIFO
    group, Kinesis partition key, DynamoDB item key, or the same record id) still run one after another, in
    batch order. Everything else is the sync processor's: the deadline margin, the FIFO and stream failure
    rules, ``stop_on_first_failure``, ``raise_on_entire_batch_failure``, the summary and its log line.

    The store is reached without blocking the event loop (:func:`persistence.as_async_store`): the in-memory
    store on the loop, a sync store such as DynamoDB or SQLite in a thread pool with a thread for each record
    that may run at once, a native async store awaited.

    ``summary`` and ``items`` are those of the calling task's last batch, or, read where no batch was processed
    (after ``asyncio.run``, which runs in a copy of the caller's context), of the latest batch this processor
    finished in the calling thread.

    One thing a thread pool cannot do: when only ``deadline_margin_ms`` is left before the Lambda deadline,
    the bodies still running are cancelled (``cancel_at_deadline``). Each releases its lock, is reported
    failed with a ``TimeoutError``, and the invocation returns its partial response instead of timing out.

    Like :class:`~consumer.BatchProcessor`, it is generic in its records (``AsyncBatchProcessor[SQSRecord]``).

    Examples:
        >>> import asyncio
        >>> from persistence import InMemoryPersistenceLayer
        >>> from consumer import EventType, async_process_partial_response
        >>> processor = AsyncBatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
        >>> async def charge(record):
        ...     await asyncio.sleep(0)  # a downstream call
        ...     return int(record.body)
        >>> event = {"Records": [{"messageId": "a", "body": "1"}, {"messageId": "b", "body": "oops"}]}
        >>> asyncio.run(async_process_partial_response(event, charge, processor))
        {'batchItemFailures': [{'itemIdentifier': 'b'}]}
    """

    @overload
    def __init__(
        self: AsyncBatchProcessor[SQSRecord],
        event_type: SQSEventType,
        *,
        store: PersistenceLayer | AsyncPersistenceLayer | None = None,
        **options: Unpack[AsyncBatchOptions],
    ) -> None: ...
    @overload
    def __init__(
        self: AsyncBatchProcessor[KinesisRecord],
        event_type: KinesisEventType,
        *,
        store: PersistenceLayer | AsyncPersistenceLayer | None = None,
        **options: Unpack[AsyncBatchOptions],
    ) -> None: ...
    @overload
    def __init__(
        self: AsyncBatchProcessor[DynamoDBStreamRecord],
        event_type: DynamoDBStreamsEventType,
        *,
        store: PersistenceLayer | AsyncPersistenceLayer | None = None,
        **options: Unpack[AsyncBatchOptions],
    ) -> None: ...
    @overload
    def __init__(
        self: AsyncBatchProcessor[KafkaRecord],
        event_type: KafkaEventType,
        *,
        store: PersistenceLayer | AsyncPersistenceLayer | None = None,
        **options: Unpack[AsyncBatchOptions],
    ) -> None: ...
    @overload
    def __init__(
        self: AsyncBatchProcessor[Record],
        event_type: EventType,
        *,
        store: PersistenceLayer | AsyncPersistenceLayer | None = None,
        **options: Unpack[AsyncBatchOptions],
    ) -> None: ...
    def __init__(
        self,
        event_type: EventType,
        *,
        store: PersistenceLayer | AsyncPersistenceLayer | None = None,
        config: IdempotencyConfig | None = None,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        deadline_margin_ms: int = 1000,
        cancel_at_deadline: bool = True,
        stop_on_first_failure: bool = False,
        skip_group_on_error: bool = False,
        raise_on_entire_batch_failure: bool = True,
        clock: Clock = system_clock,
        on_outcome: OutcomeHook | None = None,
        metrics: Metrics | bool | None = None,
    ) -> None:
        """Configure the processor; reuse it across invocations.

        Args:
            event_type: The source; ``EventType.SQS`` detects FIFO queues from the ARN.
            store: Where records live: a sync store (reached as :func:`persistence.as_async_store` says) or an
                async one. ``None``: as in :class:`~consumer.BatchProcessor` (only an ``@idempotent_function``
                record handler is guarded).
            config: Key selection and timings (by default the record's own id is the key).
            max_concurrency: Records that run at once (1: one after another, in batch order). A record meeting the
                lock of another record of its batch waits for it, then replays its result (or runs, if it failed).
            deadline_margin_ms: No record starts, or keeps running with ``cancel_at_deadline``, with less than
                this left before the Lambda deadline; it is reported failed instead.
            cancel_at_deadline: Cancel the bodies still running when the margin is reached (they release their
                locks). Without it they run on, as in the sync processor, and may meet the Lambda timeout.
            stop_on_first_failure: After any failure, report every record not yet started as failed.
            skip_group_on_error: SQS FIFO: after a failure, fail only the rest of that message group
                (default: the rest of the batch).
            raise_on_entire_batch_failure: Raise ``BatchProcessingError`` when every record failed.
            clock: Epoch seconds (also the metrics' timestamp).
            on_outcome: Called once per record, as in :class:`~consumer.BatchProcessor`: a plain function, called on
                the event loop (keep it quick), never awaited.
            metrics: CloudWatch EMF metrics, as in :class:`~consumer.BatchProcessor`.

        Raises:
            TypeError: ``on_outcome`` is not a plain function, or ``metrics`` is not one of its forms.
        """
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        super().__init__(
            event_type,
            store=store,
            config=config,
            workers=max_concurrency,
            deadline_margin_ms=deadline_margin_ms,
            stop_on_first_failure=stop_on_first_failure,
            skip_group_on_error=skip_group_on_error,
            raise_on_entire_batch_failure=raise_on_entire_batch_failure,
            clock=clock,
            on_outcome=on_outcome,
            metrics=metrics,
        )
        self.cancel_at_deadline = cancel_at_deadline
        self._store_reserved = False

    def _keep(self, batch: _Batch | None) -> None:
        super()._keep(batch)
        self._latest.batch = batch  # read by code outside the task that processed it (after asyncio.run)

    async def process(
        self, event: BatchEvent, record_handler: RecordHandler[RecordT], context: LambdaContext | None = None
    ) -> PartialBatchResponse:
        """Process one invocation's batch and return its partial batch response.

        The handler may be ``async def`` (awaited) or a plain ``def`` (run on the event loop).

        Raises:
            UnexpectedBatchTypeError: The event has no records (no ``Records`` list, or an empty one), or a
                record cannot be read or lacks its identifier.
            BatchProcessingError: Every record failed (unless ``raise_on_entire_batch_failure=False``).
            TypeError: ``record_handler`` is a generator or async generator function (nothing is run).
            asyncio.CancelledError: The invocation was cancelled; every record still running released its lock.
        """
        from consumer.batch._async_run import AsyncBatchRun  # noqa: PLC0415 - asyncio costs sync users 15+ ms

        started = time.perf_counter()
        settings, handler, guard_passing, items = self._start(event, record_handler, context, async_ok=True)
        if not self._store_reserved and settings.store is not None:  # a store thread per record that may run at once
            as_async_store(settings.store, max_threads=settings.max_workers)
            self._store_reserved = True
        run = AsyncBatchRun(settings, handler, guard_passing, context, items)
        run.cancel_at_deadline = self.cancel_at_deadline
        with Invocation(context):
            try:
                await run.arun()
            except BaseException as e:  # asyncio.CancelledError included; the batch comes back whole
                stopped_by = run.propagating(e)  # a record's KeyboardInterrupt, not the cancellation it caused
                self._report(settings, guard_passing, items, started, context, any_failed=True, interrupted=stopped_by)
                raise
        return self._finish(settings, guard_passing, items, started, context)


async def async_process_partial_response(
    event: BatchEvent,
    record_handler: RecordHandler[RecordT],
    processor: AsyncBatchProcessor[RecordT],
    context: LambdaContext | None = None,
) -> PartialBatchResponse:
    """Process ``event`` with ``processor`` and return ``{"batchItemFailures": [...]}`` for Lambda.

    From a sync Lambda handler, run it with ``asyncio.run``:

    Examples:
        >>> import asyncio
        >>> from persistence import InMemoryPersistenceLayer
        >>> from consumer import EventType
        >>> processor = AsyncBatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
        >>> async def record_handler(record):
        ...     return record.body
        >>> def handler(event, context):
        ...     return asyncio.run(async_process_partial_response(event, record_handler, processor, context))
        >>> handler({"Records": [{"messageId": "a", "body": "{}"}]}, None)
        {'batchItemFailures': []}
    """
    return await processor.process(event, record_handler, context)
