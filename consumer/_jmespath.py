"""JMESPath with the custom functions users need to reach into SQS bodies, Kinesis data and producers' headers.

The decoding functions are bounded (``IdempotencyConfig.max_decoded_bytes``), and so are the cut-over's (which
share the helpers here): a record is data a producer controls, and one that inflates or parses past the bound fails
alone with a :class:`~consumer.DecodeLimitError` instead of taking the invocation, and its batch, down. The bound
holds for one evaluation of an expression on one record, all of its calls together (a :class:`Budget` each): a
projection calling a decoder on each of a list's items shares it.
"""

from __future__ import annotations

import base64
import functools
import json
import operator
import re
import zlib
from typing import TYPE_CHECKING, Any, cast

import jmespath
from jmespath import functions

from consumer._errors import DecodeLimitError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

#: Lambda's invocation payload limit: no producer's record can be larger before it is decoded.
DEFAULT_MAX_DECODED_BYTES = 6 * 1024 * 1024
#: A JSON text may hold one ``{``, ``[``, ``:`` or ``,`` per this many bytes of the limit. Parsed, each costs up to
#: ~75 bytes (``[{},{},...]`` takes 24 times its text): the bound keeps the parse within ~5 times the limit.
JSON_BYTES_PER_VALUE = 16
#: The functions that decode, ours and Powertools' (an expression calling none of them needs no budget).
DECODING = frozenset(
    (
        "json_parse",
        "base64_decode",
        "base64_gzip_decode",
        "powertools_json",
        "powertools_base64",
        "powertools_base64_gzip",
    )
)
_CHUNK = 4096  # gzip input fed per call: after each member its unread rest is copied, so many tiny members stay cheap
_NOT_ZERO = rb"[^\x00]"  # compiled with its first use (re keeps it), not with every cold start
_SHARED = "per record, all of the expression's calls together"


class Budget:
    """What one evaluation of an expression may still decode from one record: ``limit`` of each kind, to start.

    Its base64 calls decode at most ``limit`` bytes in all, its gzip calls inflate at most ``limit`` bytes in all,
    its JSON calls parse at most ``limit`` characters holding at most ``limit // JSON_BYTES_PER_VALUE`` values in
    all: as much as one call of each could before. Used by one evaluation, in one thread: never shared.
    """

    __slots__ = ("decoded", "inflated", "limit", "parsed", "values")

    def __init__(self, limit: int) -> None:
        """A full budget of ``limit`` (``max_decoded_bytes``)."""
        self.limit = self.decoded = self.inflated = self.parsed = limit
        self.values = limit // JSON_BYTES_PER_VALUE


def parse_json(text: str, budget: Budget, function: str) -> Any:
    """``json.loads(text)``, refused past the characters or values (``{``, ``[``, ``:``, ``,``) ``budget`` has left.

    Values are counted by their ``{``, ``[``, ``:`` and ``,`` (those in strings too: an upper bound, read in C).

    Raises:
        DecodeLimitError: The text is longer, or holds more values.
        ValueError: It is not JSON (or has an integer past Python's digit limit).
        RecursionError: It nests too deeply.
    """
    values = text.count(",") + text.count(":") + text.count("{") + text.count("[")
    if len(text) > budget.parsed or values > budget.values:
        limit = budget.limit
        msg = (
            f"{function}() parses at most {limit} characters with at most {limit // JSON_BYTES_PER_VALUE} of "
            f"'{{', '[', ':' and ',' {_SHARED} (max_decoded_bytes {limit}): this text has {len(text)} characters "
            f"and {values} of them, past the {budget.parsed} characters and {budget.values} of them left"
        )
        raise DecodeLimitError(msg, function=function, limit=limit)
    budget.parsed -= len(text)
    budget.values -= values
    return json.loads(text)


def decode_base64(text: str, budget: Budget, function: str, *, validate: bool = True) -> bytes:
    """The bytes of base64 ``text``, refused when they could pass what ``budget`` has left (``validate``: strictly).

    Raises:
        DecodeLimitError: The text may decode to more bytes than are left.
        binascii.Error: It is not base64 (a ``ValueError``).
    """
    most = len(text) // 4 * 3
    if most > budget.decoded:
        msg = (
            f"{function}() decodes at most {budget.limit} bytes {_SHARED} (max_decoded_bytes): this text of "
            f"{len(text)} characters decodes to up to {most} bytes, past the {budget.decoded} left"
        )
        raise DecodeLimitError(msg, function=function, limit=budget.limit)
    data = base64.b64decode(text, validate=validate)
    budget.decoded -= len(data)
    return data


def inflate(data: bytes, budget: Budget, function: str) -> bytes:
    """The gzip ``data`` inflated, every member as ``gzip.decompress`` reads them, within what ``budget`` has left.

    Inflated a chunk at a time, each call told how much may still come out: a bomb stops at the limit.

    Raises:
        DecodeLimitError: The data inflates to more bytes than are left.
        gzip.BadGzipFile: It is not gzip, or its CRC or length does not match (an ``OSError``).
        EOFError: It ends before its last member does.
    """
    view, out, at, left = memoryview(data), bytearray(), 0, budget.inflated
    while at < len(view):
        inflater = zlib.decompressobj(wbits=31)  # one gzip member: header, deflate stream, CRC and length checked
        while not inflater.eof:
            chunk = view[at : at + _CHUNK]
            if not chunk:
                msg = "the gzip data ends before its end-of-stream marker"
                raise EOFError(msg)
            try:
                out += inflater.decompress(chunk, left - len(out) + 1)
            except zlib.error as e:
                from gzip import BadGzipFile  # noqa: PLC0415 - what gzip.decompress raises, only when it is raised

                raise BadGzipFile(str(e)) from None  # zlib's text names the check that failed, quotes no byte
            if len(out) > left:
                msg = (
                    f"{function}() inflates at most {budget.limit} bytes {_SHARED} (max_decoded_bytes): this data "
                    f"inflates past the {left} bytes left"
                )
                raise DecodeLimitError(msg, function=function, limit=budget.limit)
            at += len(chunk) - len(inflater.unused_data)
        after = re.compile(_NOT_ZERO).search(data, at)  # zero bytes may pad members apart, as gzip.decompress allows
        at = len(view) if after is None else after.start()
    budget.inflated -= len(out)
    return bytes(out)


class BoundedFunctions:
    """A mixin of JMESPath functions whose decoding calls share one :class:`Budget`: one per evaluation that decodes.

    :func:`search` gives each evaluation of an expression calling one of :data:`DECODING` an instance of its own
    (:meth:`evaluation`); the one in the shared options serves expressions that decode nothing. A mixin, so that
    JMESPath's function registry reads only the classes that define functions (it costs the import otherwise).
    """

    def __init__(self, limit: int) -> None:
        """Functions decoding at most ``limit`` bytes (``max_decoded_bytes``) of each kind in all."""
        self.budget = Budget(limit)

    def evaluation(self) -> jmespath.Options:
        """Options for one evaluation: functions of the same class with a full budget of their own."""
        fresh = type(self)(self.budget.limit)  # a Functions too: the mixin comes with one (_Functions, ...)
        return jmespath.Options(custom_functions=cast("functions.Functions", fresh))


class _Functions(BoundedFunctions, functions.Functions):
    # Each function has a Powertools alias, so Powertools expressions work unchanged. Each decodes within the
    # evaluation's budget and names itself, as the expression calls it, when it refuses.

    @functions.signature({"types": ["string"]})
    def _func_json_parse(self, value: str) -> Any:
        return parse_json(value, self.budget, "json_parse")

    @functions.signature({"types": ["string"]})
    def _func_powertools_json(self, value: str) -> Any:
        return parse_json(value, self.budget, "powertools_json")

    # A decoder's error may quote the bytes it refused (gzip's "Not a gzipped file (b'SE')", UTF-8's "can't
    # decode byte 0xff"): these are the payload's, and key errors are logged. Said by type and place instead.

    @functions.signature({"types": ["string"]})
    def _func_base64_decode(self, value: str) -> str:
        return _text(decode_base64(value, self.budget, "base64_decode"))

    @functions.signature({"types": ["string"]})
    def _func_powertools_base64(self, value: str) -> str:
        return _text(decode_base64(value, self.budget, "powertools_base64"))

    @functions.signature({"types": ["string"]})
    def _func_base64_gzip_decode(self, value: str) -> str:
        return self._gunzipped(value, "base64_gzip_decode")

    @functions.signature({"types": ["string"]})
    def _func_powertools_base64_gzip(self, value: str) -> str:
        return self._gunzipped(value, "powertools_base64_gzip")

    def _gunzipped(self, value: str, function: str) -> str:
        data = decode_base64(value, self.budget, function)
        try:
            data = inflate(data, self.budget, function)
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
    """The search options whose functions decode at most ``limit`` bytes (one per limit in use).

    Searched with :func:`search` alone: it gives each evaluation that decodes functions of its own.
    """
    return evaluation_options(limit)


def evaluation_options(limit: int) -> jmespath.Options:
    """Options for one evaluation outside :func:`search`: the functions, with a full :class:`Budget` of their own."""
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
    return next((name for name in _called(expression.parsed) if name not in table), None)


def _called(node: Mapping[str, Any]) -> Iterator[str]:
    # The names of the functions the parsed expression ``node`` calls (in expression references too: &f(@)).
    nodes = [node]
    while nodes:
        node = nodes.pop()
        if node["type"] == "function_expression":
            yield str(node["value"])
        nodes.extend(child for child in node.get("children", ()) if isinstance(child, dict))


def search(expression: jmespath.parser.ParsedResult, data: Any, search_options: jmespath.Options) -> Any:
    """Evaluate a compiled expression with the custom functions of ``search_options`` (:func:`options`).

    An expression calling a decoding function of :class:`BoundedFunctions` gets a budget of its own, shared by its
    calls (decided once per expression text; one that calls none is searched as it is, at no cost).

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
    bounded = search_options.custom_functions
    if isinstance(bounded, BoundedFunctions) and _decodes(expression):
        search_options = bounded.evaluation()  # a budget of its own: shared by this evaluation's calls alone
    return expression.search(data, options=search_options)  # other Mappings too (MappingProxyType, UserDict)


_LOOKUPS: dict[str, Callable[[dict[str, Any]], Any] | None] = {}  # by expression text (a few); None: the tree walk
_DECODING_CALLS: dict[str, bool] = {}  # by expression text: whether it calls one of DECODING (decided once)


def _decodes(expression: jmespath.parser.ParsedResult) -> bool:
    text = expression.expression
    decodes = _DECODING_CALLS.get(text)
    if decodes is None:
        decodes = _DECODING_CALLS[text] = not DECODING.isdisjoint(_called(expression.parsed))
    return decodes


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
