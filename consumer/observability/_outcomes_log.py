"""Structured log records for what became of each record, and the per-invocation summary.

Every record outcome that is not plain success is one log record whose message says the essentials in one
line (so it reads well as plain text) and whose ``extra`` fields carry them for JSON formatters (Lambda's
``AWS_LAMBDA_LOG_FORMAT=JSON``, Powertools Logger), which put such fields at the top level of the document:

===================== ===============================================================================
field                 value
===================== ===============================================================================
``outcome``           ``failed``, ``lock_lost``, ``in_progress``, ``deferred``, ``skipped``, ``unguarded``,
                      ``committed_without_response``; ``hook_failed``: the ``on_outcome`` hook raised for the
                      record (whose own outcome stands, and was logged as above if it is not plain success)
``idempotency_key``   the record's key (``None`` when the record never reached its guard, or ran unguarded)
``item_identifier``   what ``batchItemFailures`` names (``None`` for a guard used on its own)
``event_source``      the batch's :class:`~consumer.EventType` value (``sqs``, ``sqs_fifo``, ``kinesis``, ``dynamodb``,
                      ``kafka``)
``lambda_request_id`` the invocation's ``aws_request_id``
``exception_type``    the class name of the record's exception (or of why its result was not stored)
===================== ===============================================================================

A failed record's traceback travels as ``exc_info``. No record's payload is ever logged: only identifiers,
keys, counts and the exception (whose text is the application's own, and may quote a producer's field). A message
is one line: its line breaks, control characters and bidirectional controls are escaped
(:func:`consumer._reports.one_line`); the traceback keeps the exception's text as it is.

Logging never decides an outcome: every line goes through :func:`consumer._reports.emit`, which swallows what a
handler, filter or record factory of the application raises (an ``Exception``), after one line on ``stderr``. The
guard's own lines (``unguarded``, ``committed_without_response``, a failed release) are written by the core
(:mod:`consumer._reports`); the lines here are the batch processor's, written once the batch ran. What became of
a record (:class:`Outcome`, :class:`Item`) is defined here, for the processor, this log and the metrics alike.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from typing import TYPE_CHECKING, Any

from consumer._reports import EXCEPTION_TYPE, REQUEST_ID, SOURCE, SUMMARY, emit, enabled, fields, request_id
from persistence import LockLostError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from consumer._context import LambdaContext
    from consumer.batch import BatchSummary
    from consumer.sources import Record


class Outcome(str, enum.Enum):
    """What happened to one record of a batch."""

    PROCESSED = "processed"  # ran and committed
    REPLAYED = "replayed"  # completed before: the stored result stands
    UNGUARDED = "unguarded"  # ran without an idempotency key
    FAILED = "failed"  # the handler (or the store) raised
    IN_PROGRESS = "in_progress"  # another invocation holds its lock
    SKIPPED = "skipped"  # not run: an earlier record of its group (or batch) failed
    DEFERRED = "deferred"  # not run: too little time left before the Lambda deadline

    @property
    def succeeded(self) -> bool:
        """Whether the record needs no redelivery."""
        return self is Outcome.PROCESSED or self is Outcome.REPLAYED or self is Outcome.UNGUARDED


#: Why a record failed without running, in words (an entire batch failure names it; so does the outcome log).
NOT_RUN = {
    Outcome.SKIPPED: "an earlier record it must not overtake failed",
    Outcome.DEFERRED: "too little time was left before the Lambda deadline",
}


#: An :class:`Item`'s attributes, in the order it is built, shown and compared by.
_ITEM_ATTRIBUTES = ("raw", "record", "item_id", "group", "outcome", "error", "result", "key", "release_error")


class Item:
    """One record of a batch and what became of it (what ``on_outcome`` hooks and ``processor.items`` get).

    Shown and compared by its attributes, as a dataclass would be; written by hand because a dataclass's methods
    are compiled when its module is imported, on every cold start.

    Attributes:
        raw: The record as Lambda delivered it.
        record: The typed record the handler received.
        item_id: What ``batchItemFailures`` names.
        group: Its ordering key (FIFO group, partition key, item key), if any.
        outcome: What happened to it.
        error: Why it failed (``None`` for a success, or a record deferred or skipped without running); for a record
            that ran unguarded because no key was selected, the ``IdempotencyKeyError`` that
            ``raise_on_no_idempotency_key=False`` did not raise.
        result: The handler's result, or the replayed response.
        key: Its idempotency key; ``None`` when it never reached its guard or ran unguarded.
        release_error: Set when releasing its lock after it failed failed as well.
    """

    __slots__ = _ITEM_ATTRIBUTES
    __hash__ = None  # type: ignore[assignment]  # changed as the batch runs: unhashable, as a dataclass with eq is

    def __init__(  # noqa: PLR0917 - one argument per attribute, in order
        self,
        raw: Mapping[str, Any],
        record: Record,
        item_id: str,
        group: str | None,
        outcome: Outcome | None = None,
        error: BaseException | None = None,
        result: Any = None,
        key: str | None = None,
        release_error: BaseException | None = None,
    ) -> None:
        """A record of the batch; its outcome is set once it is decided."""
        self.raw = raw
        self.record = record
        self.item_id = item_id
        self.group = group
        self.outcome = outcome
        self.error = error
        self.result = result
        self.key = key
        self.release_error = release_error

    def _attributes(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _ITEM_ATTRIBUTES)

    def __repr__(self) -> str:
        """``Item(raw=..., record=..., ...)``, every attribute by name."""
        shown = ", ".join(f"{name}={value!r}" for name, value in zip(_ITEM_ATTRIBUTES, self._attributes(), strict=True))
        return f"{type(self).__name__}({shown})"

    def __eq__(self, other: object) -> bool:
        """Equal to an ``Item`` whose attributes are all equal."""
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._attributes() == other._attributes()


#: Outcomes that are not among :class:`Outcome`'s values: a refinement of ``failed``, and the failure of the
#: ``on_outcome`` hook on a record, which is no outcome of the record's (``committed_without_response``, a
#: refinement of ``processed``, is the guard's: :mod:`consumer._reports`).
LOCK_LOST, HOOK_FAILED = "lock_lost", "hook_failed"
_REDELIVERED = "reported for redelivery"
_ERROR_TEXT_SHOWN = 300  # characters of an exception's text in a message's one line (the traceback has it all)


def _text(error: BaseException | None) -> str:
    """``str(error)``, cut to one readable length; an exception whose ``__str__`` raises is named, not shown."""
    try:
        text = str(error)
    except Exception:  # noqa: BLE001 - an application's exception may fail to print: its line is written anyway
        return f"<{type(error).__name__} that cannot be printed>"
    return text if len(text) <= _ERROR_TEXT_SHOWN else text[:_ERROR_TEXT_SHOWN] + "..."


def _error_text(error: BaseException) -> str:
    text = _text(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _with_key(key: str | None) -> str:
    return "" if key is None else f" (key {key})"


def log_item(item: Item, event_source: str, context: LambdaContext | None, deadline_margin_ms: int) -> None:
    """Log one batch record whose outcome is not plain success (failed, lock lost, in progress, ...)."""
    outcome, error = item.outcome, item.error
    level = logging.WARNING
    traceback_of: BaseException | None = None  # a failure's traceback goes with its record
    if outcome is Outcome.UNGUARDED:  # its error, when it has one, says why no key was selected and the fix
        why = "no idempotency key selected" if error is None else _text(error)
        name, what = outcome.value, f"ran unguarded: {why}; a redelivery runs it again"
    elif outcome is Outcome.IN_PROGRESS:  # the error names the key
        name, what = outcome.value, f"is in progress ({_text(error)}); {_REDELIVERED}"
    elif outcome is Outcome.DEFERRED:
        name = outcome.value
        what = f"deferred: less than {deadline_margin_ms} ms were left before the Lambda deadline; {_REDELIVERED}"
    elif outcome is Outcome.SKIPPED:
        name, what = outcome.value, f"skipped: {NOT_RUN[outcome]}; {_REDELIVERED}"
    elif isinstance(error, LockLostError):  # the error names the key
        name, traceback_of = LOCK_LOST, error
        what = f"lost its lock to another invocation, so its result was not stored ({_text(error)}); {_REDELIVERED}"
    else:
        name, level, traceback_of = Outcome.FAILED.value, logging.ERROR, error
        what = "failed: " + ("not run" if error is None else _error_text(error)) + _with_key(item.key)
        if item.release_error is not None:
            what += f"; releasing its lock failed too: {_error_text(item.release_error)}"
        what += f"; {_REDELIVERED}"
    extra = fields(
        name, key=item.key, item_identifier=item.item_id, event_source=event_source, context=context, error=error
    )
    emit(level, "record %s %s", item.item_id, what, extra=extra, exc_info=traceback_of)


def _counts(summary: BatchSummary) -> dict[str, Any]:
    """The summary's fields by name: ``dataclasses.asdict`` without its deep copy (every field is a number or a
    string), which cost an invocation more than the rest of its log line."""  # noqa: D205, D209 - one sentence
    return {field.name: getattr(summary, field.name) for field in dataclasses.fields(summary)}


def log_summary(summary: BatchSummary, context: LambdaContext | None, *, any_failed: bool) -> None:
    """Log the invocation's summary: INFO when every record succeeded, WARNING when any was reported failed."""
    level = logging.WARNING if any_failed else logging.INFO
    if not enabled(level):  # Lambda's default level is WARNING: a batch that succeeded builds no line
        return
    counts = _counts(summary)
    shown = ", ".join(
        f"{counts[name]} {name.replace('_', ' ')}"
        for name in ("processed", "replayed", "unguarded", "failed", "lock_lost", "in_progress", "skipped", "deferred")
        if counts[name]
    )
    extra = {SUMMARY: counts, SOURCE: summary.event_type, REQUEST_ID: request_id(context)}
    emit(
        level,
        "batch processed: %d %s %s%s (%.1f ms)",
        summary.records,
        summary.event_type,
        "record" if summary.records == 1 else "records",
        f": {shown}" if shown else "",
        summary.duration_ms,
        extra=extra,
    )


def log_interrupted(summary: BatchSummary, undecided: int, error: BaseException, context: LambdaContext | None) -> None:
    """Log a batch that a ``BaseException`` stopped before every record had its outcome (ERROR, with its traceback)."""
    extra = {SUMMARY: _counts(summary), SOURCE: summary.event_type, REQUEST_ID: request_id(context)}
    extra[EXCEPTION_TYPE] = type(error).__name__
    emit(
        logging.ERROR,
        "batch interrupted by %s with %d of %d records undecided: the invocation fails and Lambda redelivers the"
        " whole batch (its committed records replay)",
        type(error).__name__,
        undecided,
        summary.records,
        extra=extra,
        exc_info=error,
    )
