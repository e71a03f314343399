"""Errors and outcomes of the consumer side; all errors derive from :class:`persistence.IdempotencyError`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from persistence import IdempotencyError, PersistenceLayerError

if TYPE_CHECKING:
    from consumer.batch import PartialBatchResponse
    from persistence import IdempotencyRecord

_ERRORS_SHOWN = 3  # causes named in a BatchProcessingError's message (all are in .errors)


class IdempotencyKeyError(IdempotencyError):
    """The idempotency key could not be selected from the record (missing, or the expression failed)."""


class DecodeLimitError(IdempotencyKeyError):
    """A key expression's decoder met more than ``max_decoded_bytes`` of a record's data: the record fails alone.

    A gzip body that inflates past the limit (a bomb), or a JSON text too long or with too many values to parse
    within it. The message names the function, the limit and the record, never the data.

    Attributes:
        function: The JMESPath function that refused (``base64_gzip_decode``, ``json_parse``, ...).
        limit: The ``max_decoded_bytes`` in force.
    """

    def __init__(self, message: str, *, function: str, limit: int) -> None:
        """Build the error.

        Args:
            message: What was refused, naming the function and the limit.
            function: The JMESPath function that refused.
            limit: The ``max_decoded_bytes`` in force.
        """
        super().__init__(message)
        self.function = function
        self.limit = limit


class IdempotencyConfigError(IdempotencyError, ValueError):
    """The configuration is invalid (bad JMESPath, unknown hash function, non-positive duration)."""


class IdempotencyAlreadyInProgressError(IdempotencyError):
    """Another invocation holds a live lock on this key; retry after its deadline.

    ``existing_record.in_progress_expires_at`` is the deadline, in epoch milliseconds.
    """


class IdempotencyValidationError(IdempotencyError):
    """A record with this key was stored for a different payload (``payload_validation_jmespath``)."""


class AlreadyProcessed(Exception):  # noqa: N818 - an outcome, not an error: the record succeeded before
    """Raised by :meth:`IdempotencyGuard.__enter__` for a record that already completed: the body did not run.

    This is success, not failure; it derives from ``Exception``, not from ``IdempotencyError``.

    Attributes:
        key: The idempotency key.
        response: The first run's result (``response_hook`` applied); ``None`` when it was not stored.
        response_stored: Whether the first run's result was stored (``False`` for unserializable or
            oversized results, committed without it).
        record: The stored ``COMPLETE`` record.
    """

    def __init__(self, key: str, response: Any, record: IdempotencyRecord) -> None:
        """Build the outcome.

        Args:
            key: The idempotency key.
            response: The stored result, decoded.
            record: The stored record.
        """
        super().__init__(f"{key!r} was already processed")
        self.key = key
        self.response = response
        self.response_stored = record.response is not None
        self.record = record


class NestedReplayError(IdempotencyError):
    """An :class:`AlreadyProcessed` escaped the body of another guard: a nested step replayed.

    Only a guard's own ``__enter__`` means "this record is done". A replay of a step guarded *inside* the
    body (one guard per line item, per downstream call) that is not caught there skips the rest of the body,
    so the outer record has failed, not completed: its lock is released and this error propagates. Catch
    ``AlreadyProcessed`` around the inner ``with`` block to carry on after a replayed step.

    ``key`` is the outer guard's key (``None`` when it ran unguarded), ``existing_record`` the nested step's
    ``COMPLETE`` record, and ``__cause__`` the nested :class:`AlreadyProcessed`.
    """

    @classmethod
    def escaping(cls, key: str | None, replay: AlreadyProcessed) -> NestedReplayError:
        """The error for ``replay``, a nested guard's, escaping the body of the guard of ``key`` (raise it from it)."""
        return cls(
            f"a nested guard's replay of {replay.key!r} escaped the body of {key!r}: the body did not finish, so "
            "the record failed (catch AlreadyProcessed around the nested guard to carry on)",
            key=key,
            existing_record=replay.record,
        )


class InvalidResultError(IdempotencyError, TypeError):
    """A guarded body's result was a coroutine, awaitable or generator: the work it stands for never ran.

    Committing it would mark the record done without running it, so the lock is released instead (the
    coroutine or generator is closed) and the record fails.
    """


class DataArgumentError(IdempotencyError, TypeError, RuntimeError):
    """An ``@idempotent_function`` was called without its data as the keyword argument it names: nothing ran.

    A ``TypeError`` here (a call that does not fit the function) and a ``RuntimeError`` as Powertools raises it,
    so an ``except`` written for either catches it.
    """


class IdempotencyModelTypeError(IdempotencyConfigError, TypeError):
    """An output serializer was given a type it cannot serialize (not a dataclass, not a Pydantic model, a union)."""


class IdempotencyNoSerializationModelError(IdempotencyConfigError):
    """An output serializer class was given to ``@idempotent_function`` but its function has no return annotation.

    The class (``DataclassSerializer``, ``PydanticSerializer``) is built for the annotated return type; annotate
    the function, or pass a serializer built for the type (``DataclassSerializer(Order)``).
    """


class ResponseDecodeError(IdempotencyError, ValueError):
    """A completed record's stored response cannot be replayed: it is not JSON, or it no longer fits the output
    serializer (the model changed since the record was written).

    The body does not run again (its side effect happened): the record fails with this error until the stored
    response fits again (deploy a model, or a serializer, that reads it), it expires, or it is deleted
    (``idempotent-consumer records delete KEY``). ``key`` names the record and ``existing_record`` holds it. The
    message says what did not fit, by type and place (``Order.lines[0]: a Line does not replay: ...``); the
    serializer's error is not chained (neither ``__cause__`` nor ``__context__``): its text, a Pydantic
    ``input_value`` for one, quotes the stored response, and a logged traceback would print it.
    """  # noqa: D205 - the summary needs two lines


class BatchProcessingError(IdempotencyError):
    """Every record of the batch failed. ``errors`` maps each record's identifier to its cause.

    Its subclass :class:`UnexpectedBatchTypeError` says the event could not be answered record by record at all.

    Attributes:
        errors: ``(item identifier, exception)`` for every failed record (empty for an unusable event).
        response: The partial batch response that would have been returned; ``None`` for an unusable event, which
            has none: let that error fail the invocation (a ``None`` returned to Lambda reads as a success).
    """

    response: PartialBatchResponse | None

    def __init__(self, errors: list[tuple[str, BaseException]], response: PartialBatchResponse) -> None:
        """Build the error from every record's cause."""
        shown = "; ".join(f"{item_id}: {error!r}" for item_id, error in errors[:_ERRORS_SHOWN])
        more = "; ..." if len(errors) > _ERRORS_SHOWN else ""
        # Powertools' first words: code may match on them.
        super().__init__(f"All records failed processing. {len(errors)} records, their causes: {shown}{more}")
        self.errors = errors
        self.response = response


class UnexpectedBatchTypeError(BatchProcessingError, ValueError):
    """The event cannot be answered record by record, so the invocation fails and the whole batch comes back.

    An event without its records (no ``Records`` list, a Kafka event without its ``records`` object, or with
    none in it), or a record that cannot be read or lacks its identifier, is not a batch Lambda sends. This is
    Powertools' name and place: a :class:`BatchProcessingError` (``errors`` empty, ``response`` ``None``), and
    also a ``ValueError``. ``BatchEventError`` is another name of this class.
    """

    def __init__(self, message: str) -> None:
        """Build the error.

        Args:
            message: What is wrong with the event, naming the record where one is at fault.
        """
        IdempotencyError.__init__(self, message)
        self.errors = []
        self.response = None


#: Our first name of :class:`UnexpectedBatchTypeError` (the same class).
BatchEventError = UnexpectedBatchTypeError


# -- Powertools' names ------------------------------------------------------------------------------------------
# Code written for Powertools imports and catches these. Where we raise the same condition, the name is an alias
# of our class (``except`` catches what it caught there); where the condition cannot happen here, the class exists
# so that the import and the ``except`` clause keep working, and says why it is never raised.

#: Powertools' name for :class:`~persistence.PersistenceLayerError`: the store could not be read or written.
IdempotencyPersistenceLayerError = PersistenceLayerError
#: Powertools raises it when its Redis client cannot connect; here every store failure, a connection's included, is
#: a :class:`~persistence.PersistenceLayerError` (this name is an alias of it).
IdempotencyPersistenceConnectionError = PersistenceLayerError


class IdempotencyItemAlreadyExistsError(IdempotencyError):
    """Never raised here: a refused acquire returns the stored record in the same round trip.

    Powertools raises it inside its persistence layer when a put finds a record; what reaches your code is the
    outcome, as here: :class:`AlreadyProcessed` (the stored result replays) or
    :class:`IdempotencyAlreadyInProgressError`.
    """


class IdempotencyItemNotFoundError(IdempotencyError):
    """Never raised here: a store's ``get`` returns ``None`` for a key it does not hold."""


class IdempotencyInconsistentStateError(IdempotencyError):
    """Never raised here: the lock is taken, or the blocking record returned, by one atomic conditional write.

    Powertools puts, then reads the record in a second request, and raises this when the two disagree.
    """


class IdempotencyInvalidStatusError(IdempotencyError):
    """Never raised here: a stored item whose status this library did not write is a ``PersistenceLayerError``."""


class IdempotencyPersistenceConfigError(IdempotencyError):
    """Never raised here: a store built with an unusable configuration raises ``ValueError`` when it is built."""


class IdempotencyPersistenceConsistencyError(IdempotencyError):
    """Never raised here: Powertools' Redis layer raises it for a record it cannot read back consistently."""
