"""Store calls that a cancellation does not cut in half.

A task cancelled while it waits for a store (the batch's deadline, ``asyncio.timeout`` around the guard) must
still learn what the store did: a lock taken must be released, a commit that landed is a commit. So the call
is awaited to its end, and the cancellation is delivered afterwards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Awaitable

    from persistence import AsyncPersistenceLayer, IdempotencyRecord

T = TypeVar("T")


async def settle(call: Awaitable[T]) -> tuple[asyncio.Future[T], asyncio.CancelledError | None]:
    """Await ``call`` to its end whatever happens to the awaiting task.

    Returns:
        The finished call (read its ``result()``) and the cancellation that arrived meanwhile, if any: the
        caller acts on the store's answer, then raises it.
    """
    import asyncio  # noqa: PLC0415 - imported by the running loop already; sync users never pay for it

    future = asyncio.ensure_future(call)
    cancelled: asyncio.CancelledError | None = None
    while not future.done():
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError as e:  # noqa: PERF203 - the loop turns again only after a cancellation
            if not future.cancelled():  # the awaiting task's cancellation, not the call's own
                cancelled = e
        except BaseException:  # noqa: BLE001, S110 - the call's own failure: read from the future by the caller
            pass
    return future, cancelled


async def settled(call: Awaitable[T]) -> T:
    """Await ``call`` to its end, then raise a cancellation that arrived meanwhile, else return its result."""
    future, cancelled = await settle(call)
    if cancelled is not None:
        if not future.cancelled() and future.exception() is not None:
            cancelled.__context__ = future.exception()  # shown with the traceback; the cancellation wins
        raise cancelled
    return future.result()


async def acquire_settled(
    call: Awaitable[IdempotencyRecord | None], store: AsyncPersistenceLayer, record: IdempotencyRecord
) -> IdempotencyRecord | None:
    """``call`` awaited to its end; after a cancellation meanwhile, the lock on ``record`` it left held is released.

    ``call`` is an acquire of ``record`` in ``store`` (or the Powertools read-through that follows one): it leaves
    ``record`` held when it answers ``None``.

    Raises:
        asyncio.CancelledError: The awaiting task was cancelled: the body must not run.
    """
    acquiring, cancelled = await settle(call)
    if cancelled is not None:
        if not acquiring.cancelled() and acquiring.exception() is None and acquiring.result() is None:
            await settle(store.release(record))  # ours, and never to be used
        raise cancelled
    return acquiring.result()
