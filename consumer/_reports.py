r"""What the guard reports, through the core: to its caller and to the log.

To its caller: who holds a lock it met (this process or another invocation), and a lock it could not release.
To the log: a record run unguarded (no key selected), a result committed without its response, a release that
failed. The switch that makes every guard a pass-through (``IDEMPOTENCY_DISABLED``) is read here too.

The structured log's field names and its one ``emit`` live here, so the guard and the wings write one format
(:mod:`consumer.observability` documents it). Logging never decides an outcome: ``emit`` swallows what a handler,
filter or record factory of the application raises (an ``Exception``), after one line on ``stderr``. Only the
guard's own warnings are logged while records run; a batch processor logs the rest once the batch ran.

Text shown to people, a log message or a line of the CLI's output, is kept on its one line (:func:`one_line`). It
may quote what a producer wrote: a line break in it (``\n``, ``\r``, U+2028, U+2029, NEL) would start a line that
a reader, or a log parser, takes for another record; a control character would reach the terminal (ANSI escapes);
a bidirectional override would show the text in another order than it is. Each becomes its ``\uXXXX`` escape,
which keeps JSON output valid JSON that reads back the same.

A guard nested on its own record's key meets its own lock on every delivery: its error says so, instead of
blaming "another invocation". Set operations are atomic under the GIL, so threads share the set of held locks.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import sys
from typing import TYPE_CHECKING, Any

from consumer._errors import IdempotencyAlreadyInProgressError
from persistence import IdempotencyError, PersistenceLayerError

if TYPE_CHECKING:
    from collections.abc import Callable

    from consumer._context import LambdaContext
    from persistence import IdempotencyRecord

logger = logging.getLogger("idempotent_consumer")

# C0 controls (tab included: Lambda's text log format separates its fields with tabs), DEL, C1 controls (NEL
# included), the line and paragraph separators, and the bidirectional marks, embeddings, overrides and isolates.
_UNSAFE = "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]"

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

#: A refinement of ``processed``: committed, but without the response (the guard decides it and says so).
COMMITTED_WITHOUT_RESPONSE = "committed_without_response"


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


def enabled(level: int) -> bool:
    """Whether a line at ``level`` would be logged: a caller skips building one that would not (INFO, by default).

    ``True`` when the logger itself raises, so that :func:`emit` meets the error and says so.
    """
    try:
        return logger.isEnabledFor(level)
    except Exception:  # noqa: BLE001 - emit reports it
        return True


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


def one_line(text: str) -> str:
    r"""``text`` with each line break, control character and bidirectional control escaped as ``\uXXXX``."""
    return re.sub(_UNSAFE, _escaped, text)  # compiled on first use, then cached by re: nothing at import


def _escaped(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def unlogged(what: str, error: BaseException) -> None:
    """Say on ``stderr`` (once, best effort) that a log record or a metrics document could not be written."""
    with contextlib.suppress(Exception):  # nowhere left to say it; the records' outcomes stand regardless
        sys.stderr.write(f"idempotent-consumer: could not write {what[:120]!r}: {error!r}\n")


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


_held_leases: set[str] = set()


#: Remember a lock this process took; forget one it is about to commit or release (the set's own methods: a function
#: calling them would add a call to each, on every record).
hold, let_go = _held_leases.add, _held_leases.discard


def in_progress_error(key: str, existing: IdempotencyRecord) -> IdempotencyAlreadyInProgressError:
    """The error for a live lock met on ``key``, naming who holds it: this process, or another invocation."""
    holder = (
        "a guard of this same process: an enclosing guard, or another thread or task (a guard nested in "
        "another's body needs a key of its own: another key_prefix, or an event_key_jmespath selecting the step)"
        if existing.lease in _held_leases
        else "another invocation"
    )
    return IdempotencyAlreadyInProgressError(
        f"{key!r} is being processed by {holder} until {existing.in_progress_expires_at} (epoch ms)",
        key=key,
        existing_record=existing,
    )


def release_failure(
    key: str, body_error: BaseException | None, error: Exception, context: LambdaContext | None, *, log: bool
) -> IdempotencyError:
    """The store's failure to release ``key`` after the body raised ``body_error``, as the guard reports it.

    A store of the user's that raised its own error is wrapped in :class:`PersistenceLayerError` (chained). The
    failure is logged when ``log`` (a guard used on its own: a batch names it on the record's own failure), and
    noted on the body's exception, which still propagates.
    """
    if not isinstance(error, IdempotencyError):
        wrapped = PersistenceLayerError(f"the store failed to release {key!r}: {error!r}", key=key)
        wrapped.__cause__, error = error, wrapped
    if log:
        log_release_failed(key, body_error, error, context)
    if body_error is not None and hasattr(body_error, "add_note"):  # Python 3.11+
        body_error.add_note(f"idempotent-consumer: releasing {key!r} failed as well: {error!r}")
    return error


#: Our variable, and Powertools' name for the same switch (read when ours is unset or empty).
DISABLED_VARIABLE, POWERTOOLS_DISABLED_VARIABLE = "IDEMPOTENCY_DISABLED", "POWERTOOLS_IDEMPOTENCY_DISABLED"
_TRUE = frozenset(("1", "true", "t", "yes", "y", "on"))
_FALSE = frozenset(("", "0", "false", "f", "no", "n", "off"))


def idempotency_disabled() -> bool:
    """Whether every guard is a pass-through (for users' unit tests): the body runs, nothing is locked or stored.

    ``IDEMPOTENCY_DISABLED`` decides when it is set; otherwise ``POWERTOOLS_IDEMPOTENCY_DISABLED`` (Powertools'
    name, an alias) does. Only an explicit true value disables (``1``, ``true``, ``t``, ``yes``, ``y``, ``on``,
    any case). A value that is neither true nor false (``disabled``, ``tru``) keeps idempotency on and logs a
    warning: a typo must not switch off the one protection against double charges. While idempotency is off, a
    warning says so once per process: every delivery of a record runs its body again.
    """
    # Read on every call (a test sets the variables between invocations); an unset one is the common case, where
    # os.environ raises KeyError inside itself: caught here once, not a second time by Mapping.get.
    for variable in (DISABLED_VARIABLE, POWERTOOLS_DISABLED_VARIABLE):  # the first one set decides
        try:
            value = os.environ[variable].strip().lower()
        except KeyError:
            value = ""
        if value:
            break
    if value in _FALSE:
        return False
    if value in _TRUE:
        _warn_disabled(variable)
        return True
    _warn_unrecognised_disabled(variable, value)
    return False


@functools.lru_cache(maxsize=8)
def _warn_disabled(variable: str) -> None:
    logger.warning(
        "%s is set: idempotency is OFF in this process; every delivery runs its body again and nothing is locked or "
        "stored (meant for unit tests, never for production)",
        variable,
    )


@functools.lru_cache(maxsize=8)
def _warn_unrecognised_disabled(variable: str, value: str) -> None:
    logger.warning(
        "%s=%r is not a true or false value: idempotency stays ON (use 1/true/yes/on to disable)", variable, value
    )


_warned_invocation: list[str | None] = []


def warn_unguarded(context: LambdaContext | None, why: Callable[[], str | None]) -> None:
    """Warn that a record runs unguarded (no key selected): once per invocation (per process without a context).

    ``why`` says what selected nothing, on which record, and the fix when one is known; it is called only when the
    warning is written.
    """
    invocation = request_id(context)  # a test's stand-in context may have none
    if _warned_invocation and _warned_invocation[0] == invocation:
        return
    _warned_invocation[:] = [invocation]
    log_unguarded(context, why())
