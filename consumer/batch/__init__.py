"""Partial batch responses: each record of an SQS, Kinesis, DynamoDB Streams or Kafka batch in its own guard.

The batch wing owns the processors (this module, and the async one in ``_async_batch``), the run over one batch
(scheduling, ordering, failure propagation, the deadline: ``_run``, ``_async_run``), records of one batch sharing
a key (``_holders``), the event and the response (``_event``), the summary, made when first read (``_summary``), the
report once the batch ran (``_report``), a record parsed into the processor's ``model`` (``_record_model``) and
Powertools' older decorators (``_decorators``).
It may import the core, ``persistence``, and the public faces of the sources wing (records, ids, ordering keys)
and the observability wing (outcomes, logs, metrics). No wing imports it: only ``consumer``'s public face does.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, overload

from consumer._context import Invocation
from consumer._errors import BatchEventError, BatchProcessingError, UnexpectedBatchTypeError
from consumer.batch._event import BatchEvent, BatchItemFailure, PartialBatchResponse
from consumer.batch._processor import _Call, _Processor
from consumer.batch._run import BatchRun
from consumer.sources import (
    EventType,
    RecordT,
)
from persistence import is_async_store
from persistence._shadowing import imported_on_first_use

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    from typing_extensions import Unpack

    from consumer._context import LambdaContext
    from consumer.batch._processor import _Batch
    from consumer.batch._summary import BatchSummary
    from consumer.batch._types import BatchOptions, RecordHandler
    from consumer.sources import (
        DynamoDBStreamRecord,
        DynamoDBStreamsEventType,
        KafkaEventType,
        KinesisEventType,
        KinesisRecord,
        Record,
        SQSEventType,
        SQSRecord,
    )
    from consumer.sources._kafka import KafkaRecord
    from persistence import PersistenceLayer

#: Made when first used (PEP 562): a batch that succeeded with INFO logs off never reads its summary.
__getattr__, __dir__ = imported_on_first_use(globals(), {"BatchSummary": "consumer.batch._summary"})

__all__ = [  # the types of _batch_event are part of this module's API, as they were defined here
    "BatchEvent",
    "BatchEventError",
    "BatchItemFailure",
    "BatchProcessingError",
    "BatchProcessor",
    "BatchSummary",
    "PartialBatchResponse",
    "SqsFifoPartialProcessor",
    "UnexpectedBatchTypeError",
    "process_partial_response",
]


class BatchProcessor(_Processor[RecordT]):
    """Runs each record of a batch inside its own :class:`IdempotencyGuard` and reports the failures.

    A duplicate (``AlreadyProcessed`` from the record's own guard) counts as success. Any other exception,
    a live lock held by another invocation included, makes that record a batch item failure. The record
    handler takes the typed record, and the guard (for ``guard.key``) when it asks for it: a parameter
    named ``guard``, or a second positional parameter without a default; a parameter named ``lambda_context``
    gets the invocation's context, as in Powertools.

    An ``@idempotent_function`` record handler (Powertools' pattern) runs in its own guard only: the processor
    passes the record by the function's ``data_keyword_argument`` and keys, stores and configures the record's
    lock as the function says (its store, config and key prefix), instead of guarding it a second time with its
    own; a duplicate still counts as replayed. Without a ``store``, such a handler is guarded as usual, and any
    other handler runs its records without idempotency (as Powertools' ``BatchProcessor`` does; one warning).

    One processor may serve several threads at once: ``process`` keeps its state in the call, and
    ``summary`` / ``items`` are those of the last batch processed by the calling thread (or task).
    For ``async def`` record handlers, use :class:`~consumer.AsyncBatchProcessor`.

    The processor is generic in its records: ``BatchProcessor(EventType.SQS, ...)`` is a
    ``BatchProcessor[SQSRecord]`` to a type checker, which then refuses a handler of ``KinesisRecord``.

    Examples:
        >>> from persistence import InMemoryPersistenceLayer
        >>> processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
        >>> event = {"Records": [{"messageId": "a", "body": "1"}, {"messageId": "b", "body": "oops"}]}
        >>> process_partial_response(event, lambda record: int(record.body), processor)
        {'batchItemFailures': [{'itemIdentifier': 'b'}]}
        >>> processor.summary.processed, processor.summary.failed
        (1, 1)
    """

    @overload
    def __init__(
        self: BatchProcessor[Any],
        event_type: EventType,
        *,
        model: type[Any],
        store: PersistenceLayer | None = None,
        **options: Unpack[BatchOptions],
    ) -> None: ...
    @overload
    def __init__(
        self: BatchProcessor[SQSRecord],
        event_type: SQSEventType,
        *,
        store: PersistenceLayer | None = None,
        **options: Unpack[BatchOptions],
    ) -> None: ...
    @overload
    def __init__(
        self: BatchProcessor[KinesisRecord],
        event_type: KinesisEventType,
        *,
        store: PersistenceLayer | None = None,
        **options: Unpack[BatchOptions],
    ) -> None: ...
    @overload
    def __init__(
        self: BatchProcessor[DynamoDBStreamRecord],
        event_type: DynamoDBStreamsEventType,
        *,
        store: PersistenceLayer | None = None,
        **options: Unpack[BatchOptions],
    ) -> None: ...
    @overload
    def __init__(
        self: BatchProcessor[KafkaRecord],
        event_type: KafkaEventType,
        *,
        store: PersistenceLayer | None = None,
        **options: Unpack[BatchOptions],
    ) -> None: ...
    @overload
    def __init__(
        self: BatchProcessor[Record],
        event_type: EventType,
        *,
        store: PersistenceLayer | None = None,
        **options: Unpack[BatchOptions],
    ) -> None: ...
    def __init__(self, event_type: EventType, *, max_workers: int = 1, **options: Any) -> None:
        """Configure the processor; reuse it across invocations.

        Args:
            event_type: The source; ``EventType.SQS`` detects FIFO queues from the ARN.
            max_workers: Records run in a thread pool of this size; records sharing an ordering key (FIFO
                group, Kinesis partition key, DynamoDB item key, Kafka topic-partition) still run one after another,
                in order. A record meeting the lock of another record of its batch waits for it, then replays.
            **options: The keyword arguments below, which :class:`~consumer.AsyncBatchProcessor` takes too.

        Keyword Args:
            store: Where records live. ``None``: only an ``@idempotent_function`` record handler is guarded (by
                its own store); other handlers run without idempotency, as in Powertools.
            config: Key selection and timings (by default the record's own id is the key).
            deadline_margin_ms: A record is not started with less than this left before the Lambda
                deadline; it is reported failed instead, so the invocation returns rather than times out.
            stop_on_first_failure: After any failure, report every record not yet started as failed.
            skip_group_on_error: SQS FIFO: after a failure, fail only the rest of that message group
                (default: the rest of the batch).
            raise_on_entire_batch_failure: Raise ``BatchProcessingError`` when every record failed.
            clock: Epoch seconds (also the metrics' timestamp).
            on_outcome: Called once per record, in batch order, with its :class:`~consumer.Item` (outcome, error,
                key), after every record ran and before the response is returned. What it raises is logged and
                changes no outcome; a ``BaseException`` (``KeyboardInterrupt``) fails the invocation.
            metrics: CloudWatch EMF metrics, one JSON line on stdout per invocation
                (:mod:`consumer.observability.metrics`): ``True`` or a :class:`~consumer.Metrics`; ``None`` reads
                ``IDEMPOTENCY_METRICS``; ``False`` is off.
            model: A Pydantic model class (Powertools' parser models, ``SqsRecordModel`` ..., or your own): the
                handler gets each record parsed into it. The key is still selected from the record as delivered.
                A record that does not fit fails alone with :class:`~consumer.RecordModelError` (naming the record
                and its fields, quoting no value); one that completed before replays without being parsed.

        Raises:
            TypeError: ``on_outcome`` is not a plain function, ``metrics`` is not one of its forms, or ``model`` is
                not a Pydantic model class.
        """
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        if is_async_store(options.get("store")):
            raise TypeError(f"{type(options['store']).__name__} is an async store: use AsyncBatchProcessor")
        super().__init__(event_type, workers=max_workers, **options)
        self._pool: ThreadPoolExecutor | None = None  # made on first use, kept for warm invocations
        self._pool_lock = threading.Lock()

    @overload
    def process(self) -> list[tuple[str, Any, Any]]: ...
    @overload
    def process(
        self, event: BatchEvent, record_handler: RecordHandler[RecordT], context: LambdaContext | None = None
    ) -> PartialBatchResponse: ...
    def process(
        self,
        event: BatchEvent | None = None,
        record_handler: RecordHandler[RecordT] | None = None,
        context: LambdaContext | None = None,
    ) -> PartialBatchResponse | list[tuple[str, Any, Any]]:
        """Process one invocation's batch and return its partial batch response.

        Without arguments, inside ``with processor(records, record_handler, lambda_context=context):`` (Powertools'
        older form), process those records the same way and return Powertools' list of outcomes
        (``("success", result, record)`` / ``("fail", "<type>:<error>", record)``); ``processor.response()`` then
        gives the response, and the end of the block raises ``BatchProcessingError`` if every record failed.

        Raises:
            UnexpectedBatchTypeError: The event has no records (no ``Records`` list, or an empty one), or a
                record cannot be read or lacks its identifier.
            BatchProcessingError: Every record failed (unless ``raise_on_entire_batch_failure=False``).
            TypeError: ``record_handler`` is ``async def`` or a generator function (nothing is run).
        """
        if record_handler is not None:
            return self._run(_Call(record_handler, context), event).respond()
        call = self._block_call(event)
        call.batch = self._run(call, None)
        return call.batch.outcomes()

    def _run(self, call: _Call, event: BatchEvent | None) -> _Batch:
        run, started = self._start(call, event, BatchRun, async_ok=False)
        if self._settings.max_workers > 1:  # one worker: the records run in this thread, no pool
            run.pool = self._workers()
        invocation = Invocation(run.context)  # closed below, not by a `with` block: two calls fewer per invocation
        try:
            run.run()
        except BaseException as e:  # reported as far as it got; the batch comes back whole
            self._report(run, started, any_failed=True, interrupted=e)
            raise
        finally:
            invocation.close()
        return self._finish(run, started)

    def _workers(self) -> ThreadPoolExecutor:
        if self._pool is None:
            with self._pool_lock:
                if self._pool is None:
                    # concurrent.futures loads with the first pool: a processor of one worker never needs it.
                    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

                    self._pool = ThreadPoolExecutor(
                        self._settings.max_workers, thread_name_prefix="idempotent-consumer"
                    )
        return self._pool


class SqsFifoPartialProcessor(BatchProcessor["SQSRecord"]):
    """Powertools' name for a FIFO queue's processor: ``BatchProcessor(EventType.SQS_FIFO, ...)``.

    ``BatchProcessor(EventType.SQS)`` detects a FIFO queue by itself (from the ``.fifo`` ARN); this class exists so
    that code written for Powertools runs as it is. After a failure, the rest of the batch fails, or with
    ``skip_group_on_error=True`` the rest of that message group.
    """

    def __init__(self, skip_group_on_error: bool = False, **options: Any) -> None:
        """Configure the processor.

        Args:
            skip_group_on_error: After a failure, fail only the rest of that message group.
            **options: Any other :class:`BatchProcessor` option (``store``, ``config``, ``max_workers``...).
        """
        super().__init__(EventType.SQS_FIFO, skip_group_on_error=skip_group_on_error, **options)


def process_partial_response(
    event: BatchEvent,
    record_handler: RecordHandler[RecordT],
    processor: BatchProcessor[RecordT],
    context: LambdaContext | None = None,
) -> PartialBatchResponse:
    """Process ``event`` with ``processor`` and return ``{"batchItemFailures": [...]}`` for Lambda.

    Examples:
        >>> from persistence import InMemoryPersistenceLayer
        >>> processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
        >>> process_partial_response({"Records": [{"messageId": "a", "body": "{}"}]}, lambda r: None, processor)
        {'batchItemFailures': []}
    """
    return processor.process(event, record_handler, context)
