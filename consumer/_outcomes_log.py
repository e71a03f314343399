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
(:func:`consumer._one_line.one_line`); the traceback keeps the exception's text as it is.

Logging never decides an outcome: every call here swallows what a handler, filter or record factory of the
application raises (an ``Exception``), after one line on ``stderr``. Only the guard's own warnings are logged
while records run (a result committed without its response, once that commit landed); the processor logs the rest
once the batch ran.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from consumer._one_line import one_line

if TYPE_CHECKING:
    from consumer._batch_event import BatchSummary
    from consumer._batch_run import Item
    from consumer._context import LambdaContext

logger = logging.getLogger("idempotent_consumer")

#: The ``extra`` field names of a record's outcome, and of the summary.
KEY, ITEM, SOURCE, OUTCOME, REQUEST_ID, EXCEPTION_TYPE = (
    "idempotency_key",
    "item_identifier",
    "event_source",
    "outcome",
    "lambda_request_id",
    "exception_type",
)
SUMMARY = "batch_summary"

#: Outcomes that are not among :class:`~consumer.Outcome`'s values: refinements of ``failed`` and ``processed``;
#: and the failure of the ``on_outcome`` hook on a record, which is no outcome of the record's.
LOCK_LOST, COMMITTED_WITHOUT_RESPONSE, HOOK_FAILED = "lock_lost", "committed_without_response", "hook_failed"
_REDELIVERED = "reported for redelivery"
_ERROR_TEXT_SHOWN = 300  # characters of an exception's text in a message's one line (the traceback has it all)


def request_id(context: LambdaContext | None) -> str | None:
    """The invocation's ``aws_request_id`` as a string, or ``None`` without a context."""
    found = getattr(context, "aws_request_id", None)
    return None if found is None else str(found)


def fields(
    outcome: str,
    *,
    key: str | None,
    item_identifier: str | None,
    event_source: str | None,
    context: LambdaContext | None,
    error: BaseException | None,
) -> dict[str, Any]:
    """The ``extra`` of one record's outcome."""
    return {
        OUTCOME: outcome,
        KEY: key,
        ITEM: item_identifier,
        SOURCE: event_source,
        REQUEST_ID: request_id(context),
        EXCEPTION_TYPE: None if error is None else type(error).__name__,
    }


def emit(level: int, message: str, *args: object, extra: dict[str, Any], exc_info: BaseException | None = None) -> None:
    """Log one record, its message formatted here and kept on one line; what logging raises is swallowed.

    Args:
        level: The ``logging`` level.
        message: The ``%``-style message, one line.
        *args: Its arguments (an exception's text among them may hold line breaks: they are escaped).
        extra: The structured fields.
        exc_info: The exception whose traceback the record carries.
    """
    text = message
    try:
        if logger.isEnabledFor(level):
            text = one_line(message % args if args else message)
            logger.log(level, text, extra=extra, exc_info=exc_info, stacklevel=2)
    except Exception as e:  # noqa: BLE001 - a log line is never an outcome: the record's fate is decided already
        unlogged(text, e)


def unlogged(what: str, error: BaseException) -> None:
    """Say on ``stderr`` (once, best effort) that a log record or a metrics document could not be written."""
    with contextlib.suppress(Exception):  # nowhere left to say it; the records' outcomes stand regardless
        sys.stderr.write(f"idempotent-consumer: could not write {what[:120]!r}: {error!r}\n")


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
    from consumer._batch_run import NOT_RUN, Outcome  # noqa: PLC0415 - _batch_run imports the guard, which imports us
    from persistence import LockLostError  # noqa: PLC0415 - same cycle, through consumer's package

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


def log_summary(summary: BatchSummary, context: LambdaContext | None, *, any_failed: bool) -> None:
    """Log the invocation's summary: INFO when every record succeeded, WARNING when any was reported failed."""
    counts = asdict(summary)
    shown = ", ".join(
        f"{counts[name]} {name.replace('_', ' ')}"
        for name in ("processed", "replayed", "unguarded", "failed", "lock_lost", "in_progress", "skipped", "deferred")
        if counts[name]
    )
    extra = {SUMMARY: counts, SOURCE: summary.event_type, REQUEST_ID: request_id(context)}
    emit(
        logging.WARNING if any_failed else logging.INFO,
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
    extra = {SUMMARY: asdict(summary), SOURCE: summary.event_type, REQUEST_ID: request_id(context)}
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


def log_committed_without_response(  # noqa: PLR0917 - the guard's two call sites, each naming all six
    message: str,
    key: str,
    cause: object,
    error: BaseException,
    context: LambdaContext | None,
    batch_record: tuple[str, str] | None,
) -> None:
    """A result that cannot be stored: the record is committed without it (the guard decides this).

    Args:
        message: The one line, with one ``%r`` for the key and one ``%s`` for ``cause``.
        key: The record's key.
        cause: What the line says about ``error``.
        error: Why the result cannot be stored.
        context: The invocation's context.
        batch_record: ``(item identifier, event source)`` when a batch processor runs the record.
    """
    item_identifier, event_source = batch_record if batch_record is not None else (None, None)
    extra = fields(
        COMMITTED_WITHOUT_RESPONSE,
        key=key,
        item_identifier=item_identifier,
        event_source=event_source,
        context=context,
        error=error,
    )
    if item_identifier is None:
        emit(logging.WARNING, message, key, cause, extra=extra)
    else:
        emit(logging.WARNING, message + " (record %s)", key, cause, item_identifier, extra=extra)


def log_unguarded(context: LambdaContext | None, why: str | None) -> None:
    """The guard's once-per-invocation warning for records without a key (outside a batch processor).

    ``why`` is the first such record's :func:`consumer.keys.missing_key_message`.
    """
    invocation = request_id(context)
    extra = fields("unguarded", key=None, item_identifier=None, event_source=None, context=context, error=None)
    emit(
        logging.WARNING,
        "no idempotency key selected: running the record(s) unguarded, as raise_on_no_idempotency_key=False asks "
        "(invocation %s): %s",
        invocation,
        why,
        extra=extra,
    )


def log_release_failed(
    key: str, body_error: BaseException | None, error: BaseException, context: LambdaContext | None
) -> None:
    """A guard used on its own could not release its lock after its body failed (a batch names it on the record)."""
    extra = fields("failed", key=key, item_identifier=None, event_source=None, context=context, error=error)
    emit(logging.ERROR, "could not release %r after the body raised %r: %s", key, body_error, error, extra=extra)
