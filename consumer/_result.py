"""What a guarded body's result becomes on exit: its ``COMPLETE`` record and its commit, or a refusal of unrun work.

Results that stand for work not done yet (a coroutine, a generator, a Future) are never committed. The body's own
writes (``guard.write``) commit with the record: all of them, or nothing. The commit's decisions are the sync and
the async guard's both: whether a write may be queued, which call commits, a record too large committed without
its response, and what a write's refused condition does (nothing was written: the lock is released, so a
redelivery may run).
"""

from __future__ import annotations

import dataclasses
import io
import sys
from types import AsyncGeneratorType, CoroutineType, GeneratorType
from typing import TYPE_CHECKING, Any

from consumer._async import settle, settled
from consumer._errors import InvalidResultError
from consumer._output import encode_output, without_response
from consumer._serde import ResultEncodingError
from persistence import ItemTooLargeError, TransactionalStore, WriteConditionError

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Awaitable, Callable

    from consumer.serialization import BaseIdempotencySerializer
    from persistence import AsyncPersistenceLayer, IdempotencyRecord, PersistenceLayer

    ReleaseFailed = Callable[[IdempotencyRecord, BaseException | None, Exception], None]

_MAX_SEARCH_DEPTH = 64
PLAIN_RESULTS = frozenset((dict, list, str, int, float, bool, type(None), tuple))


def never_ran(result: Any) -> bool:
    """Whether ``result`` stands for work not done yet: an awaitable, a generator or an async generator.

    The caller skips plain types first (the usual results), so no isinstance and getattr run per record.
    """
    return isinstance(result, (GeneratorType, AsyncGeneratorType)) or hasattr(type(result), "__await__")


def unrun_parts(value: Any, depth: int = 0, seen: set[int] | None = None) -> list[Any]:
    """Work not yet done inside a result: awaitables, iterators (``map``, generators), async iterators, Futures.

    Containers are searched, and so is what a dataclass or a Pydantic model stores: a dataclass's fields, a model's
    fields and extra values (pydantic and concurrent.futures are not imported when nobody has). Only called once a
    result failed to encode (plain data never holds these), so it costs nothing otherwise.
    """
    t = type(value)
    if (t in PLAIN_RESULTS and t not in (dict, list, tuple)) or depth > _MAX_SEARCH_DEPTH:
        return []
    futures = sys.modules.get("concurrent.futures")  # no Future exists while nobody has imported it
    if (
        hasattr(t, "__await__")
        or hasattr(t, "__anext__")
        or (hasattr(t, "__next__") and not isinstance(value, io.IOBase))
        or (futures is not None and isinstance(value, futures.Future))
    ):
        return [value]
    seen = set() if seen is None else seen
    if id(value) in seen:  # a cycle: already searched
        return []
    seen.add(id(value))
    if isinstance(value, dict):
        children: Any = value.values()
    elif isinstance(value, (list, tuple, set, frozenset)):
        children = value
    else:
        children = _attributes(value)
    return [part for child in children for part in unrun_parts(child, depth + 1, seen)]


def _attributes(value: Any) -> list[Any]:
    # What of a dataclass or a Pydantic model is stored, so searched: a dataclass's fields, a model's fields and
    # extra values. Other attributes (a helper counter, a client, a private attribute) are not the result's data:
    # a coroutine left there is the application's to await, and a lazy iterator there is no unrun work of ours.
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [getattr(value, f.name) for f in dataclasses.fields(value)]
    pydantic = sys.modules.get("pydantic")
    if pydantic is None or not isinstance(value, pydantic.BaseModel):
        return []
    return [*vars(value).values(), *(getattr(value, "__pydantic_extra__", None) or {}).values()]


def close_unrun(parts: list[Any]) -> None:
    """Stop the work ``parts`` stand for, as far as it can be stopped, before the lock is released.

    Coroutines and generators are closed (one left unclosed warns "never awaited" later). Tasks and futures
    (asyncio's or ``concurrent.futures``') are cancelled: a task scheduled in the body would otherwise run on
    after the record was reported failed, and again on its redelivery.
    """
    for part in parts:
        if isinstance(part, (GeneratorType, CoroutineType)):
            part.close()
        elif callable(getattr(part, "cancel", None)) and callable(getattr(part, "done", None)):
            part.cancel()


_SET_IN_BODY = (
    "output_serializer was set in the body: a duplicate replays before any body runs, through the serializer the "
    "guard was entered with, so it would not rebuild this result (pass it to the guard, or declare it on "
    "@idempotent_function)"
)


def refusal(key: str | None, result: Any, unrun: list[Any], cause: BaseException | None) -> InvalidResultError:
    """Close the unrun coroutines and generators; return the error to raise once the lock is released.

    Args:
        key: The guard's idempotency key, named in the message.
        result: The body's result: ``unrun`` is it, or parts of it.
        unrun: The coroutines, generators and other unrun work found in ``result``.
        cause: What stopped the result's encoding, when that is how the unrun work was found.
    """
    kinds = sorted({type(part).__name__ for part in unrun})
    close_unrun(unrun)
    where = "is" if unrun[0] is result else "holds"
    invalid = InvalidResultError(
        f"the result of {key!r} {where} a {' and a '.join(kinds)}: the work it stands for has not run, so "
        "it is not committed (await it or consume it inside the body)",
        key=key,
    )
    invalid.__cause__ = cause
    return invalid


def completed_record(
    held: IdempotencyRecord,
    result: Any,
    serializer: BaseIdempotencySerializer | None,
    expires_at: int,
    *,
    replays_with: BaseIdempotencySerializer | None,
) -> tuple[IdempotencyRecord, BaseException | None, BaseException | None]:
    """The ``COMPLETE`` record to write for ``held``; why its result is not in it; what interrupted the storing.

    The body ran: whatever goes wrong encoding its result must not keep the record from committing, or the side
    effect would run again once the lock lapses. The record is then committed without its response (the guard
    logs it once the commit landed: :func:`~consumer._output.unstored`), unless the result holds work that has not
    run (a coroutine in a list, a map object, a Future): committing it would lose that work, so it is refused.

    A duplicate is replayed before any body runs, through the serializer the guard was entered with
    (``replays_with``): a result stored by another one, set in the body, would not replay as itself, so it is
    committed without its response too.

    Returns:
        The record; the error its response was left out for (``None`` when it holds the result); and the
        ``BaseException`` that interrupted the encoding, to raise once the record is committed.

    Raises:
        InvalidResultError: ``result`` holds unrun work (the lock is not yet released).
        BaseException: One that stopped the encoding of a result holding unrun work, as it was raised.
    """
    try:
        response = encode_output(result, serializer)
        if serializer is not replays_with:
            raise ResultEncodingError(_SET_IN_BODY)  # noqa: TRY301 - handled as any result that cannot be stored
        return held.completed(response, expires_at), None, None
    except Exception as e:
        unrun = unrun_parts(result)
        if unrun:
            raise refusal(held.key, result, unrun, e) from e
        return held.completed(None, expires_at), e, None
    except BaseException as e:  # a KeyboardInterrupt in a serializer: the body ran, so it is committed first
        if unrun_parts(result):
            raise
        return held.completed(None, expires_at), e, e


def check_serializer(serializer: BaseIdempotencySerializer) -> None:
    """Refuse what is not a serializer instance.

    Raises:
        TypeError: A serializer class, or anything without a ``to_dict`` method.
    """
    if isinstance(serializer, type) or not callable(getattr(serializer, "to_dict", None)):
        msg = (
            f"output_serializer={serializer!r}: pass a serializer instance, such as DataclassSerializer(Receipt) "
            "(only @idempotent_function builds one from a return annotation)"
        )
        raise TypeError(msg)


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
            if writes:
                store.complete_with(complete, writes)  # type: ignore[attr-defined]  # checked when the body queued
            else:
                store.complete(complete)  # the hot path: no frame more than before writes existed
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
