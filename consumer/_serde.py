"""JSON for idempotency keys (canonical, hashed) and for stored results (replayed exactly)."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import json
import logging
import math
import re
import threading
import uuid
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

logger = logging.getLogger("idempotent_consumer")

_TAG = "__ic__"  # the one reserved key: {"__ic__": tag, "v": payload} stands for a value JSON cannot hold
_MAX_DEPTH = 256  # deeper results are refused, so that whatever is stored can be read back
_FAST_DEPTH = 32  # the plain-JSON check leaves deeper (or cyclic) values to the full walk
_MAX_DIGITS = 4300  # int's own str() limit, applied to integral Decimals such as Decimal("1E+999999999")
_SURROGATE = r"[\ud800-\udfff]"  # patterns: compiled with their first use (re keeps them), not at import
_ATOMS = frozenset({str, int, bool, type(None)})
_PIECES = r"[\ud800-\udfff]|[^\ud800-\udfff]+"
_encode_str: Callable[[str], str] = json.encoder.encode_basestring


class _Encoder(json.JSONEncoder):
    """``json.JSONEncoder`` with json's C encoder built once, not per ``encode`` as ``iterencode`` does (half the cost
    of a small result): the one ``iterencode`` builds from the same options, by position (markers: none, acyclic values
    only; default, string encoder, indent, separators, sort_keys, skipkeys, allow_nan), so the same text."""  # noqa: D205, D209

    def __init__(self, **options: Any) -> None:
        super().__init__(check_circular=False, ensure_ascii=False, **options)
        make = getattr(json.encoder, "c_make_encoder", None)
        args = (None, self.default, _encode_str, None, self.key_separator, self.item_separator, self.sort_keys)
        self._built = make and make(*args, self.skipkeys, self.allow_nan)

    def encode(self, o: Any) -> str:
        """``o`` as JSON text, as ``json.JSONEncoder.encode`` writes it."""
        return super().encode(o) if self._built is None or isinstance(o, str) else "".join(self._built(o, 0))


_PLAIN = _Encoder(separators=(",", ":"), allow_nan=False)
_CANONICAL = _Encoder(sort_keys=True, separators=(",", ":"))


class ResultEncodingError(ValueError):
    """A handler's result cannot be stored; the exception that stopped it is the ``__cause__``."""


def _plain(value: Any, depth: int, float_ok: Callable[[float], bool]) -> bool:  # noqa: PLR0911 - loops run fastest
    # Whether the C encoder alone writes ``value`` as it must be written: the usual case, so kept lean.
    t = type(value)
    if t is dict:
        if _TAG in value or depth == _FAST_DEPTH:
            return False
        for k, v in value.items():
            if type(k) is not str or (type(v) not in _ATOMS and not _plain(v, depth + 1, float_ok)):
                return False
        return True
    if t is list:
        if depth == _FAST_DEPTH:
            return False
        for v in value:  # noqa: SIM110
            if type(v) not in _ATOMS and not _plain(v, depth + 1, float_ok):
                return False
        return True
    return t in _ATOMS or (t is float and float_ok(value))


_STR = frozenset((str,))


class BinaryKey(bytes):
    """Bytes selected as key material (a Kafka header that is not UTF-8): keyed as ``{"__ic__": "bytes", "v":
    "<hex>"}``, which no text, no plain bytes (base64 text) and no payload (a dict holding the reserved key is
    escaped) keys alike."""  # noqa: D205, D209 - one sentence

    __slots__ = ()


class OwnIdKey(SimpleNamespace):
    """A record's own id keying it in place of the producer's key it lacks (``key_header``): ``OwnIdKey(id=...)``,
    keyed as ``{"__ic__": "own-id", "v": <the id>}``, which no header value keys alike (a text, bytes, or a payload,
    whose own reserved key is escaped), so a producer cannot claim a header-less record's key by sending its id."""  # noqa: D205, D209


def _utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:  # only lone surrogates fail
        return False
    return True


def canonical_json(value: Any) -> str:
    r"""JSON with sorted keys and no whitespace, so equal payloads serialize (and hash) equally.

    Numbers are keyed by value: two numbers give the same text exactly when they compare equal. Integral
    ones are written as integers (``1``, ``1.0``, ``Decimal("1.00")``: ``1``), a Decimal that equals a float as
    that float (``Decimal("0.5")``: ``0.5``), any other Decimal as ``{"__ic__":"decimal","v":"0.1"}`` (its
    exact value; ``0.1`` the float is not exactly 0.1); a dict that has that reserved key is escaped. A dict with a
    key that is no string (``1``, ``None``, ``True``) is written tagged, each key as its own value, so that it never
    meets the dict with the key's text (``{1: x}`` is not ``{"1": x}``); keys of str are written as JSON writes
    them. Strings are hashed as given (not normalised); a lone surrogate is written as a ``\uXXXX`` escape, so the
    text always encodes to UTF-8. Tuples and sets (sorted) are lists; bytes base64 and dates ISO 8601 text.

    Raises:
        TypeError: A value of a type JSON cannot hold.
        ValueError: A cycle, too deep a nesting, a signalling NaN, an integer of more than 4300 digits, or two
            dict keys that serialize alike.
    """
    if type(value) is str:
        text = _encode_str(value)
    elif type(value) is list and _STR.issuperset(map(type, value)):  # a stream record's own id: [ARN, eventID]
        text = f"[{','.join(map(_encode_str, value))}]"  # as the encoder writes it, at two thirds of its cost
    else:
        try:
            text = _CANONICAL.encode(value if _plain(value, 0, _fractional) else _keyable(value, set()))
        except RecursionError as e:
            raise ValueError("the value is nested too deeply") from e
    if not text.isascii() and not _utf8(text):
        text = re.sub(_SURROGATE, lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


def _fractional(number: float) -> bool:
    return not number.is_integer()  # NaN and the infinities too: written NaN, Infinity, as ever


def _keyable(value: Any, active: set[int]) -> Any:  # noqa: C901, PLR0911, PLR0912 - one branch per form
    # ``value`` as data the C encoder writes canonically.
    if isinstance(value, str) or value is None:
        return value
    if isinstance(value, (int, float, decimal.Decimal)):
        return _by_value(value)
    if isinstance(value, bytes):
        return {_TAG: "bytes", "v": value.hex()} if type(value) is BinaryKey else base64.b64encode(value).decode()
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if type(value) is OwnIdKey:
        return {_TAG: "own-id", "v": _keyable(value.id, active)}
    if id(value) in active:
        raise ValueError("Circular reference detected")
    active.add(id(value))
    try:
        if isinstance(value, dict):
            if all(isinstance(k, str) for k in value):  # as JSON has them
                pairs = sorted([k, _keyable(v, active)] for k, v in value.items())
                return {_TAG: "dict", "v": pairs} if _TAG in value else dict(pairs)
            # Another key (1, None, True) is written as itself, the dict tagged: {1: x} never keys as {"1": x}.
            keys = [k if isinstance(k, str) else _key(k) for k in value]
            texts = [_CANONICAL.encode(k) for k in keys]
            if len(set(texts)) < len(texts):  # two NaN keys
                kinds = sorted({type(k).__name__ for k in value})  # by type: the keys are the record's data
                raise ValueError(f"two keys of a dict serialize alike (keys of types {', '.join(kinds)})")
            items = sorted(zip(texts, keys, value.values(), strict=True), key=lambda item: item[0])
            return {_TAG: "dict", "v": [[k, _keyable(v, active)] for _, k, v in items]}
        if isinstance(value, (list, tuple)):
            return [_keyable(v, active) for v in value]
        if isinstance(value, (set, frozenset)):
            return sorted((_keyable(v, active) for v in value), key=_CANONICAL.encode)
        if getattr(type(value), "__keyed_by_raw__", False):  # a typed record, wherever it is nested
            return _keyable(value.key_data(), active)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return _keyable({f.name: getattr(value, f.name) for f in dataclasses.fields(value)}, active)
        if hasattr(value, "model_dump") and not isinstance(value, type):  # Pydantic v2 models
            return _keyable(value.model_dump(mode="json"), active)
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
    finally:
        active.discard(id(value))


def _key(key: Any) -> Any:
    if key is None or isinstance(key, (int, float, decimal.Decimal)):
        return None if key is None else _by_value(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _by_value(number: float | decimal.Decimal) -> Any:
    # Integral: an int. Equal to a float: that float (written as repr() writes it). Else a tagged exact value.
    if isinstance(number, int):
        return number
    if isinstance(number, float):
        return int(number) if number.is_integer() else number
    if number.is_snan():
        raise ValueError("a signalling NaN has no JSON form")
    if not number.is_finite():
        return float(number)
    if number == number.to_integral_value():
        if number.adjusted() >= _MAX_DIGITS:
            raise ValueError(f"an integer of more than {_MAX_DIGITS} digits has no JSON form")
        return int(number)
    if float(number) == number:
        return float(number)
    mantissa, _, exponent = format(number, "e").partition("e")  # every digit: "-3.055e+1"
    digits, point = mantissa.lstrip("-").replace(".", "").rstrip("0"), int(exponent) + 1
    if point > 0:
        text = f"{digits[:point]}.{digits[point:]}"
    elif point > -6:  # noqa: PLR2004 - as JavaScript writes numbers
        text = f"0.{'0' * -point}{digits}"
    else:
        text = f"{digits[0]}{'.' if digits[1:] else ''}{digits[1:]}e{point - 1}"
    return {_TAG: "decimal", "v": ("-" if number.is_signed() else "") + text}


def encode_result(value: Any) -> str:
    """JSON text of a handler's result, which :func:`decode_result` turns back into an equal value of equal type.

    Plain JSON (``None``, bool, int, finite float, str, list, str-keyed dict) is written as
    ``json.dumps(value, separators=(",", ":"), ensure_ascii=False)`` writes it. Other values are tagged objects
    ``{"__ic__": tag, "v": payload}``: non-finite floats, str holding lone surrogates, tuples, sets,
    frozensets, dicts with other keys (or the reserved key), Decimals, bytes, bytearrays, datetimes, dates,
    times, timedeltas and UUIDs. Dataclasses, Pydantic models (``model_dump(mode="json")``) and subclasses of
    the types above cannot be rebuilt here: they are stored in their plain form, with a warning once per type
    (an output serializer, :mod:`consumer.serialization`, rebuilds dataclasses and models).
    The text always encodes to UTF-8.

    Raises:
        ResultEncodingError: Any exception raised on the way (an unknown type, a cycle, too deep a nesting, a
            failing ``model_dump``, ...), chained as its cause.
    """
    try:
        if type(value) is dict and _TAG not in value:  # the usual result: one level of str, int, bool, None
            for k, v in value.items():
                if type(k) is not str or type(v) not in _ATOMS:
                    break
            else:
                text = _PLAIN.encode(value)
                if text.isascii() or _utf8(text):
                    return text
        if _plain(value, 0, math.isfinite):
            text = _PLAIN.encode(value)
            if text.isascii() or _utf8(text):
                return text
        return _PLAIN.encode(_tagged(value, set()))
    except Exception as e:
        problem = "it is nested too deeply" if isinstance(e, RecursionError) else f"{type(e).__name__}: {e}"
        raise ResultEncodingError(f"a result of type {_name(type(value))} cannot be stored: {problem}") from e


def _tagged(value: Any, active: set[int]) -> Any:
    t = type(value)
    if t is str and not value.isascii() and re.search(_SURROGATE, value):
        return {_TAG: "str", "v": [ord(p) if re.match(_SURROGATE, p) else p for p in re.findall(_PIECES, value)]}
    if t is str or t is int or t is bool or value is None:
        return value
    if t is float:
        return value if math.isfinite(value) else {_TAG: "float", "v": repr(value)}
    if t in _SCALARS:
        tag, encode, _ = _SCALARS[t]
        return {_TAG: tag, "v": encode(value)}
    if id(value) in active:
        raise ValueError("it contains a reference cycle")
    if len(active) == _MAX_DEPTH:
        raise ValueError(f"it is nested deeper than {_MAX_DEPTH} levels")
    active.add(id(value))
    try:
        return _container(value, t, active)
    finally:
        active.discard(id(value))


def _container(value: Any, t: type, active: set[int]) -> Any:
    if t is list:
        return [_tagged(v, active) for v in value]
    if t is tuple:
        return {_TAG: "tuple", "v": [_tagged(v, active) for v in value]}
    if t is set or t is frozenset:  # in the order of their JSON text, so equal sets are stored alike
        _require_hashable_replays(value, "a set")
        return {_TAG: t.__name__, "v": sorted((_tagged(v, active) for v in value), key=_PLAIN.encode)}
    if t is dict:
        if _TAG not in value and all(type(k) is str and _tagged(k, active) is k for k in value):
            return {k: _tagged(v, active) for k, v in value.items()}
        _require_hashable_replays(value, "a dict key")
        return {_TAG: "dict", "v": [[_tagged(k, active), _tagged(v, active)] for k, v in value.items()]}
    how = ": an output serializer (consumer.serialization) replays it as itself"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        plain: Any = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    elif callable(getattr(value, "model_dump", None)) and not isinstance(value, type):  # Pydantic v2 models
        plain = value.model_dump(mode="json")
    else:  # subclasses (enums, OrderedDict, namedtuples, ...) as their base type
        base = next((b for b in _BASES if isinstance(value, b)), None)
        if base is None:
            raise TypeError(f"{_name(t)} is not a JSON type, a dataclass or a Pydantic model")
        plain, how = _BASES[base](value), ""
    _warn_stored_as(t, type(plain), how)
    return _tagged(plain, active)


def _require_hashable_replays(members: Any, where: str) -> None:
    # A frozen dataclass (or model) replays as a dict, which can be no set member or dict key: refused when stored,
    # since a result stored that way could never be replayed.
    for member in members:
        if isinstance(member, tuple | frozenset):
            _require_hashable_replays(member, where)
        elif (dataclasses.is_dataclass(member) and not isinstance(member, type)) or hasattr(member, "model_dump"):
            raise TypeError(f"{where} holds a {_name(type(member))}, which replays as a dict: no set or key can")


def _name(t: type) -> str:
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


_warned: set[type] = set()
_warned_lock = threading.Lock()


def _warn_once(t: type, message: str) -> None:
    with _warned_lock:
        if t in _warned:
            return
        _warned.add(t)
    logger.warning(message, _name(t))


def _warn_stored_as(t: type, base: type, how: str = "") -> None:
    # Once per type: results of type t replay as their plain form, of type base (a subclass as its base type).
    noun = f"{'an' if base.__name__[0] in 'aeiou' else 'a'} {base.__name__}"
    _warn_once(t, f"results of type %s replay as {noun}: only that is stored{how}")


def _iso(value: dt.datetime | dt.time) -> str | list[Any]:
    # ISO 8601 keeps a fixed UTC offset; other time zones (zoneinfo, named ones) replay as their offset.
    if value.tzinfo is not None:
        offset = value.utcoffset()
        if offset is not None and offset.microseconds:
            raise ValueError(f"a UTC offset of {offset} is finer than a second")
        fixed = None if offset is None else dt.timezone(offset)
        if type(value.tzinfo) is not dt.timezone or fixed is None or value.tzname() != fixed.tzname(None):
            _warn_once(type(value.tzinfo), "time zones of type %s replay as a fixed UTC offset")
            value = value.replace(tzinfo=fixed)
    return [value.isoformat(), 1] if value.fold else value.isoformat()


def _from_iso(parse: Callable[[str], Any]) -> Callable[[Any], Any]:
    return lambda v: parse(v) if isinstance(v, str) else parse(v[0]).replace(fold=v[1])


def _b64(value: bytes | bytearray) -> str:
    return base64.b64encode(value).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


_SCALARS: dict[type, tuple[str, Callable[[Any], Any], Callable[[Any], Any]]] = {  # tag, encode, decode
    decimal.Decimal: ("decimal", str, decimal.Decimal),  # str() keeps the exponent ("30.50"), NaNs and -0
    bytes: ("bytes", _b64, _unb64),
    bytearray: ("bytearray", _b64, lambda v: bytearray(_unb64(v))),
    dt.datetime: ("datetime", _iso, _from_iso(dt.datetime.fromisoformat)),
    dt.date: ("date", dt.date.isoformat, dt.date.fromisoformat),
    dt.time: ("time", _iso, _from_iso(dt.time.fromisoformat)),
    dt.timedelta: ("timedelta", lambda v: [v.days, v.seconds, v.microseconds], lambda v: dt.timedelta(*v)),
    uuid.UUID: ("uuid", str, uuid.UUID),
}
_DECODERS: dict[str, Callable[[Any], Any]] = {
    **{tag: decode for tag, _, decode in _SCALARS.values()},
    **{t.__name__: t for t in (tuple, set, frozenset, dict)},
    "float": float,
    "str": lambda v: "".join(p if isinstance(p, str) else chr(p) for p in v),
}
_BASES: dict[type, Callable[[Any], Any]] = {  # subclasses are stored as the first of these they extend
    str: str.__str__,
    int: int.__int__,
    float: float.__float__,
    **{t: t for t in (dict, list, tuple, set, frozenset, decimal.Decimal, bytes, bytearray)},
}


def _untag(obj: dict[str, Any]) -> Any:
    tag = obj.get(_TAG)
    if len(obj) == 2 and "v" in obj and isinstance(tag, str) and tag in _DECODERS:  # noqa: PLR2004
        return _DECODERS[tag](obj["v"])
    return obj


def decode_result(text: str) -> Any:
    """The value :func:`encode_result` wrote as ``text``; plain JSON (as earlier versions stored) as it is.

    Raises:
        ValueError: ``text`` is not JSON, or holds a malformed tagged value.
    """
    if _TAG not in text:
        return json.loads(text)
    try:
        return json.loads(text, object_hook=_untag)
    except ValueError:
        raise
    except Exception as e:
        raise ValueError(f"malformed stored result: {type(e).__name__}: {e}") from e
