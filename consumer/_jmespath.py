"""JMESPath with the custom functions users need to reach into SQS bodies, Kinesis data and producers' headers."""

from __future__ import annotations

import base64
import gzip
import json
import zlib
from typing import Any

import jmespath
from jmespath import functions


class _Functions(functions.Functions):
    # Each function has a Powertools alias, so Powertools expressions work unchanged.

    @functions.signature({"types": ["string"]})
    def _func_json_parse(self, value: str) -> Any:
        return json.loads(value)

    @functions.signature({"types": ["string"]})
    def _func_base64_decode(self, value: str) -> str:
        return base64.b64decode(value, validate=True).decode()

    @functions.signature({"types": ["string"]})
    def _func_base64_gzip_decode(self, value: str) -> str:
        try:
            return gzip.decompress(base64.b64decode(value, validate=True)).decode()
        except (OSError, EOFError, zlib.error) as e:  # BadGzipFile is an OSError
            msg = f"not gzip data: {e}"
            raise ValueError(msg) from e

    @functions.signature({"types": ["object"]}, {"types": ["string"]})
    def _func_header(self, record: Any, name: str) -> Any:
        # header(@, 'Idempotency-Key'): a Kafka header, an SQS message attribute, an EventBridge detail field.
        from consumer._headers import producer_header  # noqa: PLC0415 - by the first header(): most keys never call it

        return producer_header(record, name)

    _func_powertools_json = _func_json_parse
    _func_powertools_base64 = _func_base64_decode
    _func_powertools_base64_gzip = _func_base64_gzip_decode


OPTIONS = jmespath.Options(custom_functions=_Functions())


def compile_expression(expression: str) -> jmespath.parser.ParsedResult:
    """Compile ``expression`` (raises ``jmespath.exceptions.ParseError`` when it is not JMESPath)."""
    return jmespath.compile(expression)


def search(expression: jmespath.parser.ParsedResult, data: Any) -> Any:
    """Evaluate a compiled expression with the custom functions.

    A bare field name (``messageId``, the usual key) and a list of them (``[topic, partition, offset]``)
    are looked up directly: same result, no tree walk.
    """
    node = expression.parsed
    if isinstance(data, dict):
        if node["type"] == "field":
            return data.get(node["value"])
        if node["type"] == "multi_select_list" and all(child["type"] == "field" for child in node["children"]):
            return [data.get(child["value"]) for child in node["children"]]
    return expression.search(data, options=OPTIONS)  # other Mappings too (MappingProxyType, UserDict)
