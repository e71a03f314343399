"""Idempotency keys: select part of a record with JMESPath, serialize it canonically, hash it."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from consumer._errors import IdempotencyKeyError
from consumer._jmespath import compile_expression, search
from consumer._serde import canonical_json

if TYPE_CHECKING:
    from jmespath.parser import ParsedResult

    from consumer.config import IdempotencyConfig

#: The record's own id, by event source, used when no ``event_key_jmespath`` is configured.
DEFAULT_KEY_EXPRESSIONS = {
    "sqs": "messageId",
    "kinesis": "eventID",
    "dynamodb": "eventID",
    "eventbridge": "id",
}
_MESSAGE_ID, _EVENT_ID, _ID = (compile_expression(e) for e in ("messageId", "eventID", "id"))


def default_key_expression(data: Any) -> ParsedResult | None:
    """The expression selecting a record's own id, recognised from its shape; ``None``: the whole record.

    SQS records carry ``messageId``; Kinesis and DynamoDB Streams records ``eventID``; EventBridge events
    ``id`` beside ``detail-type``. Hashing the whole record instead would be wrong for SQS: attributes
    such as ``ApproximateReceiveCount`` change on every delivery.
    """
    if isinstance(data, Mapping):
        if "messageId" in data:
            return _MESSAGE_ID
        if "eventID" in data:
            return _EVENT_ID
        if "detail-type" in data and "id" in data:
            return _ID
    return None


def hash_value(value: Any, hash_function: str) -> str:
    """Hex digest of ``value``'s canonical JSON."""
    digest: str = _hasher(hash_function)(canonical_json(value).encode()).hexdigest()
    return digest


@functools.cache
def _hasher(name: str) -> Callable[[bytes], Any]:
    # hashlib.sha256 and friends are much cheaper to call than hashlib.new("sha256").
    constructor: Callable[[bytes], Any] | None = getattr(hashlib, name, None)
    return constructor or functools.partial(hashlib.new, name)


def plain_data(data: Any) -> Any:
    """The plain form keys are selected from (a typed record's raw event, a dataclass's fields, ``model_dump()``).

    JMESPath sees only dicts and lists, so an expression on a dataclass would select nothing; and hashing a
    typed record whole would key it on its delivery (``ApproximateReceiveCount`` changes on redelivery).
    Nested values are converted too (a typed record inside a dataclass is its raw event); anything else is
    returned as it is.

    Raises:
        IdempotencyKeyError: The plain form cannot be built (a cycle, a ``model_dump`` that raises).
    """
    if isinstance(data, (dict, str, list)):  # the usual case, first
        return data
    if getattr(type(data), "__keyed_by_raw__", False):  # a typed record: its raw event (default key: its id)
        return data.raw
    try:
        return _plain_form(data)
    except Exception as e:  # a cycle, a failing model_dump: a key error naming it
        raise IdempotencyKeyError(f"the record's plain form cannot be built: {e!r}") from e


def _plain_form(value: Any) -> Any:
    if getattr(type(value), "__keyed_by_raw__", False):  # nested: hashed whole, so without delivery fields
        return value.key_data()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain_form(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: _plain_form(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_form(v) for v in value]
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump) and not isinstance(value, type):
        return model_dump()
    return value


def is_missing(selection: Any) -> bool:
    """Whether a selection names no record: ``None``, empty, or a list/dict made only of such values.

    ``[user_id, product_id]`` on an event lacking both selects ``[None, None]``: the same for every such
    event, so treating it as a key would replay unrelated events. ``0`` and ``False`` are valid keys.
    """
    if selection is None:
        return True
    if isinstance(selection, str):
        return not selection
    if isinstance(selection, list):
        return all(map(is_missing, selection))
    if isinstance(selection, dict):
        return all(map(is_missing, selection.values()))
    return False


def select(expression: ParsedResult, data: Any, what: str) -> Any:
    """Evaluate ``expression`` on ``data``; a failure (bad JSON, bad base64) is an ``IdempotencyKeyError``."""
    try:
        return search(expression, data)
    except (ValueError, TypeError, UnicodeDecodeError) as e:
        raise IdempotencyKeyError(f"{what} {expression.expression!r} failed on the record: {e}") from e


def make_key(data: Any, config: IdempotencyConfig, prefix: str | None = None) -> str | None:
    """The key ``"{prefix}#{hash}"`` of ``data``; ``None`` when the selection is empty.

    Args:
        data: The record (or function argument).
        config: Selects and hashes.
        prefix: Overrides ``config.prefix``.

    Raises:
        IdempotencyKeyError: The expression failed, the selection is not serializable, or it is empty
            and ``config.raise_on_no_idempotency_key`` is set.
    """
    if not isinstance(data, (dict, str, list)):  # plain_data's own fast path, without the call per record
        data = plain_data(data)
    expression = config.key_expression
    if expression is None and config.event_key_jmespath is None:  # "" is the whole record, as in Powertools
        expression = default_key_expression(data)
    selection = data if expression is None else select(expression, data, "event_key_jmespath")
    if is_missing(selection):
        if config.raise_on_no_idempotency_key:
            where = "the record" if expression is None else f"{expression.expression!r}"
            raise IdempotencyKeyError(f"no idempotency key: {where} selected nothing")
        return None
    try:
        digest = hash_value(selection, config.hash_function)
    except Exception as e:  # any failure of a user-made value is a key error naming it
        raise IdempotencyKeyError(f"the idempotency key selection cannot be serialized: {e!r}") from e
    return f"{prefix or config.prefix}#{digest}"


def payload_hash(data: Any, config: IdempotencyConfig) -> str | None:
    """Hash of the ``payload_validation_jmespath`` selection, or ``None`` when validation is off."""
    if config.validation_expression is None:
        return None
    selection = select(config.validation_expression, plain_data(data), "payload_validation_jmespath")
    try:
        return hash_value(selection, config.hash_function)
    except Exception as e:  # any failure of a user-made value is a key error naming it
        raise IdempotencyKeyError(f"the payload validation selection cannot be serialized: {e!r}") from e
