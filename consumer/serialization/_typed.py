"""Results in their stored form and back, led by a type: dataclasses and Pydantic models, nested in containers.

:func:`plain` turns every dataclass and Pydantic model inside a result into a dict, and every enum member into its
value (no type needed: it walks the value). :func:`rebuild` walks a stored value alongside a type expression and
turns each dict found where the type says a dataclass or a model back into one, and each value where it says an
enum into its member; everything else stays as the result encoder replayed it (exact types: tuples, Decimals,
datetimes, ...). What a type says is read from the type table (:func:`._types.shape`), one rebuild per kind.
Pydantic is never imported here: a class can only be a Pydantic model once ``pydantic`` is imported by whoever
defined it.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import json
import sys
import weakref
from typing import TYPE_CHECKING, Any

from consumer._serde import _ATOMS, _SCALARS, _name
from consumer.serialization._describe import (
    MissingFieldsError,
    NotAMemberError,
    StoredFormError,
    UnknownFieldsError,
    reached,
    stepped,
)
from consumer.serialization._types import fields_of, is_model_type, shape

if TYPE_CHECKING:
    from collections.abc import Callable

    from consumer.serialization._types import Shape

_CONTAINERS = (list, tuple, set, frozenset)


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


def rebuild(tp: Any, value: Any) -> Any:
    """``value`` (a stored result) with each dict in a dataclass or model position of ``tp`` rebuilt as one.

    An enum position holds the member of that value; a generic dataclass (``Box[Line]``) has its type variables
    replaced by the arguments given. ``None`` stays ``None``; a union of several types, a type variable, ``Any``
    and every type that is not a dataclass, a model, an enum or a container of them leave the value as stored.
    An exception raised on the way notes where (:func:`consumer.serialization._describe.position`).

    Raises:
        StoredFormError: A dataclass position holds something other than a dict of its fields (a ``TypeError``).
        NotAMemberError: An enum position holds no value of its members (a ``ValueError``).
        Exception: Whatever the dataclass's constructor or the model's validation raises.
    """
    if value is None or tp is Any or (type(tp) is type and tp in _LEAVES):
        return value
    found = shape(tp)
    try:
        return _REBUILD[found.kind](found, value)
    except Exception as e:
        reached(e, found.hint)
        raise


# Types rebuild() leaves as they are, told apart without a call (the fields of most dataclasses): those the result
# encoder replays exactly.
_LEAVES = frozenset((*_ATOMS, float, *_SCALARS))


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


def _sequence(found: Shape, value: Any) -> Any:
    # Each item rebuilt as annotated; a set of dataclasses is stored as a list. A value that is no list, tuple or
    # set stays as stored.
    if type(value) not in _CONTAINERS:
        return value
    first, rest = found.items()
    if found.kind == "tuple":  # tuple[A, B]: the items past those annotated stay as stored
        return tuple(_each(first, value) + list(value[len(first) :]))
    rebuilt = _each([rest] * len(value), value)
    return (found.cls if found.cls is not None and type(value) is list else type(value))(rebuilt)


def _mapping(found: Shape, value: Any) -> Any:
    # A dict's entries rebuilt as annotated; a value that is no dict stays as stored.
    return _entries(*found.entries(), value) if isinstance(value, dict) else value


def _dict_kind(found: Shape, value: Any) -> Any:
    # A Counter or an OrderedDict (the encoder stores it as a dict) made again from its entries, rebuilt.
    return found.cls(_entries(*found.entries(), value)) if type(value) is dict else value


def _named_tuple(found: Shape, value: Any) -> Any:
    # Its fields rebuilt as annotated; more items than fields fail as the constructor says.
    if type(value) not in (list, tuple):
        return value
    first, _ = found.items()
    return found.cls(*_each(first, value), *value[len(first) :])


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


def _required(field: dataclasses.Field[Any]) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def _as_stored(_: Shape, value: Any) -> Any:
    return value


# How each kind of the type table (:func:`._types.shape`) rebuilds a stored value.
_REBUILD: dict[str, Callable[[Shape, Any], Any]] = {
    "dataclass": lambda found, value: _dataclass(found.cls, value, found.fields()),
    "model": lambda found, value: _model(found.cls, value),
    "enum": lambda found, value: _member(found.cls, value),
    "literal": lambda found, value: _literal(found.args, value),
    "named tuple": _named_tuple,
    "dict kind": _dict_kind,
    "mapping": _mapping,
    "sequence": _sequence,
    "tuple": _sequence,
    "union": _as_stored,
    "stored": _as_stored,
}
