"""The body's own writes (``guard.write``): queued in the body, committed with the record, or not at all.

The decisions the sync and the async guard share: whether a write may be queued, which call commits, and what a
write's refused condition does (the lock is released: nothing was written, so a redelivery may run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from persistence import TransactionalStore

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from persistence import AsyncPersistenceLayer, IdempotencyRecord, PersistenceLayer


def queue(store: object, held_key: str | None, writes: list[Any], item: Any, params: Any) -> None:
    """Check one write of the body and queue it; nothing is sent until the guard exits.

    Raises:
        RuntimeError: The guard holds no lock: outside its body, or the body runs unguarded (no key selected,
            ``IDEMPOTENCY_DISABLED``): there is no record to commit the write with.
        TypeError: The store cannot commit writes with a record, or ``item`` is not a write it takes.
        ValueError: The write breaks a limit of the store's transactions.
    """
    if not isinstance(store, TransactionalStore):
        why = getattr(store, "writes_refused", None) or (
            "guard.write needs a store with queue_write and complete_with (persistence.TransactionalStore): "
            "DynamoDBPersistenceLayer, SQLitePersistenceLayer, InMemoryPersistenceLayer"
        )
        msg = f"{type(store).__name__} cannot commit writes with the idempotency record: {why}"
        raise TypeError(msg)
    if held_key is None:
        msg = (
            "guard.write outside a guarded body: the guard holds no lock (it has exited, or the body runs "
            "unguarded: no key was selected, or IDEMPOTENCY_DISABLED is set), so no record commits the write"
        )
        raise RuntimeError(msg)
    store.queue_write(held_key, writes, item, params)


def commit(store: PersistenceLayer, complete: IdempotencyRecord, writes: list[Any]) -> None:
    """Commit ``complete``, with the body's writes in the same transaction when it queued any."""
    if writes:
        store.complete_with(complete, writes)  # type: ignore[attr-defined]  # checked when the body queued
    else:
        store.complete(complete)


def acommit(store: AsyncPersistenceLayer, complete: IdempotencyRecord, writes: list[Any]) -> Awaitable[None]:
    """The async face of :func:`commit`: the call to await."""
    if writes:
        call: Awaitable[None] = store.complete_with(complete, writes)  # type: ignore[attr-defined]  # checked when queued
        return call
    return store.complete(complete)
