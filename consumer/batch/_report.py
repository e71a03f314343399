"""What a batch processor reports once its records' outcomes are decided: logs, EMF metrics, the outcome hook.

Nothing here can change an outcome: it runs after every record was committed, replayed or marked failed, and
before the partial batch response is returned. An ``Exception`` raised by the application's logging setup,
by standard output, or by its ``on_outcome`` hook is logged (or, for logging itself, written to ``stderr``) and
the report goes on with the next record. A ``BaseException`` (``KeyboardInterrupt``, ``SystemExit``) raised by
the hook propagates, as one raised by a record handler does: the invocation fails and Lambda redelivers the
whole batch, whose committed records replay. Nothing is lost either way. A batch that such a ``BaseException``
stopped is reported too, before it propagates: its decided records, and an ERROR summary naming it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from typing import TYPE_CHECKING, Any, TypeAlias

from consumer import _reports
from consumer._reports import enabled, idempotency_disabled
from consumer.observability import HOOK_FAILED, Outcome, document, log_interrupted, log_item, log_summary

if TYPE_CHECKING:
    from collections.abc import Callable

    from consumer._context import LambdaContext
    from consumer.batch._event import Tally
    from consumer.batch._run import RunSettings
    from consumer.batch._summary import BatchSummary
    from consumer.observability import Item, Metrics

#: ``on_outcome(item)``: called once per record with its :class:`~consumer.Item`; what it returns is ignored.
OutcomeHook: TypeAlias = "Callable[[Item], object]"


def check_hook(hook: OutcomeHook | None) -> OutcomeHook | None:
    """Refuse, when the processor is built, a hook that would never run: not callable, ``async def``, a generator.

    Raises:
        TypeError: ``hook`` cannot be called as a plain function.
    """
    if hook is None:
        return None
    if not callable(hook):
        raise TypeError(f"on_outcome must be callable, got {type(hook).__name__}")
    import inspect  # noqa: PLC0415 - costs 6 ms at import time; checked once per processor

    for candidate in (hook, getattr(hook, "__call__", None)):  # noqa: B004 - a callable object's method
        if (
            inspect.iscoroutinefunction(candidate)
            or inspect.isasyncgenfunction(candidate)
            or inspect.isgeneratorfunction(candidate)
        ):
            msg = "on_outcome is called and never awaited or iterated: give a plain def (it may start a task itself)"
            raise TypeError(msg)
    return hook


class Reporter:
    """A processor's reporting options, and the report of one invocation."""

    __slots__ = ("metrics", "on_outcome")

    def __init__(self, on_outcome: OutcomeHook | None, metrics: Metrics | None) -> None:
        """Keep the options (checked by the processor): the hook to call per record, the metrics to write."""
        self.on_outcome = on_outcome
        self.metrics = metrics

    def report(
        self,
        settings: RunSettings,
        items: list[Item],
        tally: Tally,
        context: LambdaContext | None,
        *,
        any_failed: bool,
        unguarded_by_design: bool = False,
        interrupted: BaseException | None = None,
    ) -> None:
        """Log each record that is not plain success and the summary, write the metrics, call the hook.

        Args:
            settings: The run's settings.
            items: The batch's records, with their outcomes.
            tally: Their counts (its ``summary`` is built here only when a line or metrics need it).
            context: The invocation's Lambda context.
            any_failed: Whether any record is reported in ``batchItemFailures`` (the summary is a WARNING).
            unguarded_by_design: The processor has no store and its handler no guard of its own: every record runs
                unguarded, as the processor warned once; no line per record says so again.
            interrupted: The ``BaseException`` that stopped the run: only decided records are reported, the
                summary is an ERROR naming it, and it propagates once the report is written.
        """
        source = tally.event_type
        if any_failed or tally.unguarded or interrupted is not None:
            quiet: set[Outcome | None] = {Outcome.PROCESSED, Outcome.REPLAYED}
            if tally.unguarded and (unguarded_by_design or idempotency_disabled()):  # unguarded by request
                quiet.add(Outcome.UNGUARDED)
            if interrupted is not None:
                quiet.add(None)  # not decided: the whole batch comes back, which the summary says
            _log_items([item for item in items if item.outcome not in quiet], source, context, settings)
        undecided = sum(1 for item in items if item.outcome is None) if interrupted is not None else 0
        if interrupted is not None:
            log_interrupted(tally.summary, undecided, interrupted, context)
        elif any_failed or enabled(logging.INFO):  # else log_summary writes nothing (INFO is off): no summary built
            log_summary(tally.summary, context, any_failed=any_failed)
        if self.metrics is not None:
            # Undecided records come back with the whole batch, as failed ones do: Failed counts them, so that the
            # counts add up to Records and an alarm on Failed sees an interrupted invocation.
            summary = tally.summary
            counted = dataclasses.replace(summary, failed=summary.failed + undecided) if undecided else summary
            self._write_metrics(self.metrics, settings, counted, context)
        if self.on_outcome is not None:
            for item in items:
                if item.outcome is not None or interrupted is None:
                    self._call_hook(self.on_outcome, item, source, context)

    @staticmethod
    def _write_metrics(
        metrics: Metrics, settings: RunSettings, summary: BatchSummary, context: LambdaContext | None
    ) -> None:
        try:
            doc = document(metrics, summary, context, int(settings.clock() * 1000))
            sys.stdout.write(json.dumps(doc, separators=(",", ":"), allow_nan=False) + "\n")  # one write: one line
            sys.stdout.flush()
        except Exception as e:  # noqa: BLE001 - metrics never decide an outcome
            _reports.unlogged("the EMF metrics document", e)

    @staticmethod
    def _call_hook(hook: OutcomeHook, item: Item, source: str, context: LambdaContext | None) -> None:
        # A hook's failure is logged under an outcome of its own (hook_failed), never the record's: a query counting
        # the records that failed, or were processed, must not count it. The record's outcome is in the message.
        outcome = "none" if item.outcome is None else item.outcome.value
        try:
            returned: Any = hook(item)
        except Exception as e:  # noqa: BLE001 - the user's hook never changes an outcome
            _reports.emit(
                logging.ERROR,
                "on_outcome hook raised for record %s (its outcome, %s, stands): %r",
                item.item_id,
                outcome,
                e,
                extra=_hook_failed(item, source, context, e),
                exc_info=e,
            )
            return
        if hasattr(type(returned), "__await__"):  # a plain def returning a coroutine slipped through: never awaited
            close = getattr(returned, "close", None)
            if close is not None:
                close()
            _reports.emit(
                logging.ERROR,
                "on_outcome hook returned an awaitable for record %s: it is never awaited (give a plain def)",
                item.item_id,
                extra=_hook_failed(item, source, context, None),
            )


def _hook_failed(item: Item, source: str, context: LambdaContext | None, error: Exception | None) -> dict[str, Any]:
    return _reports.fields(
        HOOK_FAILED,
        key=item.key,
        item_identifier=item.item_id,
        event_source=source,
        context=context,
        error=error,
    )


def _log_items(items: list[Item], source: str, context: LambdaContext | None, settings: RunSettings) -> None:
    for item in items:
        try:
            log_item(item, source, context, settings.deadline_margin_ms)
        except Exception as e:  # noqa: BLE001, PERF203 - a log line is never an outcome; raised only if logging fails
            _reports.unlogged(f"the log record of record {item.item_id}", e)
