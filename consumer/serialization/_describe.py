"""Why a stored result does not rebuild, and where, in words that quote none of it (they go to a log line).

A rebuild notes where it failed on its exception (:mod:`._positions`): :func:`describe` names that place
(``Owner.pets[0]``, a dict entry by its place: ``[<key 2>]``), the type that did not rebuild there, and the reason.
A Pydantic validation error is said by each error's location and message, never its input: the location is
followed through the fields of the model (so a nested model is named, and a dict key becomes ``[<key>]``), and a
message a validator wrote (``value_error``: it may quote the input) is said by its type. Our own errors say type
and field names. Any other exception is said by its type alone: its message may quote the stored value.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import typing
from collections import abc
from typing import Any

from consumer._errors import IdempotencyModelTypeError
from consumer.serialization._annotations import field_types, is_dataclass_type
from consumer.serialization._positions import SAFE_ERRORS, Step, UnknownFieldsError, position, render
from consumer.serialization._typed import is_model_type, optional_of

_NOTHING: Any = object()

# Pydantic error types whose message may hold the input: a validator's own message, a discriminator's value.
_QUOTING = frozenset({"value_error", "assertion_error", "union_tag_invalid", "get_attribute_error"})


def describe(error: BaseException, root: str | None = None, original: Any = _NOTHING) -> str:
    """What a log line may say of ``error``, raised rebuilding a stored result: where, which type, and why.

    Args:
        error: The exception the rebuild (or a serializer's ``from_dict``) raised.
        root: The name the place starts with (by default, the type the rebuild started from).
        original: The result that was stored, when it is known: it tells the type found where the rebuild
            failed, and whether the keys of a dict stored for a dataclass are its fields (named) or data (counted).
    """
    found = position(error)
    if found is None:
        return reason(error)
    steps = found.steps[::-1]
    where = (root or type_name(found.root)) + render(steps)
    at = _follow(original, steps)
    failed = _bare(found.type)
    if _is_validation_error(error) and is_model_type(failed):
        inside, failed, why = _validation(error, failed)
        where, at = where + inside, (at if not inside else _NOTHING)
    else:
        inside, why = "", reason(error, at)
    if at is _NOTHING or type(at) is failed:
        what = f"{_a(failed)} does not replay"
    else:  # the result holds another type there (a subclass, a dict, a value that is not a member)
        what = f"{_a(type(at))} does not replay as {_a(failed)}"
    return f"{where}: {what}: {why}" if steps or inside else f"{what}: {why}"


def reason(error: BaseException, original: Any = _NOTHING) -> str:
    """Why ``error`` was raised, without a stored value: its type alone, unless its message is known to hold none.

    ``original``, the value stored where it was raised, if known: a dict stored for a dataclass names its keys
    when they are that value's fields, or (``original`` unknown) when each is a name, as a field is.
    """
    if isinstance(error, UnknownFieldsError):
        fields = original is not _NOTHING and (is_dataclass_type(type(original)) or is_model_type(type(original)))
        return error.said(fields or (original is _NOTHING and all(n.isidentifier() for n in error.names)))
    if isinstance(error, SAFE_ERRORS):
        return str(error)
    if isinstance(error, json.JSONDecodeError):  # where the text stops being JSON, not what it holds
        return f"{type(error).__name__}: {error}"
    if _is_validation_error(error):
        said = "; ".join(f"{_loc(None, e['loc'])[0]}: {_said(e)}" for e in _errors(error))
        return f"{type(error).__name__} for {getattr(error, 'title', '?')}: {said}"  # its title: a type's name
    return type(error).__name__


def type_name(tp: Any) -> str:
    """The name of ``tp`` (``list`` for ``list[Order]``, ``Order`` for ``Order | None``)."""
    tp = _bare(tp)
    named = typing.get_origin(tp) or tp
    return str(getattr(named, "__qualname__", None) or getattr(named, "_name", None) or type(named).__qualname__)


def _a(t: Any) -> str:
    name = type_name(t)
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _bare(tp: Any) -> Any:
    try:
        return optional_of(tp)
    except IdempotencyModelTypeError:  # a union of several types
        return tp


def _follow(value: Any, steps: list[Step]) -> Any:
    # The value of the stored result at the end of ``steps``, or _NOTHING where it cannot be followed.
    try:
        for kind, at in steps:
            value = _step(value, kind, at)
    except Exception:  # noqa: BLE001 - not followed (a value of another shape), not an error
        return _NOTHING
    return value


def _step(value: Any, kind: str, at: Any) -> Any:
    if kind == "field":
        return value[at] if isinstance(value, dict) else getattr(value, at)
    if kind == "index":
        return list(value)[at] if isinstance(value, set | frozenset) else value[at]
    return list(value.values() if kind == "value" else value)[at]


def _is_validation_error(error: BaseException) -> bool:
    pydantic_core = sys.modules.get("pydantic_core")
    return pydantic_core is not None and isinstance(error, pydantic_core.ValidationError)


def _errors(error: Any) -> list[dict[str, Any]]:
    return list(error.errors(include_url=False, include_input=False, include_context=False))


def _said(e: dict[str, Any]) -> str:
    # Pydantic's own message, unless a validator wrote it, or it names the input: then the error's type.
    known = getattr(sys.modules.get("pydantic_core.core_schema"), "ErrorType", None)
    return e["type"] if e["type"] in _QUOTING or e["type"] not in typing.get_args(known) else str(e["msg"])


def _validation(error: Any, model: Any) -> tuple[str, Any, str]:
    # (where inside ``model`` the errors are, the model they are in, each error by its place there).
    errors = _errors(error)
    walked = [_loc(model, e["loc"]) for e in errors]
    path, inner, start = walked[0]
    head = path[:start]
    if not all(p.startswith(head) for p, _, _ in walked):  # errors in several models: said from the outer one
        head, inner = "", model
    places = [p[len(head) :].lstrip(".") or "(root)" for p, _, _ in walked]
    why = "; ".join(f"{place}: {_said(e)}" for place, e in zip(places, errors, strict=True))
    return head, inner, why


def _loc(tp: Any, loc: tuple[Any, ...]) -> tuple[str, Any, int]:
    # A Pydantic location as a path, followed through the annotations from ``tp``: field names, list indexes and
    # ``[<key>]`` for a dict key (data); what cannot be told is ``[?]``. Also the innermost model or dataclass
    # on the way, and where in the path its fields start.
    path, inner, start = "", tp, 0
    for item in loc:
        tp = _bare(tp)
        fields = _fields(tp)
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if fields is not None:
            inner, start = tp, len(path)
            name = item if item in fields else next((n for n, a in fields.items() if a[1] == item), None)
            path, tp = (path + f".{name}", fields[name][0]) if name is not None else (path + "[?]", None)
        elif origin in _SEQUENCES and isinstance(item, int) and args:
            path, tp = path + f"[{item}]", _element(origin, args, item)
        elif origin in _MAPS and len(args) == 2:  # noqa: PLR2004 - key, value
            path, tp = path + "[<key>]", args[1]
        else:
            path, tp = path + "[?]", None
    return path, inner, start


_SEQUENCES = frozenset((list, tuple, set, frozenset, abc.Sequence, abc.MutableSequence, abc.Set, abc.MutableSet))
_MAPS = frozenset((dict, abc.Mapping, abc.MutableMapping))


def _element(origin: Any, args: tuple[Any, ...], index: int) -> Any:
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):  # noqa: PLR2004 - tuple[X, ...]
        return args[index] if index < len(args) else None
    return args[0]


def _fields(tp: Any) -> dict[str, tuple[Any, Any]] | None:
    # name -> (annotation, alias) of a model or dataclass; None for any other type.
    if is_model_type(tp):
        return {n: (f.annotation, f.validation_alias or f.alias) for n, f in tp.model_fields.items()}
    if is_dataclass_type(tp):
        try:
            hints = field_types(tp)
        except IdempotencyModelTypeError:
            hints = {}
        return {f.name: (hints.get(f.name), None) for f in dataclasses.fields(tp)}
    return None
