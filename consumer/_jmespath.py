"""JMESPath with the custom functions users need to reach into SQS bodies, Kinesis data and producers' headers."""

from __future__ import annotations

import base64
import gzip
import json
import operator
import zlib
from typing import TYPE_CHECKING, Any

import jmespath
from jmespath import functions

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping


class _Functions(functions.Functions):
    # Each function has a Powertools alias, so Powertools expressions work unchanged.

    @functions.signature({"types": ["string"]})
    def _func_json_parse(self, value: str) -> Any:
        return json.loads(value)

    # A decoder's error may quote the bytes it refused (gzip's "Not a gzipped file (b'SE')", UTF-8's "can't
    # decode byte 0xff"): these are the payload's, and key errors are logged. Said by type and place instead.

    @functions.signature({"types": ["string"]})
    def _func_base64_decode(self, value: str) -> str:
        return _text(base64.b64decode(value, validate=True))

    @functions.signature({"types": ["string"]})
    def _func_base64_gzip_decode(self, value: str) -> str:
        data = base64.b64decode(value, validate=True)
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:  # BadGzipFile is an OSError
            failed = type(e).__name__
        else:
            return _text(data)
        msg = f"not gzip data ({failed})"
        raise ValueError(msg)  # outside the handler: the error that quotes the bytes is not its context

    @functions.signature({"types": ["object"]}, {"types": ["string"]})
    def _func_header(self, record: Any, name: str) -> Any:
        # header(@, 'Idempotency-Key'): a Kafka header, an SQS message attribute, an EventBridge detail field.
        from consumer._headers import producer_header  # noqa: PLC0415 - by the first header(): most keys never call it

        return producer_header(record, name)

    _func_powertools_json = _func_json_parse
    _func_powertools_base64 = _func_base64_decode
    _func_powertools_base64_gzip = _func_base64_gzip_decode


def _text(data: bytes) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError as e:
        at = e.start
    msg = f"the decoded bytes are not UTF-8 text (at byte {at})"
    raise ValueError(msg)  # outside the handler: the error that quotes the byte is not its context


OPTIONS = jmespath.Options(custom_functions=_Functions())


def compile_expression(expression: str) -> jmespath.parser.ParsedResult:
    """Compile ``expression`` (raises ``jmespath.exceptions.ParseError`` when it is not JMESPath)."""
    return jmespath.compile(expression)


def search(expression: jmespath.parser.ParsedResult, data: Any) -> Any:
    """Evaluate a compiled expression with the custom functions.

    A bare field name (``messageId``, the usual key), a list of them (``[topic, partition, offset]``) and ``a && b``
    of those (``eventID && [eventSourceARN, eventID]``) are looked up directly: same result, no tree walk.
    """
    if isinstance(data, dict):
        text = expression.expression
        lookup = _LOOKUPS.get(text)
        if lookup is None and text not in _LOOKUPS:
            lookup = _LOOKUPS[text] = _lookup(expression.parsed)
        if lookup is not None:
            return lookup(data)
    return expression.search(data, options=OPTIONS)  # other Mappings too (MappingProxyType, UserDict)


_LOOKUPS: dict[str, Callable[[dict[str, Any]], Any] | None] = {}  # by expression text (a few); None: the tree walk


def _lookup(node: Mapping[str, Any]) -> Callable[[dict[str, Any]], Any] | None:
    """A function selecting what the parsed expression ``node`` selects from a dict, or ``None``: walk the tree."""
    kind, children = node["type"], node.get("children", ())
    if kind == "field":
        return operator.methodcaller("get", node["value"])
    if kind == "multi_select_list" and all(child["type"] == "field" for child in children):
        names = [child["value"] for child in children]
        return lambda data: list(map(data.get, names))
    if kind == "and_expression":
        left, right = _lookup(children[0]), _lookup(children[1])
        if left is None or right is None:
            return None
        return lambda data: right(data) if _truthy(found := left(data)) else found
    return None


def _truthy(value: Any) -> bool:
    # JMESPath's truth: false, null, and an empty string, list or object are false; 0 is true.
    return bool(value) if type(value) in _SIZED else value is not None and value is not False


_SIZED = frozenset((str, list, dict))
