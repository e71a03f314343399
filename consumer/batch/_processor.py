"""What the sync and async batch processors share: settings, the per-call summary, parsing the event, and the
partial batch response."""  # noqa: D205, D209 - one sentence

from __future__ import annotations

import contextvars
import functools
import logging
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from consumer._context import lambda_context_of, system_clock
from consumer._errors import BatchProcessingError
from consumer._handlers import LAMBDA_CONTEXT, OWN, handler_shape, refuse_dropped_config
from consumer.batch._event import (
    SUCCEEDED,
    PartialBatchResponse,
    Tally,
    checked_records,
    parse,
    records_of,
    refuse_kafka_without_cluster,
)
from consumer.batch._record_model import check_model
from consumer.batch._report import Reporter, check_hook
from consumer.batch._run import BatchRun, RunSettings
from consumer.observability import NOT_RUN, Item, resolve
from consumer.sources import EventType, RecordT, failure_identifier, refuse_key_header, resolve_event_type

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

    from typing_extensions import Self

    from consumer._context import Clock, LambdaContext
    from consumer._handlers import HandlerShape
    from consumer.batch._event import BatchEvent
    from consumer.batch._report import OutcomeHook
    from consumer.batch._summary import BatchSummary
    from consumer.config import IdempotencyConfig
    from consumer.observability import Metrics
    from persistence import AsyncPersistenceLayer, PersistenceLayer

logger = logging.getLogger("idempotent_consumer")

RunT = TypeVar("RunT", bound=BatchRun)


class _Batch:
    """One batch processed: its items, summary and response, and the error to raise when every record failed."""

    __slots__ = ("error", "items", "response", "tally")

    def __init__(
        self,
        items: list[Item],
        tally: Tally,
        response: PartialBatchResponse | None = None,  # None: the run was interrupted (a BaseException)
        error: BatchProcessingError | None = None,
    ) -> None:
        """Keep what the batch came to; it is not changed afterwards."""
        self.items = items
        self.tally = tally
        self.response = response
        self.error = error

    def respond(self) -> PartialBatchResponse:
        """The response; or raise ``BatchProcessingError`` when every record failed (and the processor raises)."""
        if self.error is not None:
            raise self.error
        assert self.response is not None  # noqa: S101 - only a finished batch is responded to
        return self.response

    def outcomes(self) -> list[tuple[str, Any, Any]]:
        """Powertools' ``processor.process()`` list: ``("success", result, record as delivered)`` or ``("fail",
        "<exception type>:<exception>", typed record)``, in batch order."""  # noqa: D205, D209 - one sentence
        return [
            ("success", i.result, i.raw) if i.outcome in SUCCEEDED else ("fail", _why(i), i.record) for i in self.items
        ]


def _why(item: Item) -> str:
    if item.error is None:
        return f"not run ({'unknown' if item.outcome is None else item.outcome.value})"
    return f"{type(item.error)}:{item.error}"


class _Call:
    """One call of ``process``: its handler and context, and in Powertools' older form the records of
    ``processor(records, handler, lambda_context)``, kept until its ``with`` block ends."""  # noqa: D205, D209 - one sentence

    __slots__ = ("batch", "context", "handler", "records")

    def __init__(
        self,
        handler: Callable[..., Any],
        context: LambdaContext | None,
        records: list[Any] | None = None,  # the older form's; None: the event's, given to process()
    ) -> None:
        """The call, its batch not yet processed."""
        self.handler = handler
        self.context = context
        self.records = records
        self.batch: _Batch | None = None  # what process() made of it, read when the block ends


class _Processor(Generic[RecordT]):
    """What both processors share: settings, the per-call summary, parsing the event and building the response."""

    def __init__(
        self,
        event_type: EventType,
        *,
        workers: int,
        store: PersistenceLayer | AsyncPersistenceLayer | None = None,
        config: IdempotencyConfig | None = None,
        deadline_margin_ms: int = 1000,
        stop_on_first_failure: bool = False,
        skip_group_on_error: bool = False,
        raise_on_entire_batch_failure: bool = True,
        clock: Clock = system_clock,
        on_outcome: OutcomeHook | None = None,
        metrics: Metrics | bool | None = None,
        model: type[Any] | None = None,
    ) -> None:
        """Check and keep the options both processors take (``workers``: ``max_workers`` or ``max_concurrency``)."""
        check_model(model)
        if deadline_margin_ms < 0:
            raise ValueError(f"deadline_margin_ms must not be negative, got {deadline_margin_ms}")
        try:  # its value given as a string ("sqs") is the member: the batch's checks compare members by identity
            event_type = EventType(event_type)
        except ValueError:
            msg = (
                f"event_type {event_type!r} is not an EventType of idempotent-consumer: pass consumer.EventType "
                "(it has Powertools' spellings too, such as EventType.KinesisDataStreams)"
            )
            raise ValueError(msg) from None
        if config is not None and config.key_header is not None:
            refuse_key_header(event_type.value)
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
            model,
        )
        self._reporter = Reporter(check_hook(on_outcome), resolve(metrics))
        self._last: contextvars.ContextVar[_Batch | None] = contextvars.ContextVar(
            f"idempotent_consumer_batch_{id(self)}"
        )
        # Where no batch was processed in the reader's own context: the async processor keeps its thread's latest
        # here, since asyncio.run() processes in a copy of the caller's context; the sync one never sets it.
        self._latest = threading.local()
        # Powertools' `with processor(records, handler):` form: the call of this thread (or task), never shared.
        # A stack: an inner block (nested, same processor) ends by giving the outer block its own call back.
        self._calls: contextvars.ContextVar[tuple[_Call, ...]] = contextvars.ContextVar(
            f"idempotent_consumer_call_{id(self)}", default=()
        )
        self._warned_unguarded = False
        # The last record handler's shape, while that handler lives: a warm invocation passes the same one again.
        self._last_shape: tuple[weakref.ref[Callable[..., Any]], HandlerShape] | None = None

    @property
    def summary(self) -> BatchSummary | None:
        """What the last batch processed by this thread (or task) did; ``None`` before the first."""
        last = self._last_batch()
        return None if last is None else last.tally.summary

    @property
    def items(self) -> list[Item]:
        """The records of the last batch processed by this thread (or task), with their outcomes."""
        last = self._last_batch()
        return [] if last is None else last.items

    @property
    def success_messages(self) -> list[Any]:
        """Powertools' name: the records of the last batch that succeeded (ran, or replayed), as delivered."""
        return [item.raw for item in self.items if item.outcome in SUCCEEDED]

    @property
    def fail_messages(self) -> list[Any]:
        """Powertools' name: the typed records of the last batch that were reported in ``batchItemFailures``."""
        return [item.record for item in self.items if item.outcome not in SUCCEEDED]

    def response(self) -> PartialBatchResponse:
        """Powertools' name: the partial batch response of the last batch this thread (or task) processed.

        Raises:
            RuntimeError: No batch was processed here, or its run was interrupted: there is no response that
                could be returned without acknowledging records that did not run.
        """
        last = self._last_batch()
        if last is None or last.response is None:
            msg = f"{type(self).__name__}.response(): no batch was processed in this thread (or task)"
            raise RuntimeError(msg)
        return last.response

    def __call__(
        self, records: list[Any], handler: Callable[..., Any], lambda_context: LambdaContext | None = None
    ) -> Self:
        """Powertools' older form: ``with processor(records, handler, lambda_context=context): processor.process()``.

        ``records`` are the event's records as it carries them (``event["Records"]``). The call is kept for the
        calling thread (or asyncio task) only, so one processor may serve several at once; ``process()`` without
        arguments runs it inside the block, each record in its guard as :meth:`process` runs an event's.

        Raises:
            UnexpectedBatchTypeError: ``records`` is not a list.
        """
        records = refuse_kafka_without_cluster(self.event_type, self._settings.config, checked_records(records))
        call = _Call(handler, lambda_context, records)
        self._calls.set((*self._calls.get(), call))
        return self

    def __enter__(self) -> Self:
        """The processor itself; ``processor(records, handler)`` must have been called first."""
        if not self._calls.get():
            name = type(self).__name__
            msg = f"use `with processor(records, record_handler, lambda_context=context):` to enter a {name}"
            raise TypeError(msg)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        """End the block: keep its batch for ``response()``; raise ``BatchProcessingError`` if every record failed.

        Raises:
            RuntimeError: The block ended normally without processing its records: none ran, and none may be
                acknowledged (Lambda would delete them).
        """
        calls = self._calls.get()
        if not calls:
            return
        call = calls[-1]
        self._calls.set(calls[:-1])  # the outer block, if any, gets its own call back
        if exc is not None:
            return  # the block's own exception propagates
        if call.batch is None:
            msg = (
                f"the {type(self).__name__} block ended without processing its records: call processor.process() "
                "(or async_process()) inside it; none ran, none is acknowledged"
            )
            raise RuntimeError(msg)
        self._keep(call.batch)  # the block's thread (or task) sees it, wherever process() ran
        if call.batch.error is not None:
            raise call.batch.error

    def _block_call(self, event: BatchEvent | None) -> _Call:
        """The ``processor(records, handler)`` call of this thread's (or task's) block, for ``process()`` without
        arguments (an event without a handler is refused)."""  # noqa: D205, D209 - one sentence
        if event is not None:
            raise TypeError("process(event, record_handler, context): record_handler is missing")
        calls = self._calls.get()
        if not calls:
            msg = (
                "process() without arguments runs inside `with processor(records, record_handler):`; or pass the event"
            )
            raise TypeError(msg)
        return calls[-1]

    def _keep(self, batch: _Batch | None) -> None:
        self._last.set(batch)

    def _last_batch(self) -> _Batch | None:
        """The last batch processed by this thread (or task)."""
        return self._last.get(None)

    def _start(self, call: _Call, event: BatchEvent | None, run: type[RunT], *, async_ok: bool) -> tuple[RunT, float]:
        """Check the handler and parse the event (or the older form's records): the run over them, not started.

        Returned with when the batch was taken (``time.perf_counter()``), the summary's duration. A handler with a
        ``lambda_context`` parameter is given the context by it, as Powertools' processor does; an ``async def`` one
        is refused unless ``async_ok`` (the async processor).
        """
        started = time.perf_counter()
        self._keep(None)  # an invocation that raises leaves no summary of an earlier batch behind
        record_handler = call.handler
        shape = self._shape(record_handler, async_ok=async_ok)
        if shape.guard_passing == OWN:
            refuse_dropped_config(self._settings.config, record_handler)
        if self._settings.store is None and shape.guard_passing != OWN and not self._warned_unguarded:
            self._warned_unguarded = True
            logger.warning(
                "%s has no store and its record handler is not an @idempotent_function: records run without "
                "idempotency (at least once), as in Powertools' BatchProcessor; pass store= to guard each record",
                type(self).__name__,
            )
        if shape.lambda_context and shape.guard_passing != OWN:
            record_handler = functools.partial(record_handler, **{LAMBDA_CONTEXT: call.context})
        raws = call.records
        if raws is None:
            raws = records_of({} if event is None else event, self.event_type)
        event_type = resolve_event_type(self.event_type, raws)
        items = parse(event_type, raws)
        settings = self._settings.for_source(event_type)  # an SQS processor's FIFO queue, say
        # A durable function's context: the Lambda context it carries sets the deadline.
        return run(settings, record_handler, shape.guard_passing, lambda_context_of(call.context), items), started

    def _shape(self, handler: Callable[..., Any], *, async_ok: bool) -> HandlerShape:
        """``handler``'s shape: the last handler's, kept here, or :func:`handler_shape`'s (which remembers it too)."""
        last = self._last_shape
        if last is not None and last[0]() is handler:
            return last[1]
        shape = handler_shape(handler, async_ok=async_ok)
        try:
            self._last_shape = (weakref.ref(handler), shape)
        except TypeError:  # not weakly referenceable: handler_shape inspects it on every batch
            self._last_shape = None
        return shape

    def _report(
        self,
        run: BatchRun,
        started: float,
        *,
        any_failed: bool,
        interrupted: BaseException | None = None,
        response: PartialBatchResponse | None = None,
        error: BatchProcessingError | None = None,
    ) -> _Batch:
        """Keep the summary (``processor.summary``) and report it: logs, metrics, the outcome hook."""
        settings, items = run.settings, run.items
        tally = Tally(run.source, items, (time.perf_counter() - started) * 1000)
        batch = _Batch(items, tally, response, error)
        self._keep(batch)
        by_design = settings.store is None and run.guard_passing != OWN  # warned once when the processor first ran
        self._reporter.report(
            settings,
            items,
            tally,
            run.context,
            any_failed=any_failed,
            unguarded_by_design=by_design,
            interrupted=interrupted,
        )
        return batch

    def _finish(self, run: BatchRun, started: float) -> _Batch:
        """Build the partial batch response and the error to raise if every record failed; keep and report them."""
        items = run.items
        failures = [i for i in items if i.outcome not in SUCCEEDED]
        response: PartialBatchResponse = {
            "batchItemFailures": [{"itemIdentifier": failure_identifier(i.record, i.item_id)} for i in failures]
            if failures
            else []
        }
        error = None
        if failures and len(failures) == len(items) and self.raise_on_entire_batch_failure:
            errors = [(i.item_id, i.error or RuntimeError(_not_run(i))) for i in failures]
            error = BatchProcessingError(errors, response)
        return self._report(run, started, any_failed=bool(failures), response=response, error=error)


def _not_run(item: Item) -> str:
    """Why ``item`` failed without an error of its own, in words (``not run: skipped, an earlier record ...``)."""
    outcome = item.outcome
    return "not run" if outcome not in NOT_RUN else f"not run: {outcome.value}, {NOT_RUN[outcome]}"
