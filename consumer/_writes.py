"""The commit, and the body's own writes (``guard.write``) that go with it: all of them, or nothing.

The decisions the sync and the async guard share: whether a write may be queued, which call commits, a record too
large committed without its response, and what a write's refused condition does (nothing was written: the lock is
released, so a redelivery may run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from consumer._async import settle, settled
from consumer._output import without_response
from persistence import ItemTooLargeError, TransactionalStore, WriteConditionError

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Awaitable, Callable

    from persistence import AsyncPersistenceLayer, IdempotencyRecord, PersistenceLayer

    ReleaseFailed = Callable[[IdempotencyRecord, BaseException | None, Exception], None]


def queue(store: object, held_key: str | None, writes: list[Any], item: Any, params: Any) -> None:
    """Check one write of the body of the lock held on ``held_key`` (``None``: none) and queue it; nothing is sent.

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


def _send(store: PersistenceLayer, complete: IdempotencyRecord, writes: list[Any]) -> None:
    if writes:
        store.complete_with(complete, writes)  # type: ignore[attr-defined]  # checked when the body queued
    else:
        store.complete(complete)


def commit(
    store: PersistenceLayer,
    held: IdempotencyRecord | None,
    complete: IdempotencyRecord,
    writes: list[Any],
    release_failed: ReleaseFailed,
) -> tuple[IdempotencyRecord, ItemTooLargeError | None]:
    """Commit ``complete`` with ``writes``: what was committed, and why without its response (too large) if so.

    Raises:
        WriteConditionError: A write's condition failed; ``held`` was released first (``release_failed`` is told
            when that failed too).
        The store's other errors.
    """
    try:
        try:
            _send(store, complete, writes)
        except ItemTooLargeError as e:
            smaller = without_response(complete)
            _send(store, smaller, writes)
            return smaller, e
    except WriteConditionError as refused:
        if held is not None:  # always: complete is made from it
            try:
                store.release(held)
            except Exception as e:  # noqa: BLE001 - any store's failure: the refusal still wins
                release_failed(held, refused, e)
        raise
    return complete, None


def _asend(store: AsyncPersistenceLayer, complete: IdempotencyRecord, writes: list[Any]) -> Awaitable[None]:
    if writes:
        call: Awaitable[None] = store.complete_with(complete, writes)  # type: ignore[attr-defined]  # checked when queued
        return call
    return store.complete(complete)


async def acommit(
    store: AsyncPersistenceLayer,
    held: IdempotencyRecord | None,
    complete: IdempotencyRecord,
    writes: list[Any],
    release_failed: ReleaseFailed,
) -> tuple[IdempotencyRecord | None, ItemTooLargeError | None, asyncio.Future[None], asyncio.CancelledError | None]:
    """:func:`commit` awaited to its end whatever happens to the awaiting task.

    Returns:
        What was committed (``None``: nothing), why without its response, the last store call (read its
        ``result()`` for the store's error) and the cancellation that arrived meanwhile.
    """
    done, cancelled = await settle(_asend(store, complete, writes))
    error = None if done.cancelled() else done.exception()
    too_large = None
    if isinstance(error, ItemTooLargeError):
        complete, too_large = without_response(complete), error
        done, again = await settle(_asend(store, complete, writes))
        cancelled = cancelled or again
        error = None if done.cancelled() else done.exception()
    if isinstance(error, WriteConditionError) and held is not None:  # nothing written: the lock goes
        try:
            await settled(store.release(held))
        except Exception as e:  # noqa: BLE001 - any store's failure: the refusal still wins
            release_failed(held, error, e)
    committed = complete if error is None and not done.cancelled() else None
    return committed, too_large, done, cancelled
