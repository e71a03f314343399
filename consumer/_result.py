"""What a guarded body's result becomes on exit: the ``COMPLETE`` record to write, or a refusal of unrun work."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from consumer._errors import InvalidResultError
from consumer._output import encode_output
from consumer._serde import ResultEncodingError
from consumer._unrun import close_unrun, unrun_parts

if TYPE_CHECKING:
    from consumer.serialization import BaseIdempotencySerializer
    from persistence import IdempotencyRecord

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
