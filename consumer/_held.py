"""The leases of the locks this process holds right now, read only to explain a conflict.

A guard nested on its own record's key meets its own lock on every delivery: its error says so, instead of
blaming "another invocation". Set operations are atomic under the GIL, so threads share the set safely.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from consumer._errors import IdempotencyAlreadyInProgressError

if TYPE_CHECKING:
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
