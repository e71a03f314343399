"""Idempotency keys: select part of a record with JMESPath, serialize it canonically, hash it."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from jmespath.exceptions import JMESPathTypeError

from consumer._errors import DecodeLimitError, IdempotencyKeyError
from consumer._jmespath import compile_expression, search
from consumer._serde import OwnIdKey, canonical_json

if TYPE_CHECKING:
    from jmespath.parser import ParsedResult

    from consumer.config import IdempotencyConfig

#: The record's own id, by event source, used when no ``event_key_jmespath`` is configured.
DEFAULT_KEY_EXPRESSIONS = {
    "sqs": "messageId",
    # A stream record's eventID is unique within its stream only (two streams each have a shardId-000000000000:1):
    # with the stream's ARN, as a Kafka record's place is with its cluster. A record without an eventID has no key.
    "kinesis": "eventID && [eventSourceARN, eventID]",
    "dynamodb": "eventID && [eventSourceARN, eventID]",
    "eventbridge": "id",
    # A Kafka record has no id of its own: its place in the log is one, the same on every redelivery, with its
    # cluster (another cluster has an orders-0 too): MSK's ARN (its broker list may change), else the self-managed
    # mapping's bootstrap servers. A producer's retry is a new record at a new offset: key those on the payload or
    # on a header (IdempotencyConfig.key_header).
    "kafka": "[eventSourceArn || bootstrapServers, topic, partition, offset]",
}


@functools.cache
def _own_id(source: str) -> ParsedResult:
    """The compiled expression of ``source``'s own id: compiled on first use, not with every cold start."""
    return compile_expression(DEFAULT_KEY_EXPRESSIONS[source])


def default_key_expression(data: Any) -> ParsedResult | None:
    """The expression selecting a record's own id, recognised from its shape; ``None``: the whole record.

    SQS records carry ``messageId``; Kinesis and DynamoDB Streams records ``eventID`` (keyed with their
    ``eventSourceARN``); EventBridge events ``id`` beside ``detail-type``; Kafka records ``topic``, ``partition`` and
    ``offset`` (keyed with their cluster). Hashing the whole
    record instead would be wrong for SQS: attributes such as ``ApproximateReceiveCount`` change on every delivery.
    """
    if isinstance(data, Mapping):
        if "messageId" in data:
            return _own_id("sqs")
        if "eventID" in data:
            return _own_id("kinesis")
        if "detail-type" in data and "id" in data:
            return _own_id("eventbridge")
        if "topic" in data and "partition" in data and "offset" in data:
            return _own_id("kafka")
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
    returned as it is. A dict or a list is walked once and returned itself when nothing in it needs converting
    (plain JSON data); what does is converted as the key's canonical JSON has it (:func:`_nested`), so a key
    that selected a whole dataclass before keeps its value.

    Raises:
        IdempotencyKeyError: The plain form cannot be built (a cycle, a ``model_dump`` that raises).
    """
    if isinstance(data, (dict, list)):  # the usual case: one walk, the same object back for plain data
        try:
            return _nested(data)
        except RecursionError:  # too deep to walk: selected from as it is, as JMESPath and the hash take it
            return data
    if isinstance(data, str):
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


def selectable(data: Any, expression: ParsedResult | None) -> Any:
    """:func:`plain_data` of ``data`` for ``expression`` to select from (``None``: the whole record is hashed).

    A dict or a list is walked only for an expression that looks inside its values: one that selects top-level
    fields (the usual key), the whole record or a producer's header selects the same from it as it is, and its
    canonical JSON hashes a nested dataclass, model or typed record as :func:`plain_data` converts it.
    """
    if isinstance(data, (dict, list)) and (expression is None or not _looks_inside(expression)):
        return data
    return plain_data(data)


def _looks_inside(expression: ParsedResult) -> bool:
    known = _LOOKS_INSIDE.get(expression.expression)
    if known is None:
        known = _LOOKS_INSIDE[expression.expression] = _node_looks_inside(expression.parsed)
    return known


_LOOKS_INSIDE: dict[str, bool] = {}  # by expression text: a few per function
_TOP_LEVEL = frozenset(("field", "current", "literal"))
_OF_THEIR_PARTS = frozenset(("multi_select_list", "or_expression", "and_expression", "not_expression"))


def _node_looks_inside(node: Mapping[str, Any]) -> bool:
    # Whether a parsed expression reads a value below the top level of the record (a.b, a[0], json_parse(body)).
    kind = node["type"]
    if kind in _TOP_LEVEL:
        return False
    if kind in _OF_THEIR_PARTS or (kind == "function_expression" and node["value"] == "header"):
        return any(_node_looks_inside(child) for child in node["children"])
    return True


_LEAVES = frozenset((str, int, float, bool, type(None)))
_MAX_DEPTH = 64  # deeper, values are left as they are


def _nested(value: Any, depth: int = 0, memo: _Memo | None = None) -> Any:
    # ``value``, or a copy in which each dataclass, model and typed record is what canonical_json hashes it as
    # (its fields, model_dump(mode="json"), key_data()), so that JMESPath sees into it and a selection of the
    # whole of one hashes as before. Plain data comes back itself, each container checked in C first; sets stay
    # (JMESPath does not index them); a model_dump that raises leaves its model as it is, hashed as before.
    # What an object converts to depends on it and its depth only (past _MAX_DEPTH it is left as it is): each
    # (object, depth) is converted once (``memo``, which holds the object so that its id is not reused), so
    # parts shared by many paths, or a cycle, cost at most one walk per depth, not one per path.
    if memo is None:
        memo = {}
    seen = memo.get((id(value), depth))
    if seen is not None:
        return seen[1]
    converted = _converted(value, depth, memo)
    memo[id(value), depth] = (value, converted)
    return converted


_Memo = dict[tuple[int, int], tuple[Any, Any]]


def _converted(value: Any, depth: int, memo: _Memo) -> Any:  # noqa: PLR0911 - one per form
    if isinstance(value, dict):
        if depth > _MAX_DEPTH or _LEAVES.issuperset(map(type, value.values())):
            return value
        return _copied(value, value.items(), depth, dict, memo)
    if isinstance(value, (list, tuple)):
        if depth > _MAX_DEPTH or _LEAVES.issuperset(map(type, value)):
            return value
        return _copied(value, enumerate(value), depth, list, memo)  # a tuple as canonical_json writes it
    if getattr(type(value), "__keyed_by_raw__", False):
        return _nested(value.key_data(), depth + 1, memo)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _nested({f.name: getattr(value, f.name) for f in dataclasses.fields(value)}, depth + 1, memo)
    if hasattr(value, "model_dump") and not isinstance(value, type):
        try:
            return value.model_dump(mode="json")
        except Exception:  # noqa: BLE001 - left as it is: hashing it, if it is selected, says why
            return value
    return value


def _copied(value: Any, items: Any, depth: int, kind: type, memo: _Memo) -> Any:
    # The container with its converted items, or itself when none is.
    copy: Any = None
    for at, item in items:
        if type(item) in _LEAVES:
            continue
        converted = _nested(item, depth + 1, memo)
        if converted is not item:
            if copy is None:
                copy = kind(value)
            copy[at] = converted
    return value if copy is None else copy


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


def kafka_place(data: Any) -> str | None:
    """``"Kafka record <topic>-<partition>@<offset>"`` for a Kafka record (how key errors name it), else ``None``.

    A Kafka record has no id of its own, and a failing one holds back the rest of its partition: the operator needs
    its place in the log to find it.
    """
    if isinstance(data, Mapping) and "topic" in data and "offset" in data:
        return f"Kafka record {data.get('topic')}-{data.get('partition')}@{data.get('offset')}"
    return None


def failure_said(error: BaseException) -> str:
    """What a log line may say of ``error``, raised selecting from a record, without quoting the record.

    JMESPath's type error holds the value it was given (the payload) in its text: it is said by its function and
    types (``powertools_json() takes string, got object``). Any other error is said by its type alone.
    """
    if isinstance(error, JMESPathTypeError):
        return f"{error.function_name}() takes {', '.join(error.expected_types)}, got {error.actual_type}"
    return type(error).__name__


def record_named(data: Any) -> str:
    """How a key error names the record ``data``: its place for Kafka, else its own id, else ``"the record"``."""
    place = kafka_place(data)
    if place is not None:
        return place
    own = default_key_expression(data)
    own_id = None if own is None else data.get(own.expression)
    return f"record {own_id!r}" if isinstance(own_id, str) else "the record"


def select(expression: ParsedResult, data: Any, what: str, config: IdempotencyConfig) -> Any:
    """Evaluate ``expression`` on ``data``; a failure (bad JSON, bad base64, too deep) is an ``IdempotencyKeyError``.

    The expression's functions decode at most ``config.max_decoded_bytes``; past it, a :class:`DecodeLimitError`.
    """
    try:
        return search(expression, data, config.search_options)
    except JMESPathTypeError as e:
        # Its text, and so a traceback showing it as the cause, holds the value it was given: the payload.
        # Name the function and the types only, and leave the cause out of the chain.
        message = f"{what} {expression.expression!r} failed on {record_named(data)}: {failure_said(e)}"
        raise IdempotencyKeyError(message) from None
    except DecodeLimitError as e:  # the same error, saying which expression and which record
        message = f"{what} {expression.expression!r} failed on {record_named(data)}: {e}"
        raise DecodeLimitError(message, function=e.function, limit=e.limit) from None
    except (ValueError, TypeError, RecursionError) as e:  # RecursionError: JSON nested past the stack, a record's too
        raise IdempotencyKeyError(f"{what} {expression.expression!r} failed on {record_named(data)}: {e}") from e


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
    expression = config.key_expression
    if expression is not None and type(data) is dict and expression.parsed["type"] == "field":
        selection = data.get(expression.parsed["value"])  # the usual key (messageId): what key_selection finds
    else:
        selection, _ = key_selection(data, config)
    if is_missing(selection):
        if config.raise_on_no_idempotency_key:
            raise _no_key(data, config)
        return None
    try:
        digest = hash_value(selection, config.hash_function)
    except Exception as e:  # any failure of a user-made value is a key error naming it
        raise IdempotencyKeyError(f"the idempotency key selection cannot be serialized: {e!r}") from e
    return f"{prefix or config.prefix}#{digest}"


def key_selection(data: Any, config: IdempotencyConfig) -> tuple[Any, bool]:
    """What the key of ``data`` hashes, and whether it is the record's own id in place of a missing header.

    The selection is ``config``'s expression's, the whole record for ``event_key_jmespath=""``, or the record's own
    id by default, selected from ``data`` as JMESPath sees it (dataclasses, models and typed records as their
    fields). With ``key_header``, a record without that header is keyed by its own id (the second value is then
    true), so that a redelivery still replays: tagged (:class:`~consumer._serde.OwnIdKey`), so that no producer
    claims it by sending that id as its header. A selection that :func:`is_missing` makes no key.

    Raises:
        IdempotencyKeyError: The expression failed on ``data``.
    """
    data, expression = _selected_from(data, config)
    selection = data if expression is None else select(expression, data, "event_key_jmespath", config)
    if is_missing(selection) and config.key_header is not None and not config.raise_on_no_idempotency_key:
        # No producer key on this record: its own id still keys it, so a redelivery replays rather than runs again.
        own_id = default_key_expression(data)
        found = None if own_id is None else select(own_id, data, "the record's own id", config)
        return (None if is_missing(found) else OwnIdKey(id=found)), True
    return selection, False


def _selected_from(data: Any, config: IdempotencyConfig) -> tuple[Any, ParsedResult | None]:
    # The form of ``data`` the key is selected from, and the expression selecting it (None: the whole record).
    expression = config.key_expression
    if expression is None and config.event_key_jmespath is None:  # "" is the whole record, as in Powertools
        if type(data) is not dict:  # a record as Lambda delivers it is a dict: its own id is one of its fields
            data = selectable(data, None)
        return data, default_key_expression(data)
    return selectable(data, expression), expression


def missing_key_message(data: Any, config: IdempotencyConfig) -> str:
    """Why ``data`` has no key under ``config``: the expression, the record by its id, and the fix when one is known.

    Built only when a selection is missing (the error, the unguarded warning, ``idempotent-consumer key``): where
    the selection went into a field holding JSON text (an SQS ``body``), it names ``powertools_json(...)``.
    """
    from consumer.sources._missing_key import missing_key_message as message  # noqa: PLC0415 - the failure path only

    data, expression = _selected_from(data, config)
    return message(data, expression, config.key_header, kafka_place(data))  # the wing imports no core module back


def _no_key(data: Any, config: IdempotencyConfig) -> IdempotencyKeyError:
    return IdempotencyKeyError(missing_key_message(data, config))


def payload_hash(data: Any, config: IdempotencyConfig) -> str | None:
    """Hash of the ``payload_validation_jmespath`` selection, or ``None`` when validation is off."""
    if config.validation_expression is None:
        return None
    expression = config.validation_expression
    selection = select(expression, selectable(data, expression), "payload_validation_jmespath", config)
    try:
        return hash_value(selection, config.hash_function)
    except Exception as e:  # any failure of a user-made value is a key error naming it
        raise IdempotencyKeyError(f"the payload validation selection cannot be serialized: {e!r}") from e
