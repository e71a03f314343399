"""What a key selection that selected nothing says: the expression, the record by its id, and the fix if it is known.

The commonest mistake selects into a field that holds JSON text (an SQS ``body``; a Kinesis ``data`` or a Kafka
``value``, once base64-decoded; an EventBridge ``detail`` sent as a string): ``body.order_id`` then selects nothing,
and the fix is ``powertools_json(body).order_id``. The message says so. It is built only when a selection is missing,
for the error, the warning and ``idempotent-consumer key`` alike: a record whose key is found never loads this module.
No payload value is quoted: the record is named by its id, the field by the expression's own words.
"""

from __future__ import annotations

import binascii
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jmespath.exceptions import JMESPathError
from jmespath.visitor import TreeInterpreter

from consumer._errors import DecodeLimitError
from consumer._jmespath import DEFAULT_MAX_DECODED_BYTES, Budget, decode_base64, evaluation_options, inflate, parse_json

if TYPE_CHECKING:
    from jmespath.parser import ParsedResult

# The hint decodes a producer's field as the key functions would, within their default bound: a bomb gets no hint.
_BOUND = DEFAULT_MAX_DECODED_BYTES
_CHAINS = frozenset(("subexpression", "index_expression"))  # a.b[0].c: steps, each applied to the last's value
_OF_THEIR_PARTS = frozenset(
    ("multi_select_list", "multi_select_dict", "key_val_pair", "or_expression", "and_expression")
)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_GZIP_MAGIC = b"\x1f\x8b"


def missing_key_message(
    data: Any, expression: ParsedResult | None, key_header: str | None, kafka_place: str | None
) -> str:
    """``"no idempotency key: ..."``: what selected nothing, on which record, and the fix when it is JSON text.

    Args:
        data: The record as its key is selected from (its plain form).
        expression: The key expression (``None``: the whole record).
        key_header: ``IdempotencyConfig.key_header``, when the key is a producer's.
        kafka_place: The record's place, for a Kafka record (:func:`consumer.keys.kafka_place`).
    """
    record = record_named(data, kafka_place)
    if key_header is not None:
        return f"no idempotency key: {record or 'the record'} has no producer key {key_header!r} (key_header)"
    on = f" on {record}" if record else ""
    if expression is None:  # the whole record is the key, and it is empty
        return f"no idempotency key: the record selected nothing{on}"
    said = f"no idempotency key: {expression.expression!r} selected nothing{on}"
    fix = json_text_fix(expression.parsed, data)
    return said if fix is None else f"{said}; {fix}"


def record_named(data: Any, place: str | None) -> str | None:
    """The record by its id (SQS message id, stream sequence number, Kafka place, EventBridge id), never its payload.

    ``None`` for data that carries none of these (a function's argument).
    """
    if not isinstance(data, Mapping):
        return None
    if place is not None:
        return place
    if "messageId" in data:
        return f"SQS message {data['messageId']}"
    for source, field, name in (("kinesis", "sequenceNumber", "Kinesis"), ("dynamodb", "SequenceNumber", "DynamoDB")):
        inner = data.get(source)
        if isinstance(inner, Mapping) and field in inner:
            return f"{name} record {inner[field]}"
    if "detail-type" in data and "id" in data:
        return f"EventBridge event {data['id']}"
    return None


def json_text_fix(node: Mapping[str, Any], data: Any) -> str | None:
    """Where the expression went into a field holding JSON text, the fix: ``"body holds JSON text; select ..."``.

    ``None`` when it did not, or the expression cannot be written back (a projection before the field).
    """
    if node["type"] in _OF_THEIR_PARTS:  # [body.a, messageId], {a: body.a}, body.a || x: the first part that did
        return next(filter(None, (json_text_fix(child, data) for child in node["children"])), None)
    steps = _steps(node)
    value, interpreter = data, None
    for at in range(len(steps)):
        if isinstance(value, str):
            return _fix(value, steps[:at], steps[at:])
        if value is None:
            return None
        try:
            interpreter = interpreter or _interpreter()  # one budget for the steps, as for the expression's search
            value = interpreter.visit(steps[at], value)  # type: ignore[arg-type]  # a node of a parsed expression
        except (JMESPathError, ValueError, TypeError):  # not reached on a selection that ran: said by its own error
            return None
    return None


def _steps(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    # body.items[0].id: [body, items, [0], id], each applied to the value of the steps before it.
    if node["type"] in _CHAINS:
        return [step for child in node["children"] for step in _steps(child)]
    return [node]


def _fix(text: str, before: list[Mapping[str, Any]], after: list[Mapping[str, Any]]) -> str | None:
    decoded = _json_text(text)
    if decoded is None:
        return None
    holds, function = decoded
    try:
        field = "".join(_written(step, first=at == 0) for at, step in enumerate(before)) or "@"
    except KeyError:  # a node this cannot write back (a projection): no fix is better than a wrong one
        return None
    try:
        inside = "".join(_written(step, first=False) for step in after)
    except KeyError:  # the rest cannot be written back: the fix names the function, the user adds the rest
        inside = ""
    return f"{field} holds {holds}; select inside it with {function.format(field)}{inside}"


def _interpreter() -> TreeInterpreter:
    # JMESPath's walk with the key functions, on a budget of their own (one per hint, as one per search).
    return TreeInterpreter(evaluation_options(_BOUND))


def _json_text(text: str) -> tuple[str, str] | None:
    # What ``text`` holds, and the functions that reach into it: JSON text, or base64 (gzipped or not) of it.
    if _is_json_container(text):
        return "JSON text", "powertools_json({})"
    try:
        raw = decode_base64(text, budget := Budget(_BOUND), "powertools_base64")
    except (binascii.Error, ValueError, DecodeLimitError):
        return None
    holds, function = "base64-encoded JSON text", "powertools_json(powertools_base64({}))"
    if raw.startswith(_GZIP_MAGIC):
        holds, function = "base64-encoded gzip JSON text", "powertools_json(powertools_base64_gzip({}))"
        try:
            raw = inflate(raw, budget, "powertools_base64_gzip")
        except (OSError, EOFError, DecodeLimitError):
            return None
    return (holds, function) if _is_json_container(raw) else None


def _is_json_container(text: str | bytes) -> bool:
    # An object or an array: only those have fields or items to select.
    opening = ("{", "[") if isinstance(text, str) else (b"{", b"[")
    if text.lstrip()[:1] not in opening:
        return False
    try:
        parsed = parse_json(text if isinstance(text, str) else text.decode(), Budget(_BOUND), "powertools_json")
    except (ValueError, UnicodeDecodeError, RecursionError, DecodeLimitError):
        return False
    return isinstance(parsed, (dict, list))


def _written(step: Mapping[str, Any], *, first: bool) -> str:
    # The step as JMESPath text, with the "." that joins it to the steps before it (none before the first).
    kind = step["type"]
    if kind == "index":
        return f"[{step['value']}]"
    text = _WRITERS[kind](step)
    return text if first else f".{text}"


def _field(node: Mapping[str, Any]) -> str:
    name: str = node["value"]
    return name if _IDENTIFIER.fullmatch(name) else json.dumps(name)


def _function(node: Mapping[str, Any]) -> str:
    return f"{node['value']}({', '.join(_argument(child) for child in node['children'])})"


def _argument(node: Mapping[str, Any]) -> str:
    steps = _steps(node)
    return "".join(_written(step, first=at == 0) for at, step in enumerate(steps))


def _literal(node: Mapping[str, Any]) -> str:
    return "`" + json.dumps(node["value"]).replace("`", "\\`") + "`"


_WRITERS = {
    "field": _field,
    "function_expression": _function,
    "current": lambda _: "@",
    "identity": lambda _: "@",
    "literal": _literal,
}
