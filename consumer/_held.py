"""The locks this process holds right now (read only to explain a conflict), and a failure to release one.

A guard nested on its own record's key meets its own lock on every delivery: its error says so, instead of
blaming "another invocation". Set operations are atomic under the GIL, so threads share the set safely.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from consumer._errors import IdempotencyAlreadyInProgressError
from consumer.observability._outcomes_log import log_release_failed
from persistence import IdempotencyError, PersistenceLayerError

if TYPE_CHECKING:
    from consumer._context import LambdaContext
    from persistence import IdempotencyRecord

_held_leases: set[str] = set()


def hold(lease: str) -> None:
    """Remember a lock this process took."""
    _held_leases.add(lease)


def let_go(lease: str) -> None:
    """Forget a lock this process is about to commit or release."""
    _held_leases.discard(lease)


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
