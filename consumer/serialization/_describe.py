"""Where a rebuild failed and why, in words that quote none of the stored value (they go to a log line).

A rebuild (:func:`._typed.rebuild`) notes on an exception that passes through it the type that raised (the first
rebuild it leaves), the type the rebuild started from (the last) and each step in between: a field, an index, the
value or the key of a dict entry, named by its place among the entries (``[<key 2>]``), never by the key itself,
which is data. :func:`describe` names that place (``Owner.pets[0]``), the type that did not rebuild there, and
the reason. A Pydantic validation error is said by each error's location and message, never its input: the
location is followed through the fields of the model (so a nested model is named, and a dict key becomes
``[<key>]``), and a message a validator wrote (``value_error``: it may quote the input) is said by its type. The
errors a rebuild raises of its own, defined here, say type and field names and counts. Any other exception is
said by its type alone: its message may quote the stored value.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import typing
from typing import Any

from consumer._errors import IdempotencyModelTypeError
from consumer._serde import _name
from consumer.serialization._types import Shape, fields_of, is_dataclass_type, is_model_type, shape

_NOTHING: Any = object()
_POSITION = "_idempotent_consumer_position"  # the exception's attribute (every exception has a __dict__)

#: One step down a stored value: ``("field", name)``, ``("index", i)``, the value (``("value", i)``) or the key
#: (``("key", i)``) of the i-th entry of a dict.
Step = tuple[str, Any]

# Pydantic error types whose message may hold the input: a validator's own message, a discriminator's value.
_QUOTING = frozenset({"value_error", "assertion_error", "union_tag_invalid", "get_attribute_error"})


@dataclasses.dataclass
class Position:
    """Where a rebuild failed: down ``steps`` (innermost first) from ``root`` to ``type``, whose rebuild raised."""

    type: Any
    root: Any
    steps: list[Step]


def reached(error: BaseException, tp: Any) -> None:
    """Note on ``error`` that it left the rebuild of ``tp``: the first call names the type that raised."""
    found = error.__dict__.get(_POSITION)
    if found is None:
        error.__dict__[_POSITION] = Position(tp, tp, [])
    else:
        found.root = tp


def stepped(error: BaseException, step: Step) -> None:
    """Note on ``error`` a step its rebuild came down, innermost first."""
    found = error.__dict__.get(_POSITION)
    if found is not None:
        found.steps.append(step)


def position(error: BaseException) -> Position | None:
    """Where the rebuild that raised ``error`` failed; ``None`` when no rebuild did."""
    found = error.__dict__.get(_POSITION)
    return found if isinstance(found, Position) else None


def render(steps: list[Step]) -> str:
    """``steps`` (outermost first) as a path: ``.lines[0]``, ``[<key 2>]``, ``.keys()[2]`` (a key itself)."""
    said = {"field": ".{}", "index": "[{}]", "value": "[<key {}>]", "key": ".keys()[{}]"}
    return "".join(said[kind].format(at) for kind, at in steps)


class StoredFormError(TypeError):
    """A stored value is not in the form its type is stored in (the message names types and fields only)."""


class UnknownFieldsError(StoredFormError):
    """A dict stored for a dataclass has keys that are not its fields."""

    def __init__(self, cls: type, names: list[str]) -> None:
        """``names``: the keys ``cls`` has no field for."""
        self.cls, self.names = cls, names
        super().__init__(self.said(named=True))

    def said(self, named: bool) -> str:
        """The message, naming the keys only when ``named`` (keys may be data, not field names)."""
        if named:
            return f"{_name(self.cls)} has no field {', '.join(map(repr, self.names))}"
        return f"{_name(self.cls)} has no field for {len(self.names)} of the stored keys"


class MissingFieldsError(StoredFormError):
    """A dict stored for a dataclass lacks fields that have no default."""

    def __init__(self, cls: type, names: list[str]) -> None:
        """``names``: the fields of ``cls`` without a default that were not stored."""
        super().__init__(f"{_name(cls)} has no stored value for its field {', '.join(map(repr, names))}")


class NotAMemberError(ValueError):
    """A value stored in an enum position is not the value of one of its members."""

    def __init__(self, cls: type) -> None:
        """``cls``: the enum."""
        super().__init__(f"the stored value is not one of the members of {_name(cls)}")


#: The errors whose message holds no stored value.
SAFE_ERRORS = (StoredFormError, NotAMemberError)


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
    failed = shape(found.type).hint
    if _is_validation_error(error) and is_model_type(failed):
        inside, failed, why = _validation(error, failed)
        where, at = where + inside, (at if not inside else _NOTHING)
    else:
        inside, why = "", reason(error, at)
    if at is _NOTHING or type(at) is failed:
        what = f"{a_type(failed)} does not replay"
    else:  # the result holds another type there (a subclass, a dict, a value that is not a member)
        what = f"{a_type(type(at))} does not replay as {a_type(failed)}"
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
    tp = shape(tp).hint
    named = typing.get_origin(tp) or tp
    return str(getattr(named, "__qualname__", None) or getattr(named, "_name", None) or type(named).__qualname__)


def a_type(t: Any) -> str:
    """``a list``, ``an Order``: :func:`type_name` with its article."""
    name = type_name(t)
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


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
        found = shape(tp)
        fields = _fields(found)
        if fields is not None:
            inner, start = found.hint, len(path)
            name = item if item in fields else next((n for n, a in fields.items() if a[1] == item), None)
            path, tp = (path + f".{name}", fields[name][0]) if name is not None else (path + "[?]", None)
        elif found.kind in {"sequence", "tuple"} and isinstance(item, int):
            first, rest = found.items()
            path, tp = path + f"[{item}]", first[item] if item < len(first) else rest
        elif found.kind in {"mapping", "dict kind"}:
            path, tp = path + "[<key>]", found.entries()[1]
        else:
            path, tp = path + "[?]", None
    return path, inner, start


def _fields(found: Shape) -> dict[str, tuple[Any, Any]] | None:
    # name -> (annotation, alias) of a model or dataclass; None for any other kind.
    if found.kind == "model":
        return {n: (f.annotation, f.validation_alias or f.alias) for n, f in found.cls.model_fields.items()}
    if found.kind != "dataclass":
        return None
    try:
        hints = found.fields()
    except IdempotencyModelTypeError:
        hints = {}
    return {name: (hints.get(name), None) for name in fields_of(found.cls)}
