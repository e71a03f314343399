"""A guard's result through its output serializer: stored on commit, replayed on a duplicate; and the serializer
that a decorated function's declaration or return annotation calls for."""  # noqa: D205, D209 - one sentence

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from consumer._errors import IdempotencyModelTypeError, IdempotencyNoSerializationModelError, ResponseDecodeError
from consumer._serde import ResultEncodingError, decode_result, encode_result

if TYPE_CHECKING:
    from collections.abc import Callable

    from consumer.serialization import BaseIdempotencyModelSerializer, BaseIdempotencySerializer
    from persistence import IdempotencyRecord, ItemTooLargeError

logger = logging.getLogger("idempotent_consumer")


def encode_output(result: Any, serializer: BaseIdempotencySerializer | None) -> str:
    """The JSON text to store for ``result``: ``serializer.to_dict(result)`` (never for ``None``), encoded.

    Raises:
        ResultEncodingError: The serializer or the encoder failed; the exception that stopped it is the cause.
    """
    if serializer is not None and result is not None:
        try:
            result = serializer.to_dict(result)
        except Exception as e:
            msg = f"{serializer!r}.to_dict failed on a result of type {type(result).__qualname__}: {e!r}"
            raise ResultEncodingError(msg) from e
    return encode_result(result)


def unstored(key: str, error: Exception) -> None:
    """Log that the result of ``key`` is committed without its response, because of ``error``."""
    cause = error if isinstance(error, ResultEncodingError) else repr(error)
    logger.warning("result of %r cannot be stored (%s): committing without it", key, cause)


def without_response(complete: IdempotencyRecord, error: ItemTooLargeError) -> IdempotencyRecord:
    """``complete`` without its response, which is too large for the store (logged)."""
    logger.warning("result of %r is too large to store (%s): committing without it", complete.key, error)
    return dataclasses.replace(complete, response=None)


def decode_output(record: IdempotencyRecord, serializer: BaseIdempotencySerializer | None) -> Any:
    """The result ``record`` replays: its stored response, through ``serializer.from_dict`` (never for ``None``).

    ``None`` when the response was not stored (``record.response`` is ``None``).

    Raises:
        ResponseDecodeError: The stored text is not a stored result, or the serializer refused it.
    """
    if record.response is None:
        return None
    try:
        value = decode_result(record.response)
        return value if serializer is None or value is None else serializer.from_dict(value)
    except Exception as e:
        by = "" if serializer is None else f" by {serializer!r}"
        msg = (
            f"the stored response of {record.key!r} cannot be replayed{by} ({type(e).__name__}: {e}); the body does "
            "not run again: make the response fit (a model or serializer that reads it), or delete the record"
        )
        raise ResponseDecodeError(msg, key=record.key, existing_record=record) from e


_UNRESOLVED: Any = object()


class FunctionOutput:
    """The output serializer of a decorated function: the one it declares, or the one its return annotation calls
    for (:func:`~consumer.serialization.serializer_for`).

    Resolved when the function is decorated. A string annotation naming a class its module defines further down
    is resolved again on the first call; one that never resolves (a name imported only under ``TYPE_CHECKING``)
    means no serializer, unless a serializer class was declared, which then fails the call.
    """  # noqa: D205 - the summary needs two lines

    __slots__ = ("_declared", "_function", "_serializer")

    def __init__(
        self,
        function: Callable[..., Any],
        declared: BaseIdempotencySerializer | type[BaseIdempotencyModelSerializer] | None,
    ) -> None:
        """Resolve the serializer of ``function``, now if its annotation allows.

        Raises:
            TypeError: ``declared`` is neither a serializer nor a ``BaseIdempotencyModelSerializer`` subclass.
            IdempotencyModelTypeError: The declared class cannot serialize the return annotation.
            IdempotencyNoSerializationModelError: A serializer class was declared without a return annotation.
        """
        from consumer._typed import return_type  # noqa: PLC0415 - only decorated functions need these
        from consumer.serialization import BaseIdempotencyModelSerializer, BaseIdempotencySerializer  # noqa: PLC0415

        is_class = isinstance(declared, type) and issubclass(declared, BaseIdempotencyModelSerializer)
        if declared is not None and not is_class and not isinstance(declared, BaseIdempotencySerializer):
            msg = f"output_serializer must be a serializer or a BaseIdempotencyModelSerializer class, not {declared!r}"
            raise TypeError(msg)
        self._function = function
        self._declared = declared
        self._serializer: BaseIdempotencySerializer | None = _UNRESOLVED
        if isinstance(declared, BaseIdempotencySerializer):
            self._serializer = declared
            return
        try:
            annotation = return_type(function)
        except Exception:  # noqa: BLE001 - text naming what is not defined yet: resolved again on the first call
            return
        self._serializer = self._for(annotation)

    def serializer(self) -> BaseIdempotencySerializer | None:
        """The serializer for this call's guard.

        Raises:
            IdempotencyNoSerializationModelError: A serializer class was declared and the annotation it needs
                does not resolve.
        """
        if self._serializer is _UNRESOLVED:
            from consumer._typed import NO_ANNOTATION, return_type  # noqa: PLC0415 - see __init__

            try:
                annotation = return_type(self._function)
            except Exception as e:
                if self._declared is not None:
                    needs = f"{self._declared.__name__} is built for it"  # type: ignore[union-attr]  # a class here
                    msg = f"the return annotation of {self._function!r} does not resolve ({e!r}): {needs}"
                    raise IdempotencyNoSerializationModelError(msg) from e
                logger.debug("return annotation of %r does not resolve: no output serializer", self._function)
                annotation = NO_ANNOTATION
            self._serializer = self._for(annotation)
        return self._serializer

    def _for(self, annotation: Any) -> BaseIdempotencySerializer | None:
        from consumer._typed import NO_ANNOTATION  # noqa: PLC0415 - see __init__
        from consumer.serialization import serializer_for  # noqa: PLC0415

        if isinstance(self._declared, type):
            return self._declared.instantiate(None if annotation is NO_ANNOTATION else annotation)
        if annotation is NO_ANNOTATION:
            return None
        try:
            return serializer_for(annotation)
        except IdempotencyModelTypeError:  # A | B: stored as it is (a dataclass as a dict, with a warning)
            return None
