"""Results in their stored form and back, led by a type: dataclasses and Pydantic models, nested in containers.

:func:`plain` turns every dataclass and Pydantic model inside a result into a dict, and every enum member into its
value (no type needed: it walks the value). :func:`rebuild` walks a stored value alongside a type expression and
turns each dict found where the type says a dataclass or a model back into one, and each value where it says an
enum into its member; everything else stays as the result encoder replayed it (exact types: tuples, Decimals,
datetimes, ...). Pydantic is never imported here: a class can only be a Pydantic model once
``pydantic`` is imported by whoever defined it.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime as dt
import decimal
import enum
import functools
import inspect
import json
import sys
import types
import typing
import uuid
import weakref
from typing import TYPE_CHECKING, Any

from consumer._errors import IdempotencyModelTypeError
from consumer._serde import _name
from consumer.serialization._annotations import core, field_types, is_dataclass_type, substitute
from consumer.serialization._positions import (
    MissingFieldsError,
    NotAMemberError,
    StoredFormError,
    UnknownFieldsError,
    reached,
    stepped,
)

if TYPE_CHECKING:
    from collections.abc import Callable

_CONTAINERS = (list, tuple, set, frozenset)
_SEQUENCES = frozenset(
    {
        list,
        tuple,
        set,
        frozenset,
        collections.abc.Sequence,
        collections.abc.MutableSequence,
        collections.abc.Set,
        collections.abc.MutableSet,
        collections.abc.Collection,
        collections.abc.Iterable,
    }
)
_MAPPINGS = frozenset({dict, collections.abc.Mapping, collections.abc.MutableMapping})
_SETS: dict[Any, type] = {
    set: set,
    frozenset: frozenset,
    collections.abc.Set: frozenset,
    collections.abc.MutableSet: set,
}


def is_model_type(tp: Any) -> bool:
    """Whether ``tp`` is a Pydantic v2 model class (``False`` without importing pydantic when nobody has)."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(tp, type) and issubclass(tp, pydantic.BaseModel)


def plain(value: Any) -> Any:
    """``value`` with every dataclass (its fields, as :func:`dataclasses.asdict` has them) and Pydantic model
    (:func:`dump`) inside it turned into a dict, and every enum member (a dict key too) into its value; lists,
    tuples, sets (a list, once they hold dicts) and dict values are walked; a subclass of one of them (a named
    tuple, a ``Counter``) is stored as that type, rebuilt from its position's annotation."""  # noqa: D205, D209
    t = type(value)
    if t is dict:
        return {k.value if isinstance(k, enum.Enum) else k: plain(v) for k, v in value.items()}
    if t is list or t is tuple:
        return t(plain(v) for v in value)
    if t is set or t is frozenset:  # frozen dataclasses become dicts, which no set holds: then a list
        items = [plain(v) for v in value]
        return items if any(type(v) is dict for v in items) else t(items)
    if hasattr(t, "__dataclass_fields__") and not isinstance(value, type):
        return {name: plain(getattr(value, name)) for name in fields_of(t)}
    return dump(value) if is_model_type(t) else _as_base(value)


def _as_base(value: Any) -> Any:
    # An enum member as its value, a subclass of a container as that container (a named tuple as a tuple, a
    # Counter as a dict): rebuilt from the annotation of their position.
    if isinstance(value, enum.Enum):
        return plain(value.value)
    base = next((b for b in (dict, list, tuple, set, frozenset) if isinstance(value, b)), None)
    return value if base is None else plain(base(value))


def dump(model: Any) -> Any:
    """The stored form of a Pydantic model: ``model_dump(mode="json", round_trip=True)``, which :func:`rebuild`
    validates back.

    ``round_trip`` leaves computed fields out (a model that forbids extra fields refuses them) and keeps ``Json``
    fields as text. Fields are stored by name where Pydantic can validate by name whatever the model's alias
    settings (2.11 and later), else by alias, the form a model always validates. A model whose ``model_dump``
    override does not take these keywords is stored as ``model_dump(mode="json")``, as the override has it.
    """  # noqa: D205 - the summary needs two lines
    if not _takes_round_trip(type(model)):
        return model.model_dump(mode="json")
    return model.model_dump(mode="json", round_trip=True, by_alias=not _validates_by_name())


# Whether the model_dump of each model class met so far takes round_trip= and by_alias= (an override may not).
_ROUND_TRIP: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()


def _takes_round_trip(cls: type) -> bool:
    method = getattr(cls, "model_dump", None)
    if method is sys.modules["pydantic"].BaseModel.model_dump:
        return True
    known = _ROUND_TRIP.get(cls)
    if known is None:
        known = _ROUND_TRIP[cls] = _takes(method, {"round_trip", "by_alias"})
    return known


def _takes(function: Any, names: set[str]) -> bool:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # a signature Python cannot tell: taken to be Pydantic's
        return True
    named = {p.name for p in parameters if p.kind in {p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY}}
    return any(p.kind is p.VAR_KEYWORD for p in parameters) or names <= named


def _validates_by_name() -> bool:
    # Whether this Pydantic takes by_name= when validating (2.11 and later); pydantic is imported: a model exists.
    return _version_at_least(sys.modules["pydantic"].VERSION, (2, 11))


@functools.cache
def _version_at_least(version: str, wanted: tuple[int, int]) -> bool:
    major, minor = (int("".join(c for c in part if c.isdigit()) or 0) for part in version.split(".")[:2])
    return (major, minor) >= wanted


def optional_of(tp: Any) -> Any:
    """``X`` for ``X | None`` or ``Optional[X]``; ``tp`` itself for any other type.

    Raises:
        IdempotencyModelTypeError: A union of several types besides ``None``: a stored dict does not say which.
    """
    tp = core(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        rest = [arg for arg in typing.get_args(tp) if arg is not type(None)]
        if len(rest) != 1:
            msg = f"{tp} is a union of several types: a stored value does not say which of them to rebuild"
            raise IdempotencyModelTypeError(msg)
        return core(rest[0])
    return tp


def holds_models(tp: Any) -> bool:
    """Whether :func:`rebuild` would rebuild anything for ``tp``, maybe in containers.

    It does for a dataclass or a model, and for a type stored as its base type: an enum, a ``Literal`` of enum
    members, a named tuple, a ``Counter``, an ``OrderedDict``.

    Raises:
        IdempotencyModelTypeError: As :func:`optional_of`, for a union of several types holding a model.
    """
    try:
        tp = optional_of(tp)
    except IdempotencyModelTypeError:
        if any(holds_models(arg) for arg in typing.get_args(core(tp))):
            raise
        return False
    origin = typing.get_origin(tp)
    if is_dataclass_type(tp) or is_model_type(tp) or is_dataclass_type(origin):  # Box[Line]: a generic dataclass
        return True
    if isinstance(tp, enum.EnumMeta) or _is_named_tuple(tp) or _is_dict_kind(origin or tp):
        return True
    if origin is typing.Literal:
        return any(isinstance(arg, enum.Enum) for arg in typing.get_args(tp))
    if origin in _SEQUENCES or origin in _MAPPINGS:
        return any(holds_models(arg) for arg in typing.get_args(tp) if arg is not Ellipsis)
    return False


def rebuild(tp: Any, value: Any) -> Any:
    """``value`` (a stored result) with each dict in a dataclass or model position of ``tp`` rebuilt as one.

    An enum position holds the member of that value; a generic dataclass (``Box[Line]``) has its type variables
    replaced by the arguments given. ``None`` stays ``None``; a union of several types, a type variable, ``Any``
    and every type that is not a dataclass, a model, an enum or a container of them leave the value as stored.
    An exception raised on the way notes where (:func:`consumer.serialization._positions.position`).

    Raises:
        StoredFormError: A dataclass position holds something other than a dict of its fields (a ``TypeError``).
        NotAMemberError: An enum position holds no value of its members (a ``ValueError``).
        Exception: Whatever the dataclass's constructor or the model's validation raises.
    """
    if value is None or tp is Any or (type(tp) is type and tp in _LEAVES):
        return value
    try:
        tp = optional_of(tp)
    except IdempotencyModelTypeError:
        return value
    try:
        if is_dataclass_type(tp):
            return _dataclass(tp, value, field_types(tp))
        if is_model_type(tp):
            return _model(tp, value)
        if isinstance(tp, enum.EnumMeta):
            return _member(tp, value)
        return _contents(tp, value)
    except Exception as e:
        reached(e, tp)
        raise


# Types rebuild() leaves as they are, told apart without a call (the fields of most dataclasses).
_LEAVES = frozenset(
    (str, int, float, bool, bytes, bytearray, decimal.Decimal, dt.datetime, dt.date, dt.time, dt.timedelta, uuid.UUID)
)


def _member(cls: Any, value: Any) -> Any:
    try:
        return cls(value)  # a member given its value (or itself)
    except ValueError:  # its message quotes the value: data, not for a log line
        raise NotAMemberError(cls) from None


def _model(model: Any, value: Any) -> Any:
    # By field name or by alias, whichever the record has (by name as dump() stores it, by alias as Powertools and
    # earlier versions stored a model that serializes by alias), where Pydantic can be told to read both (2.11+);
    # before, as a model reads by default: by alias (and by name too with populate_by_name).
    names = {"by_alias": True, "by_name": True} if _validates_by_name() else {}
    try:  # JSON in, as model_dump(mode="json") wrote it: strict models accept their JSON forms (dates as text)
        text = json.dumps(value)
    except (TypeError, ValueError):  # not JSON data: validated as it is
        return model.model_validate(value, **names)
    return model.model_validate_json(text, **names)


def _generic_dataclass(tp: Any, value: Any) -> Any:
    # Box[Line]: the fields of Box, each type variable replaced by its argument (Any when not given).
    cls = typing.get_origin(tp)
    given = dict(zip(getattr(cls, "__parameters__", ()), typing.get_args(tp), strict=False))
    return _dataclass(cls, value, {name: substitute(hint, given) for name, hint in field_types(cls).items()})


def _contents(tp: Any, value: Any) -> Any:
    # The elements of a container type (the fields of a generic dataclass), rebuilt; a value that is not such a
    # container stays as stored.
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    kind = origin or tp
    if is_dataclass_type(origin) or origin is typing.Literal or _is_named_tuple(tp) or _is_dict_kind(kind):
        return _named_kind(tp, origin, args, value)
    if args and origin in _MAPPINGS and isinstance(value, dict) and len(args) == 2:  # noqa: PLR2004 - key, value
        return _entries(args[0], args[1], value)
    if not args or origin not in _SEQUENCES or type(value) not in _CONTAINERS:
        return value
    if origin in _SETS and type(value) is list:  # a set of dataclasses is stored as a list
        return _SETS[origin](_each([args[0]] * len(value), value))
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):  # noqa: PLR2004 - tuple[X, ...]
        return tuple(_each(args, value) + list(value[len(args) :]))
    return type(value)(_each([args[0]] * len(value), value))


# The dict subclasses rebuilt from their stored entries, with the annotations of their keys and values.
_DICT_KINDS: dict[Any, Callable[[tuple[Any, ...]], tuple[Any, Any]]] = {
    collections.Counter: lambda args: (args[0], int) if args else (Any, int),
    collections.OrderedDict: lambda args: args if len(args) == 2 else (Any, Any),  # noqa: PLR2004 - key, value
}


def _named_kind(tp: Any, origin: Any, args: tuple[Any, ...], value: Any) -> Any:
    # A generic dataclass (Box[Line]); a type the encoder stores as its base type, rebuilt exactly: an enum member
    # of a Literal, a Counter or an OrderedDict from their entries, a named tuple from its items.
    if is_dataclass_type(origin):
        return _generic_dataclass(tp, value)
    if origin is typing.Literal:
        return _literal(args, value)
    if origin is None and _is_named_tuple(tp):
        return _named_tuple(tp, value) if type(value) in (list, tuple) else value
    kind = origin or tp
    return kind(_entries(*_DICT_KINDS[kind](args), value)) if type(value) is dict else value


def _is_dict_kind(kind: Any) -> bool:
    return isinstance(kind, type) and kind in _DICT_KINDS


def _literal(args: tuple[Any, ...], value: Any) -> Any:
    # Literal[Status.OPEN]: the member of that value. A Literal that also lists raw values leaves it as stored.
    if isinstance(value, enum.Enum) or not args or not all(isinstance(a, enum.Enum) for a in args):
        return value
    for cls in dict.fromkeys(map(type, args)):
        try:
            member = cls(value)
        except ValueError:
            continue
        if any(member is a for a in args):
            return member
    raise NotAMemberError(type(args[0]))


def _is_named_tuple(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_fields")


def _named_tuple(cls: Any, value: Any) -> Any:
    # Its fields rebuilt as annotated; more items than fields fail as the constructor says.
    hints = field_types(cls)
    return cls(*_each([hints.get(name, Any) for name in cls._fields], value), *value[len(cls._fields) :])


def _each(hints: Any, values: Any) -> list[Any]:
    # Each value rebuilt as the type beside it (the shorter of the two sets the length).
    rebuilt: list[Any] = []
    try:
        for tp, value in zip(hints, values, strict=False):
            rebuilt.append(rebuild(tp, value))
    except Exception as e:
        stepped(e, ("index", len(rebuilt)))
        raise
    return rebuilt


def _entries(key_type: Any, value_type: Any, value: dict[Any, Any]) -> dict[Any, Any]:
    rebuilt, i, part = {}, 0, "key"
    try:
        for k, v in value.items():
            part = "key"
            key = rebuild(key_type, k)
            part = "value"
            rebuilt[key] = rebuild(value_type, v)
            i += 1
    except Exception as e:
        stepped(e, (part, i))  # the key by its place: keys are data
        raise
    return rebuilt


def _dataclass(cls: type, value: Any, hints: dict[str, Any]) -> Any:
    if not isinstance(value, dict):
        raise StoredFormError(f"a {_name(cls)} is stored as a dict of its fields, found {type(value).__name__}")
    fields = fields_of(cls)
    unknown = sorted(map(str, value.keys() - fields.keys()))
    if unknown:
        raise UnknownFieldsError(cls, unknown)
    values, name = {}, ""
    try:
        for name, v in value.items():
            values[name] = rebuild(hints.get(name, Any), v)
    except Exception as e:
        stepped(e, ("field", name))
        raise
    if values.keys() == fields.keys():
        # Every field as the first run had it, without running __init__ / __post_init__ again (which would derive
        # a value from a value already derived, or need an InitVar that was never stored).
        made: Any = object.__new__(cls)
        for name, v in values.items():
            object.__setattr__(made, name, v)
        return made
    missing = [n for n, f in fields.items() if n not in values and f.init and _required(f)]
    if missing:
        raise MissingFieldsError(cls, missing)
    made = cls(**{name: v for name, v in values.items() if fields[name].init})  # fields missing: their defaults
    for name, v in values.items():  # fields the constructor does not take hold what the first run had
        if not fields[name].init:
            object.__setattr__(made, name, v)
    return made


# The fields of each dataclass met so far, by name (a class defined in a test is let go with it).
_FIELDS: weakref.WeakKeyDictionary[type, dict[str, dataclasses.Field[Any]]] = weakref.WeakKeyDictionary()


def fields_of(cls: type) -> dict[str, dataclasses.Field[Any]]:
    """The fields of a dataclass by name, in order (:func:`dataclasses.fields`, kept for the next call)."""
    known = _FIELDS.get(cls)
    if known is None:
        known = _FIELDS[cls] = {f.name: f for f in dataclasses.fields(cls)}
    return known


def _required(field: dataclasses.Field[Any]) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
