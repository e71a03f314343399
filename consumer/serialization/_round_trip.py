"""The check the built-in output serializers run on what they store: does the stored text replay as the result?

A Pydantic field left out of ``model_dump`` (``exclude=True``), a ``SecretStr`` (dumped masked), a subclass of the
annotated class, a dict returned where a dataclass is annotated: each is stored in a form that replays as
something else, or as nothing at all (a validation that fails on every duplicate). :func:`require_replay` rebuilds
the stored text as a replay would and compares it with the result, so that such a result is refused while it is
stored: the record is then committed without its response, and the body never runs again.

Its messages say where the replay differs by field names, indexes and types; a dict key by its place
(``[<key 2>]``), never by itself: they go to a log line, and keys and values are data.
"""

from __future__ import annotations

import decimal
import enum
import functools
from typing import TYPE_CHECKING, Any

from consumer._errors import IdempotencyModelTypeError
from consumer._serde import _ATOMS, _BASES, _warn_stored_as, decode_result
from consumer.serialization._describe import a_type, describe
from consumer.serialization._types import allows, fields_of, is_model_type, model_fields, shape

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator


class NotReplayableError(ValueError):
    """A result is stored in a form that does not replay as itself; the message says where it differs."""


def require_replay(result: Any, text: str, from_dict: Callable[[Any], Any], hint: Any = Any) -> None:
    """Check that ``text`` (the encoded ``to_dict(result)``) replays as ``result`` through ``from_dict``.

    ``text`` is decoded, then goes through ``from_dict``, as on a replay. The rebuilt value must have the type of
    ``result`` at every level and equal it field by field; a value whose ``==`` is identity, or raises (a NumPy
    array), is not compared. ``hint`` is the type ``from_dict`` rebuilds: where its annotations allow, a subclass
    of a built-in type may replay as that type.

    Raises:
        NotReplayableError: The rebuilt value differs from ``result``, or rebuilding it raised.
    """
    decoded = decode_result(text)
    try:
        replayed = None if decoded is None else from_dict(decoded)
    except Exception as e:
        raise NotReplayableError(describe(e, type(result).__qualname__, result)) from e
    if type(replayed) is not type(result) and not _replays_as(result, replayed, hint):
        raise NotReplayableError(f"{a_type(type(result))} replays as {a_type(type(replayed))}")
    difference = first_difference(result, replayed, type(result).__qualname__, hint)
    if difference is not None:
        raise NotReplayableError(difference)


def first_difference(original: Any, replayed: Any, where: str, hint: Any = Any) -> str | None:  # noqa: PLR0911 - one per form
    """Where ``replayed`` differs from ``original`` (``"Order.lines[0].sku: ..."``), or ``None`` when nowhere.

    ``hint`` is what the annotations say ``original`` is (``Any`` when not known). Types must match at every
    level, but for a subclass of a built-in type (an enum with a ``str`` or ``int`` mixin, a named tuple) replayed
    as that type where ``hint`` allows that type (``int``, ``Any``), as the result encoder stores one (with a
    warning, once per type), a raw value replayed as the enum member equal to it, and a generic model replayed as
    the parametrization its annotation names. Lists, tuples and dicts (their subclasses too) are compared item by
    item, sets member by member, dataclasses and Pydantic models field by field (whatever their own ``__eq__``;
    a dataclass's other attributes must replay too), Decimals with their exponent, anything else with ``==``
    (NaN equals NaN), unless its ``==`` is identity or raises.
    """
    t = type(original)
    if t is not type(replayed) and not _replays_as(original, replayed, hint):
        return f"{where}: {a_type(t)} replays as {a_type(type(replayed))}"
    if t in _ATOMS or t is decimal.Decimal or t is float:
        return None if _equal(original, replayed) else f"{where}: {a_type(t)} replays with another value"
    walk = _CONTAINERS.get(t) or _walk_of(t)
    if walk is not None:
        return walk(original, replayed, where, hint)
    if hasattr(t, "__dataclass_fields__"):
        return _dataclass(original, replayed, where, hint)
    if is_model_type(t):
        return _model(original, replayed, where)
    if _equal(original, replayed):
        return None
    how = "masked" if callable(getattr(original, "get_secret_value", None)) else "with another value"
    return f"{where}: {a_type(t)} replays {how}"


def _replays_as(original: Any, replayed: Any, hint: Any) -> bool:
    # Another type, but the value the result holds: a raw value of an enum field replayed as its member (accepted,
    # if == says they are the same: a str or int enum), a generic model replayed as its annotated parametrization
    # (Page[Item] for a Page built without it), a subclass of a built-in type replayed as that type where the
    # annotation allows that type (warned).
    if isinstance(replayed, enum.Enum) and not isinstance(original, enum.Enum):
        return isinstance(replayed, type(original)) and _same_member(original, replayed)
    generic = getattr(type(replayed), "__pydantic_generic_metadata__", None)
    if generic and generic.get("origin") is type(original):
        return True
    return _as_its_base(original, replayed, hint)


def _same_member(original: Any, member: enum.Enum) -> bool:
    try:
        return bool(member == original)
    except Exception:  # noqa: BLE001 - an == that raises cannot tell them the same
        return False


def _as_its_base(original: Any, replayed: Any, hint: Any) -> bool:
    # An IntEnum in a field annotated int (or Any) replays as an int, as the encoder stores it: warned, not refused.
    # Where the annotation names the subclass (a named tuple, Literal[Status.OPEN], Counter), a base value is not
    # what it says: refused, as any other type would be. The warning is once per type, as the encoder's: it is
    # said of a type the application chose to return as is, not of a record.
    base = type(replayed)
    if base not in _BASES or type(original) is bool or not isinstance(original, base) or not allows(hint, base):
        return False
    _warn_stored_as(type(original), base)
    return True


def _items(original: list[Any] | tuple[Any, ...], replayed: Any, where: str, hint: Any) -> str | None:
    if len(original) != len(replayed):
        return f"{where}: {len(original)} items replay as {len(replayed)}"
    first, rest = shape(hint).items()
    for i, (o, r) in enumerate(zip(original, replayed, strict=True)):
        at = first[i] if i < len(first) else rest
        if not _same_scalar(o, r) and (difference := first_difference(o, r, f"{where}[{i}]", at)):
            return difference
    return None


def _same_scalar(original: Any, replayed: Any) -> bool:
    # The usual item or field (a str, an int, ...) equal to its replay: nothing to walk, no place to name.
    t = type(original)
    return t is type(replayed) and t in _ATOMS and original == replayed


def _entries(original: dict[Any, Any], replayed: dict[Any, Any], where: str, hint: Any) -> str | None:
    # In order: a dict replays with its keys in the order they were stored (NaN keys, 1 and True, told apart).
    # A key is named by its place: keys are data.
    if len(original) != len(replayed):
        return f"{where}: {len(original)} keys replay as {len(replayed)}"
    keys, values = shape(hint).entries()
    for i, ((key, value), (other_key, other_value)) in enumerate(zip(original.items(), replayed.items(), strict=True)):
        difference = first_difference(key, other_key, f"{where}.keys()[{i}]", keys)
        difference = difference or first_difference(value, other_value, f"{where}[<key {i}>]", values)
        if difference is not None:
            return difference
    return None


def _members(original: set[Any] | frozenset[Any], replayed: Any, where: str, hint: Any) -> str | None:
    # The members == cannot find in the other set (NaN in them) must each match one left over there.
    if len(original) != len(replayed):
        return f"{where}: {len(original)} members replay as {len(replayed)}"
    try:
        missing = [m for m in original if m not in replayed]
        extra = [m for m in replayed if m not in original]
    except Exception:  # noqa: BLE001 - an == or a hash that raises says nothing about the replay
        return None
    each = shape(hint).items()[1]
    for member in missing:
        match = next((i for i, e in enumerate(extra) if first_difference(member, e, where, each) is None), None)
        if match is None:
            return (
                None if _by_identity(member) else f"{where}: a member {a_type(type(member))} replays as another value"
            )
        extra.pop(match)
    return None


_CONTAINERS: dict[type, Callable[[Any, Any, str, Any], str | None]] = {
    list: _items,
    tuple: _items,
    dict: _entries,
    set: _members,
    frozenset: _members,
}


def _walk_of(t: type) -> Callable[[Any, Any, str, Any], str | None] | None:
    # A subclass of a container (a named tuple, a Counter), walked as its base; not an enum (compared by ==).
    if issubclass(t, enum.Enum):
        return None
    return next((walk for base, walk in _CONTAINERS.items() if issubclass(t, base)), None)


def _fields(original: Any, replayed: Any, where: str, names: Iterable[str], annotated: dict[str, Any]) -> str | None:
    for n in names:
        o, r = getattr(original, n), getattr(replayed, n)
        if not _same_scalar(o, r) and (difference := first_difference(o, r, f"{where}.{n}", annotated.get(n, Any))):
            return difference
    return None


def _dataclass(original: Any, replayed: Any, where: str, hint: Any) -> str | None:
    cls = type(original)
    names = fields_of(cls)
    found = shape(hint)
    try:  # the annotations of its fields, those of the type it is an instance of (Box[Line]) given
        annotated = (found if found.cls is cls else shape(cls)).fields()
    except IdempotencyModelTypeError:  # not resolved: nothing known of its fields
        annotated = {}
    difference = _fields(original, replayed, where, names, annotated)
    return difference or _unstored(original, replayed, where, names)


def _unstored(original: Any, replayed: Any, where: str, names: dict[str, Any]) -> str | None:
    # An attribute that is not a field (set by __post_init__ or a custom __init__, in the instance's __dict__ or
    # in a slot a class of its MRO declares) is not stored, and a replay, which runs neither again, lacks it; a
    # cached_property is computed again when it is read.
    attributes = getattr(original, "__dict__", None)
    if attributes is not None and not attributes.keys() <= names.keys():
        kept = getattr(replayed, "__dict__", {})
        for name in attributes:
            if name not in kept and name not in names and not _cached(type(original), name):
                return f"{where}.{name}: an attribute that is not a field is not stored: a replay does not have it"
    for name in _slot_names(type(original)):
        if name not in names and hasattr(original, name) and not hasattr(replayed, name):
            return f"{where}.{name}: an attribute that is not a field is not stored: a replay does not have it"
    return None


def _slot_names(cls: type) -> Iterator[str]:
    # The slots of the class and its bases, by attribute name: a slot named __x is _Class__x, as any private name.
    for c in cls.__mro__:
        slots = vars(c).get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            private = name.startswith("__") and not name.endswith("__")
            yield f"_{c.__name__.lstrip('_')}{name}" if private else name


def _cached(cls: type, name: str) -> bool:
    found = next((vars(c)[name] for c in cls.__mro__ if name in vars(c)), None)
    return isinstance(found, functools.cached_property)


def _model(original: Any, replayed: Any, where: str) -> str | None:
    # Private attributes are not data (model_dump leaves them out): a replay has them as a new model gets them.
    annotated = model_fields(type(original))
    difference = _fields(original, replayed, where, annotated, annotated)
    if difference is None and (original.__pydantic_extra__ or replayed.__pydantic_extra__):
        difference = _entries(original.__pydantic_extra__ or {}, replayed.__pydantic_extra__ or {}, where, Any)
    return difference


def _equal(original: Any, replayed: Any) -> bool:
    # True when the two are equal (Decimals with their exponent: 30.50 is not 30.5), or when == cannot tell
    # (identity, or it raises).
    if type(original) is decimal.Decimal and type(replayed) is decimal.Decimal:
        return original.as_tuple() == replayed.as_tuple()
    if _by_identity(original):
        return True
    try:
        return bool(original == replayed) or (_nan(original) and _nan(replayed))
    except Exception:  # noqa: BLE001 - an == that raises (NumPy arrays, a signalling NaN) says nothing
        return True


_IDENTITY: Any = object.__eq__


def _by_identity(value: Any) -> bool:
    return type(value).__eq__ is _IDENTITY


def _nan(value: Any) -> bool:
    return isinstance(value, float | decimal.Decimal) and value != value  # noqa: PLR0124 - NaN is not itself
