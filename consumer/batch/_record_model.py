"""``BatchProcessor(event_type, model=...)``: the record handler gets the record parsed into a Pydantic model.

Pydantic is the user's (Powertools' parser models are Pydantic models): nothing here imports it. A model is any
class with ``model_validate`` (Pydantic 2). The record is parsed inside its guard, after the lock is taken: a
record that completed before replays without being parsed again, and one that does not fit the model fails alone,
its lock released, with a :class:`RecordModelError` that names the record and the fields, never their values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from consumer.sources import EventType
from persistence import IdempotencyError

if TYPE_CHECKING:
    from consumer.observability import Item

_FIELDS_SHOWN = 5  # failing fields named in the message (all are in .errors)


class RecordModelError(IdempotencyError, ValueError):
    """A batch record does not fit the processor's ``model``: it fails alone, reported for redelivery.

    The message names the record, the model and the failing fields with what is wrong with each; it quotes none
    of the record's values (Pydantic's own message does), so the validation error is not chained.

    Attributes:
        item_identifier: The record's identifier in ``batchItemFailures``.
        model: The model class.
        errors: ``(field path, error type)`` for each failing field, as Pydantic reports them
            (``(("body", "amount"), "missing")``).
    """

    def __init__(self, item_identifier: str, model: type[Any], errors: list[tuple[tuple[Any, ...], str]]) -> None:
        """Build the error.

        Args:
            item_identifier: The record's identifier.
            model: The model class.
            errors: ``(field path, error type)`` for each failing field.
        """
        fields = "; ".join(f"{'.'.join(map(str, loc)) or '(record)'}: {kind}" for loc, kind in errors[:_FIELDS_SHOWN])
        more = "; ..." if len(errors) > _FIELDS_SHOWN else ""
        detail = f": {fields}{more}" if errors else ""
        name = getattr(model, "__qualname__", repr(model))
        super().__init__(f"record {item_identifier} does not fit {name} ({len(errors)} errors{detail})")
        self.item_identifier = item_identifier
        self.model = model
        self.errors = errors


def check_model(model: Any) -> None:
    """Refuse what cannot parse a record: a class with ``model_validate`` (a Pydantic 2 model) is needed.

    Raises:
        TypeError: ``model`` is not such a class.
    """
    if model is not None and not (isinstance(model, type) and callable(getattr(model, "model_validate", None))):
        msg = f"model must be a Pydantic model class (with model_validate), got {model!r}"
        raise TypeError(msg)


def parsed(model: type[Any], event_type: EventType, item: Item) -> Any:
    """``item``'s record as ``model``, validated from the record as its event carries it.

    Raises:
        RecordModelError: The record does not fit the model (Pydantic's ``ValidationError``, or any ``ValueError``
            of ``model_validate``).
    """
    raw: Any = item.raw
    if event_type is EventType.KAFKA:
        from consumer.sources._kafka import as_delivered  # noqa: PLC0415 - with the first Kafka batch: SQS never needs it

        raw = as_delivered(raw)
    try:
        return model.model_validate(raw)
    except ValueError as e:  # pydantic.ValidationError is one
        errors = _errors(e)
    # Not chained: the validation error's text quotes the record's values, and a failed record's traceback is logged.
    raise RecordModelError(item.item_id, model, errors) from None


def _errors(error: ValueError) -> list[tuple[tuple[Any, ...], str]]:
    """Each failing field's path and error type, read from a Pydantic ``ValidationError`` without its inputs."""
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return []
    try:
        found = errors(include_url=False, include_context=False, include_input=False)
    except TypeError:  # not Pydantic's: no details
        return []
    return [(tuple(e.get("loc", ())), str(e.get("type", "invalid"))) for e in found if isinstance(e, dict)]
