"""Partial batch responses: each record of an SQS, Kinesis, DynamoDB Streams or Kafka batch in its own guard."""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, overload

from consumer._batch_event import (
    BatchEvent,
    BatchEventError,
    BatchItemFailure,
    BatchProcessingError,
    BatchSummary,
    PartialBatchResponse,
    parse,
    records_of,
    summarize,
)
from consumer._batch_run import BatchRun, Item, RunSettings
from consumer._context import Invocation, system_clock
from consumer._handlers import LAMBDA_CONTEXT, OWN, handler_shape, refuse_dropped_cutover
from consumer._report import Reporter, check_hook
from consumer.event_sources import (
    EventType,
    RecordT,
    failure_identifier,
    resolve_event_type,
)
from consumer.metrics import resolve
from persistence import is_async_store

if TYPE_CHECKING:
    from collections.abc import Callable

    from typing_extensions import Unpack

    from consumer._batch_types import BatchOptions, RecordHandler
    from consumer._context import Clock, LambdaContext
    from consumer._kafka import KafkaRecord
    from consumer._report import OutcomeHook
    from consumer.config import IdempotencyConfig
    from consumer.event_sources import (
        DynamoDBStreamRecord,
        DynamoDBStreamsEventType,
        KafkaEventType,
        KinesisEventType,
        KinesisRecord,
        Record,
        SQSEventType,
        SQSRecord,
    )
    from consumer.metrics import Metrics
    from persistence import AsyncPersistenceLayer, PersistenceLayer

__all__ = [  # the types of _batch_event are part of this module's API, as they were defined here
    "BatchEvent",
    "BatchEventError",
    "BatchItemFailure",
    "BatchProcessingError",
    "BatchProcessor",
    "BatchSummary",
    "PartialBatchResponse",
    "SqsFifoPartialProcessor",
    "process_partial_response",
]

logger = logging.getLogger("idempotent_consumer")
_NO_HEADERS = (EventType.KINESIS, EventType.DYNAMODB_STREAMS)  # sources whose records have no header to key on


@dataclass(frozen=True, slots=True)
class _Batch:
    items: list[Item]
    summary: BatchSummary


class _Processor(Generic[RecordT]):
    """What both processors share: settings, the per-call summary, parsing the event and building the response."""

    def __init__(
        self,
        event_type: EventType,
        *,
        store: PersistenceLayer | AsyncPersistenceLayer | None,
        config: IdempotencyConfig | None,
        workers: int,
        deadline_margin_ms: int,
        stop_on_first_failure: bool,
        skip_group_on_error: bool,
        raise_on_entire_batch_failure: bool,
        clock: Clock,
        on_outcome: OutcomeHook | None,
        metrics: Metrics | bool | None,
    ) -> None:
        if deadline_margin_ms < 0:
            raise ValueError(f"deadline_margin_ms must not be negative, got {deadline_margin_ms}")
        if config is not None and config.key_header is not None and event_type in _NO_HEADERS:
            msg = f"key_header: {event_type.value} records carry no headers; select the key with event_key_jmespath"
            raise ValueError(msg)
        self.event_type = event_type
        self.raise_on_entire_batch_failure = raise_on_entire_batch_failure
        self._settings = RunSettings(
            event_type,
            store,
            config,
            clock,
            workers,
            deadline_margin_ms,
            stop_on_first_failure,
            skip_group_on_error,
        )
        self._reporter = Reporter(check_hook(on_outcome), resolve(metrics))
        self._last: contextvars.ContextVar[_Batch | None] = contextvars.ContextVar(
            f"idempotent_consumer_batch_{id(self)}"
        )
        # Where no batch was processed in the reader's own context: the async processor keeps its thread's latest
        # here, since asyncio.run() processes in a copy of the caller's context; the sync one never sets it.
        self._latest = threading.local()
        self._warned_unguarded = False

    @property
    def summary(self) -> BatchSummary | None:
        """What the last batch processed by this thread (or task) did; ``None`` before the first."""
        last = self._last.get(getattr(self._latest, "batch", None))
        return None if last is None else last.summary

    @property
    def items(self) -> list[Item]:
        """The records of the last batch processed by this thread (or task), with their outcomes."""
        last = self._last.get(getattr(self._latest, "batch", None))
        return [] if last is None else last.items

    @property
    def success_messages(self) -> list[Any]:
        """Powertools' name: the records of the last batch that succeeded (ran, or replayed), as delivered."""
        return [item.raw for item in self.items if item.outcome is not None and item.outcome.succeeded]

    @property
    def fail_messages(self) -> list[Any]:
        """Powertools' name: the typed records of the last batch that were reported in ``batchItemFailures``."""
        return [item.record for item in self.items if item.outcome is None or not item.outcome.succeeded]

    def _keep(self, batch: _Batch | None) -> None:
        self._last.set(batch)

    def _start(
        self,
        event: BatchEvent,
        record_handler: Callable[..., Any],
        context: LambdaContext | None,
        *,
        async_ok: bool,
    ) -> tuple[RunSettings, Callable[..., Any], str, list[Item]]:
        """Check the handler and parse the event: the run's settings, the handler to call, how it gets the guard,
        and the items.

        A handler with a ``lambda_context`` parameter is given the context by it, as Powertools' processor does.
        """  # noqa: D205 - one sentence
        self._keep(None)  # an invocation that raises leaves no summary of an earlier batch behind
        shape = handler_shape(record_handler, async_ok=async_ok)
        if shape.guard_passing == OWN:
            refuse_dropped_cutover(self._settings.config, record_handler)
        if self._settings.store is None and shape.guard_passing != OWN and not self._warned_unguarded:
            self._warned_unguarded = True
            logger.warning(
                "%s has no store and its record handler is not an @idempotent_function: records run without "
                "idempotency (at least once), as in Powertools' BatchProcessor; pass store= to guard each record",
                type(self).__name__,
            )
        if shape.lambda_context and shape.guard_passing != OWN:
            record_handler = functools.partial(record_handler, **{LAMBDA_CONTEXT: context})
        raws = records_of(event, self.event_type)
        event_type = resolve_event_type(self.event_type, raws)
        items = parse(event_type, raws)
        settings = dataclasses.replace(self._settings, event_type=event_type)
        return settings, record_handler, shape.guard_passing, items

    def _report(
        self,
        settings: RunSettings,
        guard_passing: str,
        items: list[Item],
        started: float,
        context: LambdaContext | None,
        *,
        any_failed: bool,
        interrupted: BaseException | None = None,
    ) -> None:
        """Keep the summary (``processor.summary``) and report it: logs, metrics, the outcome hook."""
        summary = summarize(settings.event_type, items, (time.perf_counter() - started) * 1000)
        self._keep(_Batch(items, summary))
        by_design = settings.store is None and guard_passing != OWN  # warned once when the processor first ran
        self._reporter.report(
            settings,
            items,
            summary,
            context,
            any_failed=any_failed,
            unguarded_by_design=by_design,
            interrupted=interrupted,
        )

    def _finish(
        self,
        settings: RunSettings,
        guard_passing: str,
        items: list[Item],
        started: float,
        context: LambdaContext | None,
    ) -> PartialBatchResponse:
        """Build the partial batch response, keep and report the summary, raise if every record failed."""
        failures = [i for i in items if i.outcome is None or not i.outcome.succeeded]
        response: PartialBatchResponse = {
            "batchItemFailures": [{"itemIdentifier": failure_identifier(i.record, i.item_id)} for i in failures]
        }
        self._report(settings, guard_passing, items, started, context, any_failed=bool(failures))
        if failures and len(failures) == len(items) and self.raise_on_entire_batch_failure:
            errors = [(i.item_id, i.error or RuntimeError(f"not run: {i.outcome}")) for i in failures]
            raise BatchProcessingError(errors, response)
        return response


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

    Example:
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
    def __init__(
        self,
        event_type: EventType,
        *,
        store: PersistenceLayer | None = None,
        config: IdempotencyConfig | None = None,
        max_workers: int = 1,
        deadline_margin_ms: int = 1000,
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
            store: Where records live. ``None``: only an ``@idempotent_function`` record handler is guarded (by
                its own store); other handlers run without idempotency, as in Powertools.
            config: Key selection and timings (by default the record's own id is the key).
            max_workers: Records run in a thread pool of this size; records sharing an ordering key (FIFO
                group, Kinesis partition key, DynamoDB item key, Kafka topic-partition) still run one after another,
                in order. A record meeting the lock of another record of its batch waits for it, then replays.
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
            metrics: CloudWatch EMF metrics, one JSON line on stdout per invocation (:mod:`consumer.metrics`):
                ``True`` or a :class:`~consumer.Metrics`; ``None`` reads ``IDEMPOTENCY_METRICS``; ``False`` is off.

        Raises:
            TypeError: ``on_outcome`` is not a plain function, or ``metrics`` is not one of its forms.
        """
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        if is_async_store(store):
            raise TypeError(f"{type(store).__name__} is an async store: use AsyncBatchProcessor")
        super().__init__(
            event_type,
            store=store,
            config=config,
            workers=max_workers,
            deadline_margin_ms=deadline_margin_ms,
            stop_on_first_failure=stop_on_first_failure,
            skip_group_on_error=skip_group_on_error,
            raise_on_entire_batch_failure=raise_on_entire_batch_failure,
            clock=clock,
            on_outcome=on_outcome,
            metrics=metrics,
        )
        self._pool: ThreadPoolExecutor | None = None  # made on first use, kept for warm invocations
        self._pool_lock = threading.Lock()

    def process(
        self, event: BatchEvent, record_handler: RecordHandler[RecordT], context: LambdaContext | None = None
    ) -> PartialBatchResponse:
        """Process one invocation's batch and return its partial batch response.

        Raises:
            BatchEventError: The event has no ``Records`` list, or a record lacks its identifier.
            BatchProcessingError: Every record failed (unless ``raise_on_entire_batch_failure=False``).
            TypeError: ``record_handler`` is ``async def`` or a generator function (nothing is run).
        """
        started = time.perf_counter()
        settings, handler, guard_passing, items = self._start(event, record_handler, context, async_ok=False)
        with Invocation(context):
            try:
                BatchRun(settings, handler, guard_passing, context, items, self._workers()).run()
            except BaseException as e:  # reported as far as it got; the batch comes back whole
                self._report(settings, guard_passing, items, started, context, any_failed=True, interrupted=e)
                raise
        return self._finish(settings, guard_passing, items, started, context)

    def _workers(self) -> ThreadPoolExecutor | None:
        if self._settings.max_workers > 1 and self._pool is None:
            with self._pool_lock:
                if self._pool is None:
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

    Example:
        >>> from persistence import InMemoryPersistenceLayer
        >>> processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
        >>> process_partial_response({"Records": [{"messageId": "a", "body": "{}"}]}, lambda r: None, processor)
        {'batchItemFailures': []}
    """
    return processor.process(event, record_handler, context)
