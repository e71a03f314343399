"""JMESPath with the custom functions users need to reach into SQS bodies and Kinesis data."""

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

    _func_powertools_json = _func_json_parse
    _func_powertools_base64 = _func_base64_decode
    _func_powertools_base64_gzip = _func_base64_gzip_decode


OPTIONS = jmespath.Options(custom_functions=_Functions())


def compile_expression(expression: str) -> jmespath.parser.ParsedResult:
    """Compile ``expression`` (raises ``jmespath.exceptions.ParseError`` when it is not JMESPath)."""
    return jmespath.compile(expression)


def search(expression: jmespath.parser.ParsedResult, data: Any) -> Any:
    """Evaluate a compiled expression with the custom functions.

    A bare field name (``messageId``, the usual key) is looked up directly: same result, no tree walk.
    """
    node = expression.parsed
    if node["type"] == "field" and isinstance(data, dict):
        return data.get(node["value"])
    return expression.search(data, options=OPTIONS)  # other Mappings too (MappingProxyType, UserDict)
