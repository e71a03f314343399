"""JMESPath with the custom functions users need to reach into SQS bodies, Kinesis data and producers' headers.

The decoding functions are bounded (``IdempotencyConfig.max_decoded_bytes``), and so are the cut-over's (which
share the helpers here): a record is data a producer controls, and one that inflates or parses past the bound fails
alone with a :class:`~consumer.DecodeLimitError` instead of taking the invocation, and its batch, down.
"""

from __future__ import annotations

import base64
import functools
import json
import operator
import re
import zlib
from typing import TYPE_CHECKING, Any

import jmespath
from jmespath import functions

from consumer._errors import DecodeLimitError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

#: Lambda's invocation payload limit: no producer's record can be larger before it is decoded.
DEFAULT_MAX_DECODED_BYTES = 6 * 1024 * 1024
#: A JSON text may hold one ``{``, ``[``, ``:`` or ``,`` per this many bytes of the limit. Parsed, each costs up to
#: ~75 bytes (``[{},{},...]`` takes 24 times its text): the bound keeps the parse within ~5 times the limit.
JSON_BYTES_PER_VALUE = 16
_CHUNK = 4096  # gzip input fed per call: after each member its unread rest is copied, so many tiny members stay cheap
_NOT_ZERO = re.compile(rb"[^\x00]")


def parse_json(text: str, limit: int, function: str) -> Any:
    """``json.loads(text)``, refused past ``limit`` characters or ``limit // JSON_BYTES_PER_VALUE`` values.

    Values are counted by their ``{``, ``[``, ``:`` and ``,`` (those in strings too: an upper bound, read in C).

    Raises:
        DecodeLimitError: The text is longer, or holds more values.
        ValueError: It is not JSON (or has an integer past Python's digit limit).
        RecursionError: It nests too deeply.
    """
    values = text.count(",") + text.count(":") + text.count("{") + text.count("[")
    most = limit // JSON_BYTES_PER_VALUE
    if len(text) > limit or values > most:
        msg = (
            f"{function}() parses at most {limit} characters with at most {most} of '{{', '[', ':' and ',' "
            f"(max_decoded_bytes {limit}): this text has {len(text)} characters and {values} of them"
        )
        raise DecodeLimitError(msg, function=function, limit=limit)
    return json.loads(text)


def decode_base64(text: str, limit: int, function: str, *, validate: bool = True) -> bytes:
    """The bytes of base64 ``text``, refused when they could pass ``limit`` (``validate``: strictly, as we decode).

    Raises:
        DecodeLimitError: The text may decode to more than ``limit`` bytes.
        binascii.Error: It is not base64 (a ``ValueError``).
    """
    if len(text) // 4 * 3 > limit:
        msg = (
            f"{function}() decodes at most {limit} bytes (max_decoded_bytes): this text of {len(text)} characters "
            f"decodes to up to {len(text) // 4 * 3}"
        )
        raise DecodeLimitError(msg, function=function, limit=limit)
    return base64.b64decode(text, validate=validate)


def inflate(data: bytes, limit: int, function: str) -> bytes:
    """The gzip ``data`` inflated, every member of it as ``gzip.decompress`` reads them, to at most ``limit`` bytes.

    Inflated a chunk at a time, each call told how much may still come out: a bomb stops at the limit.

    Raises:
        DecodeLimitError: The data inflates to more than ``limit`` bytes.
        gzip.BadGzipFile: It is not gzip, or its CRC or length does not match (an ``OSError``).
        EOFError: It ends before its last member does.
    """
    view, out, at = memoryview(data), bytearray(), 0
    while at < len(view):
        inflater = zlib.decompressobj(wbits=31)  # one gzip member: header, deflate stream, CRC and length checked
        while not inflater.eof:
            chunk = view[at : at + _CHUNK]
            if not chunk:
                msg = "the gzip data ends before its end-of-stream marker"
                raise EOFError(msg)
            try:
                out += inflater.decompress(chunk, limit - len(out) + 1)
            except zlib.error as e:
                from gzip import BadGzipFile  # noqa: PLC0415 - what gzip.decompress raises, only when it is raised

                raise BadGzipFile(str(e)) from None  # zlib's text names the check that failed, quotes no byte
            if len(out) > limit:
                msg = f"{function}() inflates at most {limit} bytes (max_decoded_bytes): this data inflates to more"
                raise DecodeLimitError(msg, function=function, limit=limit)
            at += len(chunk) - len(inflater.unused_data)
        after = _NOT_ZERO.search(data, at)  # zero bytes may pad members apart, as gzip.decompress allows
        at = len(view) if after is None else after.start()
    return bytes(out)


class _Functions(functions.Functions):
    # Each function has a Powertools alias, so Powertools expressions work unchanged. Each decodes at most
    # ``limit`` bytes and names itself, as the expression calls it, when it refuses.

    def __init__(self, limit: int) -> None:
        self.limit = limit

    @functions.signature({"types": ["string"]})
    def _func_json_parse(self, value: str) -> Any:
        return parse_json(value, self.limit, "json_parse")

    @functions.signature({"types": ["string"]})
    def _func_powertools_json(self, value: str) -> Any:
        return parse_json(value, self.limit, "powertools_json")

    # A decoder's error may quote the bytes it refused (gzip's "Not a gzipped file (b'SE')", UTF-8's "can't
    # decode byte 0xff"): these are the payload's, and key errors are logged. Said by type and place instead.

    @functions.signature({"types": ["string"]})
    def _func_base64_decode(self, value: str) -> str:
        return _text(decode_base64(value, self.limit, "base64_decode"))

    @functions.signature({"types": ["string"]})
    def _func_powertools_base64(self, value: str) -> str:
        return _text(decode_base64(value, self.limit, "powertools_base64"))

    @functions.signature({"types": ["string"]})
    def _func_base64_gzip_decode(self, value: str) -> str:
        return self._gunzipped(value, "base64_gzip_decode")

    @functions.signature({"types": ["string"]})
    def _func_powertools_base64_gzip(self, value: str) -> str:
        return self._gunzipped(value, "powertools_base64_gzip")

    def _gunzipped(self, value: str, function: str) -> str:
        data = decode_base64(value, self.limit, function)
        try:
            data = inflate(data, self.limit, function)
        except (OSError, EOFError) as e:  # BadGzipFile is an OSError
            failed = type(e).__name__
        else:
            return _text(data)
        msg = f"not gzip data ({failed})"
        raise ValueError(msg)  # outside the handler: the error that quotes the bytes is not its context

    @functions.signature({"types": ["object"]}, {"types": ["string"]})
    def _func_header(self, record: Any, name: str) -> Any:
        # header(@, 'Idempotency-Key'): a Kafka header, an SQS message attribute, an EventBridge detail field.
        from consumer.sources._headers import producer_header  # noqa: PLC0415 - by the first header(): most keys never call it

        return producer_header(record, name)


def _text(data: bytes) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError as e:
        at = e.start
    msg = f"the decoded bytes are not UTF-8 text (at byte {at})"
    raise ValueError(msg)  # outside the handler: the error that quotes the byte is not its context


@functools.cache
def options(limit: int) -> jmespath.Options:
    """The search options whose functions decode at most ``limit`` bytes (one per limit in use)."""
    return jmespath.Options(custom_functions=_Functions(limit))


def compile_expression(expression: str) -> jmespath.parser.ParsedResult:
    """Compile ``expression`` (raises ``jmespath.exceptions.ParseError`` when it is not JMESPath)."""
    return jmespath.compile(expression)


def undefined_function(expression: jmespath.parser.ParsedResult, custom_functions: Any) -> str | None:
    """The first function ``expression`` calls that ``custom_functions`` do not define, else ``None``.

    ``custom_functions``: a :class:`jmespath.functions.Functions` (its class or an instance), or ``None`` for
    JMESPath's own. JMESPath calls a function through that table alone, so such a call fails on every record; a table
    it cannot read (functions resolved only when called) defines everything.
    """
    table = getattr(custom_functions or functions.Functions, "FUNCTION_TABLE", None)
    if table is None:
        return None
    nodes = [expression.parsed]
    while nodes:
        node = nodes.pop()
        if node["type"] == "function_expression" and node["value"] not in table:
            return str(node["value"])
        nodes.extend(child for child in node.get("children", ()) if isinstance(child, dict))
    return None


def search(expression: jmespath.parser.ParsedResult, data: Any, search_options: jmespath.Options) -> Any:
    """Evaluate a compiled expression with the custom functions of ``search_options`` (:func:`options`).

    A bare field name (``messageId``, the usual key), a list of them (``[topic, partition, offset]``) and ``a && b``
    of those (``eventID && [eventSourceARN, eventID]``) are looked up directly: same result, no tree walk.
    """
    if isinstance(data, dict):
        node = expression.parsed
        if node["type"] == "field":  # the usual key (messageId), at once
            return data.get(node["value"])
        text = expression.expression
        lookup = _LOOKUPS.get(text)
        if lookup is None and text not in _LOOKUPS:
            lookup = _LOOKUPS[text] = _lookup(expression.parsed)
        if lookup is not None:
            return lookup(data)
    return expression.search(data, options=search_options)  # other Mappings too (MappingProxyType, UserDict)


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
