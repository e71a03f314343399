"""What a guarded body's result becomes on exit: the ``COMPLETE`` record to write, or a refusal of unrun work.

Results that stand for work not done yet (a coroutine, a generator, a Future) are never committed.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import io
import sys
from types import AsyncGeneratorType, CoroutineType, GeneratorType
from typing import TYPE_CHECKING, Any

from consumer._errors import InvalidResultError
from consumer._output import encode_output
from consumer._serde import ResultEncodingError

if TYPE_CHECKING:
    from consumer.serialization import BaseIdempotencySerializer
    from persistence import IdempotencyRecord

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
    fields and extra values (pydantic is not imported when nobody has). Only called once a result
    failed to encode (plain data never holds these), so it costs nothing otherwise.
    """
    t = type(value)
    if (t in PLAIN_RESULTS and t not in (dict, list, tuple)) or depth > _MAX_SEARCH_DEPTH:
        return []
    if (
        hasattr(t, "__await__")
        or hasattr(t, "__anext__")
        or (hasattr(t, "__next__") and not isinstance(value, io.IOBase))
        or isinstance(value, concurrent.futures.Future)
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
