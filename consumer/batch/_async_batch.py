"""Partial batch responses for ``async def`` record handlers: each record in its own guard, as an asyncio task."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TypeVar, overload

from consumer._context import Invocation
from consumer.batch._processor import _Call, _Processor
from consumer.sources import RecordT
from persistence import as_async_store

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from typing_extensions import Unpack

    from consumer._context import LambdaContext
    from consumer.batch._event import BatchEvent, PartialBatchResponse
    from consumer.batch._processor import _Batch
    from consumer.batch._types import AsyncBatchOptions, RecordHandler
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


T = TypeVar("T")

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
        >>> async_process_partial_response(event, charge, processor)  # from sync code; `await` it in a coroutine
        {'batchItemFailures': [{'itemIdentifier': 'b'}]}
    """

    @overload
    def __init__(
        self: AsyncBatchProcessor[Any],
        event_type: EventType,
        *,
        model: type[Any],
        store: PersistenceLayer | AsyncPersistenceLayer | None = None,
        **options: Unpack[AsyncBatchOptions],
    ) -> None: ...
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
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        cancel_at_deadline: bool = True,
        **options: Any,
    ) -> None:
        """Configure the processor; reuse it across invocations.

        Args:
            event_type: The source; ``EventType.SQS`` detects FIFO queues from the ARN.
            max_concurrency: Records that run at once (1: one after another, in batch order). A record meeting the
                lock of another record of its batch waits for it, then replays its result (or runs, if it failed).
            cancel_at_deadline: Cancel the bodies still running when the margin is reached (they release their
                locks). Without it they run on, as in the sync processor, and may meet the Lambda timeout.
            **options: The keyword arguments below, those of :class:`~consumer.BatchProcessor`.

        Keyword Args:
            store: Where records live: a sync store (reached as :func:`persistence.as_async_store` says) or an
                async one. ``None``: as in :class:`~consumer.BatchProcessor` (only an ``@idempotent_function``
                record handler is guarded).
            config: Key selection and timings (by default the record's own id is the key).
            deadline_margin_ms: No record starts, or keeps running with ``cancel_at_deadline``, with less than
                this left before the Lambda deadline; it is reported failed instead.
            stop_on_first_failure: After any failure, report every record not yet started as failed.
            skip_group_on_error: SQS FIFO: after a failure, fail only the rest of that message group
                (default: the rest of the batch).
            raise_on_entire_batch_failure: Raise ``BatchProcessingError`` when every record failed.
            clock: Epoch seconds (also the metrics' timestamp).
            on_outcome: Called once per record, as in :class:`~consumer.BatchProcessor`: a plain function, called on
                the event loop (keep it quick), never awaited.
            metrics: CloudWatch EMF metrics, as in :class:`~consumer.BatchProcessor`.
            model: A Pydantic model class the handler gets each record parsed into, as in
                :class:`~consumer.BatchProcessor`.

        Raises:
            TypeError: ``on_outcome`` is not a plain function, ``metrics`` is not one of its forms, or ``model`` is
                not a Pydantic model class.
        """
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        super().__init__(event_type, workers=max_concurrency, **options)
        self.cancel_at_deadline = cancel_at_deadline
        self._store_reserved = False

    def _keep(self, batch: _Batch | None) -> None:
        super()._keep(batch)
        self._latest.batch = batch  # read by code outside the task that processed it (after asyncio.run)

    def _last_batch(self) -> _Batch | None:
        """In a task, its own last batch; in sync code, the last one a run on this thread kept.

        ``asyncio.run`` processes in a copy of the caller's context: sync code reads the thread's latest, never a
        batch an earlier call left in its own context.
        """
        return self._last.get(None) if loop_running() else getattr(self._latest, "batch", None)

    @overload
    async def process(self) -> list[tuple[str, Any, Any]]: ...
    @overload
    async def process(
        self, event: BatchEvent, record_handler: RecordHandler[RecordT], context: LambdaContext | None = None
    ) -> PartialBatchResponse: ...
    async def process(
        self,
        event: BatchEvent | None = None,
        record_handler: RecordHandler[RecordT] | None = None,
        context: LambdaContext | None = None,
    ) -> PartialBatchResponse | list[tuple[str, Any, Any]]:
        """Process one invocation's batch and return its partial batch response.

        The handler may be ``async def`` (awaited) or a plain ``def`` (run on the event loop). Without arguments,
        inside ``with processor(records, record_handler):``, as :meth:`BatchProcessor.process` (and
        :meth:`async_process`, Powertools' name, which a sync caller need not await).

        Raises:
            UnexpectedBatchTypeError: The event has no records (no ``Records`` list, or an empty one), or a
                record cannot be read or lacks its identifier.
            BatchProcessingError: Every record failed (unless ``raise_on_entire_batch_failure=False``).
            TypeError: ``record_handler`` is a generator or async generator function (nothing is run).
            asyncio.CancelledError: The invocation was cancelled; every record still running released its lock.
        """
        if record_handler is not None:
            return (await self._run(_Call(record_handler, context), event)).respond()
        call = self._block_call(event)
        call.batch = await self._run(call, None)
        return call.batch.outcomes()

    def async_process(self) -> list[tuple[str, Any, Any]]:
        """Powertools' name: :meth:`process` of ``with processor(records, record_handler):``, run to its end.

        Called where no event loop runs (a Lambda handler), it runs the records on a new loop and returns the
        outcomes; in a coroutine (an event loop running in this thread), it returns an awaitable of them.

        Raises:
            RuntimeError: Called by a plain ``def`` in a running event loop (nothing is run): see
                :func:`async_process_partial_response`.
        """
        return self._run_here(self.process, "async_process()", sys._getframe(1))  # noqa: SLF001 - the caller's frame

    def _run_here(self, process: Callable[[], Coroutine[Any, Any, T]], face: str, caller: object) -> T:
        """``process()`` run to its end on a new event loop, where this thread runs none; else its coroutine, which
        ``caller`` (a coroutine's frame, or an ``async def``) awaits.

        Safe because it turns on the calling thread alone: without a running loop nothing in this thread could
        await the call, and a sync caller needs the result; with one, running it here would block that loop
        (``asyncio.run`` refuses), and the caller awaits it. Either way the records run through the same run.

        Raises:
            RuntimeError: ``caller`` is a plain ``def`` called in a running event loop: nothing awaits what it would
                get (the batch's outcome would be dropped unseen), and the batch cannot be run to its end there
                without blocking the loop. Nothing is run.
        """  # noqa: D205 - one sentence
        import asyncio  # noqa: PLC0415 - asyncio costs sync users 15+ ms
        import inspect  # noqa: PLC0415 - loaded by asyncio already

        if not loop_running():
            return asyncio.run(process())
        code = getattr(caller, "f_code", None) or getattr(caller, "__code__", None)
        awaiting = inspect.CO_COROUTINE | inspect.CO_ITERABLE_COROUTINE | inspect.CO_ASYNC_GENERATOR
        if code is None or not code.co_flags & awaiting:
            name = getattr(code, "co_qualname", getattr(code, "co_name", caller))
            await_it = "" if face.startswith("@") else f" and await {face}"  # a decorator awaits for its handler
            msg = (
                f"{name!r} is a plain def called in a running event loop: {face} cannot run its batch there without "
                f"blocking the loop; make it async def{await_it} (nothing was processed)"
            )
            raise RuntimeError(msg)
        return process()  # type: ignore[return-value]  # awaited by the coroutine that called us

    async def _run(self, call: _Call, event: BatchEvent | None) -> _Batch:
        from consumer.batch._async_run import AsyncBatchRun  # noqa: PLC0415 - asyncio costs sync users 15+ ms

        run, started = self._start(call, event, AsyncBatchRun, async_ok=True)
        run.cancel_at_deadline = self.cancel_at_deadline
        store = run.settings.store
        if not self._store_reserved and store is not None:  # a store thread per record that may run at once
            as_async_store(store, max_threads=run.settings.max_workers)
            self._store_reserved = True
        with Invocation(run.context):
            try:
                await run.arun()
            except BaseException as e:  # asyncio.CancelledError included; the batch comes back whole
                stopped_by = run.propagating(e)  # a record's KeyboardInterrupt, not the cancellation it caused
                self._report(run, started, any_failed=True, interrupted=stopped_by)
                raise
        return self._finish(run, started)


def loop_running() -> bool:
    """Whether an event loop runs in the calling thread (a coroutine called us, directly or through sync code)."""
    import asyncio  # noqa: PLC0415 - asyncio costs sync users 15+ ms

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def async_process_partial_response(
    event: BatchEvent,
    record_handler: RecordHandler[RecordT],
    processor: AsyncBatchProcessor[RecordT],
    context: LambdaContext | None = None,
) -> PartialBatchResponse:
    """Process ``event`` with ``processor`` and return ``{"batchItemFailures": [...]}`` for Lambda.

    Called from a sync Lambda handler (no event loop running in the thread), it runs the batch on a new event loop
    and returns the response, as Powertools documents it. Called in a coroutine (an event loop running in the
    thread), it returns an awaitable instead: ``await async_process_partial_response(...)``. Type checkers know the
    first form; in async code, ``await processor.process(event, record_handler, context)`` is typed as awaited.

    Raises:
        RuntimeError: Called by a plain ``def`` in a running event loop, as ``@async_batch_processor`` refuses it:
            nothing there would await the batch (its outcome would be dropped unseen), and it cannot be run to its
            end without blocking the loop. Make the caller ``async def`` and await the call. Nothing is run.

    Examples:
        >>> from persistence import InMemoryPersistenceLayer
        >>> from consumer import EventType
        >>> processor = AsyncBatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
        >>> async def record_handler(record):
        ...     return record.body
        >>> def handler(event, context):
        ...     return async_process_partial_response(event, record_handler, processor, context)
        >>> handler({"Records": [{"messageId": "a", "body": "{}"}]}, None)
        {'batchItemFailures': []}
    """
    if not isinstance(processor, AsyncBatchProcessor):
        msg = f"async_process_partial_response takes an AsyncBatchProcessor, got {type(processor).__name__}"
        raise TypeError(msg)
    return processor._run_here(  # noqa: SLF001 - one module
        lambda: processor.process(event, record_handler, context),
        "async_process_partial_response(...)",
        sys._getframe(1),  # noqa: SLF001 - the caller's frame: a coroutine awaits the call, a plain def cannot
    )
