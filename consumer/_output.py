"""A guard's result through its output serializer: stored on commit, replayed on a duplicate; and the serializer
that a decorated function's declaration or return annotation calls for."""  # noqa: D205, D209 - one sentence

from __future__ import annotations

import collections.abc
import contextlib
import dataclasses
import datetime as dt
import decimal
import json
import logging
import math
import uuid
from typing import TYPE_CHECKING, Any

from consumer._errors import (
    IdempotencyConfigError,
    IdempotencyModelTypeError,
    IdempotencyNoSerializationModelError,
    ResponseDecodeError,
)
from consumer._reports import log_committed_without_response
from consumer._serde import ResultEncodingError, _b64, decode_result, encode_result
from persistence import MAX_ITEM_BYTES, IdempotencyRecord, ItemTooLargeError

if TYPE_CHECKING:
    from collections.abc import Callable

    from consumer._context import LambdaContext
    from consumer.config import ResponseHook
    from consumer.serialization import BaseIdempotencyModelSerializer, BaseIdempotencySerializer

logger = logging.getLogger("idempotent_consumer")


def encode_output(result: Any, serializer: BaseIdempotencySerializer | None) -> str:
    """The JSON text to store for ``result``: ``serializer.to_dict(result)`` (never for ``None``), encoded.

    A built-in typed serializer's text is then checked to replay as ``result`` (decoded and rebuilt as a replay
    would: :meth:`~consumer.serialization._Typed.check_replay`), unless it is too large for any
    store of ours to take (they refuse it with ``ItemTooLargeError`` whatever it holds). Other serializers are not
    checked.

    Raises:
        ResultEncodingError: The serializer or the encoder failed, or the text would not replay as ``result``.
            A serializer of the application's error is its cause; a built-in one's is said by type and place and
            not chained (its text may quote the result).
    """
    if serializer is None or result is None:
        return encode_result(result)
    from consumer.serialization import _Typed  # noqa: PLC0415 - loaded with the serializer
    from consumer.serialization._describe import reason  # noqa: PLC0415 - as _Typed
    from consumer.serialization._round_trip import NotReplayableError  # noqa: PLC0415 - as _Typed

    ours = serializer if isinstance(serializer, _Typed) else None
    try:
        stored = serializer.to_dict(result)
    except Exception as e:  # noqa: BLE001 - any failure of the serializer is this result's ResultEncodingError
        # A built-in serializer's error is said without what its message may quote of the result (the bytes
        # Pydantic could not dump), and not chained: a logged traceback would print its text. A serializer of the
        # application's: its own words, chained.
        msg = f"{serializer!r}.to_dict failed on a result of type {type(result).__qualname__}: "
        raise ResultEncodingError(msg + (repr(e) if ours is None else reason(e))) from (e if ours is None else None)
    text = encode_result(stored)
    if ours is not None and len(text) <= MAX_ITEM_BYTES:  # over it (in characters, so in bytes too), no store takes it
        try:
            ours.check_replay(result, text)
        except NotReplayableError as e:  # said by type and place; its cause (a ValidationError) quotes the result
            msg = f"{serializer!r} would not replay the result as itself: {e}"
            raise ResultEncodingError(msg) from None
    return text


def unstored(
    key: str, error: BaseException, context: LambdaContext | None, batch_record: tuple[str, str] | None
) -> None:
    """Log that the result of ``key`` was committed without its response, because of ``error``.

    Called once the commit landed, never before: a commit that then fails (a lock lost, a store outage) is that
    record's failure, logged as such, and the record was not committed at all.

    Args:
        key: The record's key.
        error: Why the response was not stored: the result cannot be encoded (a ``ResultEncodingError``, or what
            interrupted its encoding), or the store refused it as too large (``ItemTooLargeError``).
        context: The invocation's context.
        batch_record: ``(item identifier, event source)`` when a batch processor runs the record.
    """
    if isinstance(error, ItemTooLargeError):
        message, cause = "result of %r is too large to store (%s): committed without it", str(error)
    else:
        message = "result of %r cannot be stored (%s): committed without it"
        cause = str(error) if isinstance(error, ResultEncodingError) else repr(error)
    log_committed_without_response(message, key, cause, error, context, batch_record)


def without_response(complete: IdempotencyRecord) -> IdempotencyRecord:
    """``complete`` without its response (too large for the store): log it with :func:`unstored` once committed."""
    return dataclasses.replace(complete, response=None)


def decode_output(record: IdempotencyRecord, serializer: BaseIdempotencySerializer | None) -> Any:
    """The result ``record`` replays: its stored response, through ``serializer.from_dict`` (never for ``None``).

    ``None`` when the response was not stored (``record.response`` is ``None``).

    Raises:
        ResponseDecodeError: The stored text is not a stored result, or the serializer refused it. Its message
            says what did not fit by type and place; it chains no cause (that error would quote the stored value).
    """
    if record.response is None:
        return None
    try:
        value = decode_result(record.response)
        return value if serializer is None or value is None else serializer.from_dict(value)
    except Exception as e:  # noqa: BLE001 - any failure to rebuild is this record's ResponseDecodeError, below
        from consumer.serialization._describe import describe  # noqa: PLC0415 - a failed replay only

        said = describe(e)
    by = "" if serializer is None else f" by {serializer!r}"
    msg = (  # what is said of the error quotes no stored value: this message is logged
        f"the stored response of {record.key!r} cannot be replayed{by} ({said}); the body does "
        "not run again: make the response fit (a model or serializer that reads it), or delete the record"
    )
    # Raised outside the handler, so with neither cause nor context: the error that stopped the rebuild (a
    # Pydantic ValidationError's input_value, a ValueError of a decoder) quotes the stored value, and a
    # traceback would print it.
    raise ResponseDecodeError(msg, key=record.key, existing_record=record)


class HookRecord(IdempotencyRecord):
    """The record a response hook is handed: the replayed record, read by our names or by Powertools' ``DataRecord``
    names, whose ``response_data`` and ``response_json_as_dict()`` are the response as plain JSON, as Powertools
    stores it (:func:`json_value`), not our encoding of it (:attr:`response`)."""  # noqa: D205, D209 - one sentence

    __slots__ = ()

    @classmethod
    def of(cls, record: IdempotencyRecord) -> HookRecord:
        """``record`` as a hook reads it (a response hook is configured: nothing is built otherwise)."""
        return cls(**{field.name: getattr(record, field.name) for field in dataclasses.fields(cls)})

    @property
    def response_data(self) -> str | None:
        """The response as Powertools' JSON text of it (keys sorted); ``None`` when none was stored."""
        return None if self.response is None else json.dumps(self.response_json_as_dict(), sort_keys=True)

    def response_json_as_dict(self) -> Any:
        """The response as plain JSON values, as Powertools parses its ``response_data``; ``None`` when none."""
        return None if self.response is None else json_value(decode_result(self.response))


def hooked_response(hook: ResponseHook, response: Any, record: IdempotencyRecord) -> Any:
    """What ``hook`` makes of a replayed ``response``: the replay.

    Raises:
        IdempotencyConfigError: The hook returned an awaitable (a plain ``def`` returning a coroutine): the replay
            would be that awaitable, never awaited. The ``async def`` hooks are refused when the config is built.
    """
    hooked = hook(response, HookRecord.of(record))
    if isinstance(hooked, collections.abc.Awaitable):
        close = getattr(hooked, "close", None)
        if close is not None:
            close()  # a coroutine dropped unawaited would warn of itself, not of the hook
        msg = (
            f"response_hook {getattr(hook, '__qualname__', hook)!r} returned {type(hooked).__name__}, an awaitable, "
            f"for the duplicate of {record.key!r}: it is called as hook(response, record) in sync and async code "
            "alike, and what it returns is the replay; return the value itself"
        )
        raise IdempotencyConfigError(msg, key=record.key, existing_record=record)
    return hooked


def json_value(value: Any) -> Any:
    """``value``, a replayed response, as plain JSON values: what Powertools' encoder would have stored of it.

    Tuples become lists, a Decimal its text (NaN: a float NaN), as there; and of what Powertools cannot store:
    sets become lists (ordered by their JSON text), datetimes, dates and times their ISO text, bytes base64, a UUID
    its text, a timedelta its seconds, and a dict key that is no text the JSON text of its value.
    """
    t = type(value)
    if t is dict:
        return {k if type(k) is str else _key_text(k): json_value(v) for k, v in value.items()}
    if t is list or t is tuple:
        return [json_value(v) for v in value]
    if t is set or t is frozenset:
        return sorted((json_value(v) for v in value), key=json.dumps)
    plain = _JSON_SCALARS.get(t)
    return value if plain is None else plain(value)


def _key_text(key: Any) -> str:
    plain = json_value(key)  # 1 -> "1", True -> "true", None -> "null": as json.dumps writes such keys
    return plain if type(plain) is str else json.dumps(plain)


_JSON_SCALARS: dict[type, Callable[[Any], Any]] = {  # the types a replay rebuilds that JSON has no form for
    decimal.Decimal: lambda v: math.nan if v.is_nan() else str(v),
    bytes: _b64,
    bytearray: _b64,
    dt.datetime: dt.datetime.isoformat,
    dt.date: dt.date.isoformat,
    dt.time: dt.time.isoformat,
    dt.timedelta: dt.timedelta.total_seconds,
    uuid.UUID: str,
}


_UNRESOLVED: Any = object()


class FunctionOutput:
    """The output serializer of a decorated function: the one it declares, or the one its return annotation calls
    for (:func:`~consumer.serialization.serializer_for`).

    Resolved when the function is decorated, with the field annotations of the dataclasses it rebuilds. What
    names a class its module defines further down is resolved again on the first call. What never resolves (a
    name imported only under ``TYPE_CHECKING``, a class defined inside a function) means no serializer (with a
    warning when it is a field of the dataclass returned); a declared serializer fails the call instead, before
    its body runs.
    """  # noqa: D205 - the summary needs two lines

    __slots__ = ("_declared", "_function", "_serializer")

    def __init__(
        self,
        function: Callable[..., Any],
        declared: BaseIdempotencySerializer | type[BaseIdempotencyModelSerializer] | None,
    ) -> None:
        """Resolve the serializer of ``function``, now if its annotations allow.

        Raises:
            TypeError: ``declared`` is neither a serializer nor a ``BaseIdempotencyModelSerializer`` subclass.
            IdempotencyModelTypeError: The declared class cannot serialize the return annotation.
            IdempotencyNoSerializationModelError: A serializer class was declared without a return annotation.
        """
        from consumer.serialization import BaseIdempotencyModelSerializer, BaseIdempotencySerializer  # noqa: PLC0415
        from consumer.serialization._types import UnresolvedAnnotationError  # noqa: PLC0415 - only decorated functions need these

        is_class = isinstance(declared, type) and issubclass(declared, BaseIdempotencyModelSerializer)
        if declared is not None and not is_class and not isinstance(declared, BaseIdempotencySerializer):
            msg = f"output_serializer must be a serializer or a BaseIdempotencyModelSerializer class, not {declared!r}"
            raise TypeError(msg)
        self._function = function
        self._declared = declared
        self._serializer: BaseIdempotencySerializer | None = _UNRESOLVED
        with contextlib.suppress(UnresolvedAnnotationError):  # resolved again on the first call
            self._serializer = self._resolve()

    def serializer(self) -> BaseIdempotencySerializer | None:
        """The serializer for this call's guard.

        Raises:
            IdempotencyModelTypeError: A serializer was declared and an annotation it needs does not resolve
                (``IdempotencyNoSerializationModelError`` for a declared class).
        """
        if self._serializer is _UNRESOLVED:
            from consumer.serialization._types import UnresolvedAnnotationError, UnresolvedReturnError  # noqa: PLC0415 - see __init__

            try:
                self._serializer = self._resolve()
            except UnresolvedAnnotationError as e:
                if isinstance(self._declared, type):
                    msg = f"{e}: {self._declared.__name__} is built for it"
                    raise IdempotencyNoSerializationModelError(msg) from e
                if self._declared is not None:
                    raise
                # A return annotation imported for type checkers only is common (a TypedDict): the encoder warns
                # about a dataclass or model result itself. Unresolved fields of a dataclass return type are not.
                level = logging.DEBUG if isinstance(e, UnresolvedReturnError) else logging.WARNING
                logger.log(level, "%s: its results replay as stored (pass output_serializer= to choose)", e)
                self._serializer = None
        return self._serializer

    def _resolve(self) -> BaseIdempotencySerializer | None:
        from consumer.serialization import serializer_for  # noqa: PLC0415
        from consumer.serialization._types import NO_ANNOTATION, namespace_of, resolve_fields, return_type  # noqa: PLC0415

        declared = self._declared
        if declared is not None and not isinstance(declared, type):
            serializer: BaseIdempotencySerializer | None = declared
        else:
            annotation = return_type(self._function)
            if declared is not None:
                serializer = declared.instantiate(None if annotation is NO_ANNOTATION else annotation)
            elif annotation is NO_ANNOTATION:
                return None
            else:
                try:
                    serializer = serializer_for(annotation)
                except IdempotencyModelTypeError:  # A | B: stored as it is (a dataclass as a dict, with a warning)
                    return None
        model = getattr(serializer, "model", None)  # the type a serializer of ours rebuilds
        if model is not None:
            resolve_fields(model, namespace_of(self._function))
        return serializer
