"""What the sync and async batch processors share: settings, the per-call summary, parsing the event, and the
partial batch response."""  # noqa: D205, D209 - one sentence

from __future__ import annotations

import contextvars
import dataclasses
import functools
import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic

from consumer._errors import BatchProcessingError
from consumer._handlers import LAMBDA_CONTEXT, OWN, handler_shape, refuse_dropped_cutover
from consumer.batch._event import (
    BatchSummary,
    PartialBatchResponse,
    parse,
    records_of,
    summarize,
)
from consumer.batch._report import Reporter, check_hook
from consumer.batch._run import RunSettings
from consumer.observability import NOT_RUN, Item, resolve
from consumer.sources import EventType, RecordT, failure_identifier, refuse_key_header, resolve_event_type

if TYPE_CHECKING:
    from collections.abc import Callable

    from consumer._context import Clock, LambdaContext
    from consumer.batch._event import BatchEvent
    from consumer.batch._report import OutcomeHook
    from consumer.config import IdempotencyConfig
    from consumer.observability import Metrics
    from persistence import AsyncPersistenceLayer, PersistenceLayer

logger = logging.getLogger("idempotent_consumer")


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
            errors = [(i.item_id, i.error or RuntimeError(_not_run(i))) for i in failures]
            raise BatchProcessingError(errors, response)
        return response


def _not_run(item: Item) -> str:
    """Why ``item`` failed without an error of its own, in words (``not run: skipped, an earlier record ...``)."""
    outcome = item.outcome
    return "not run" if outcome not in NOT_RUN else f"not run: {outcome.value}, {NOT_RUN[outcome]}"
