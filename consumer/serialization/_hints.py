"""The annotation at each place of a typed result, for the replay check: of its items, entries and fields.

A subclass of a built-in type (an enum with a ``str`` mixin, a named tuple, a ``Counter``) that a replay returns
as its base type replays as what the first run returned only where the annotation there allows that base type:
:func:`allows` tells, and the other functions follow a type expression down a result, as a rebuild does.
Whatever is not known (``Any``, a type variable, a form these do not follow) allows everything.
"""

from __future__ import annotations

import collections.abc
import types
import typing
import weakref
from typing import Any

from consumer._errors import IdempotencyModelTypeError
from consumer.serialization._annotations import core, field_types, substitute
from consumer.serialization._typed import optional_of

_SEQUENCES = frozenset(
    {list, tuple, set, frozenset, collections.abc.Sequence, collections.abc.MutableSequence, collections.abc.Set}
    | {collections.abc.MutableSet, collections.abc.Collection, collections.abc.Iterable}
)
_MAPPINGS = frozenset(
    (dict, collections.OrderedDict, collections.defaultdict, collections.abc.Mapping, collections.abc.MutableMapping)
)
_UNIONS = (typing.Union, types.UnionType)
_NUMBERS = {float: (int,), complex: (int, float)}  # int where float is annotated is a float, for type checkers


def bare(hint: Any) -> Any:
    """``hint`` without ``Annotated``, ``NewType`` and ``| None``; a union of several types stays a union."""
    if hint is Any:
        return hint
    try:
        return optional_of(hint)
    except IdempotencyModelTypeError:
        return core(hint)


def items(hint: Any) -> tuple[tuple[Any, ...], Any]:
    """The annotations of the items of a sequence or a set: those of the first items, and that of the others.

    ``((), X)`` for ``list[X]``, ``tuple[X, ...]`` or ``set[X]``; ``((A, B), Any)`` for ``tuple[A, B]`` and a
    named tuple's fields; ``((), Any)`` for anything else.
    """
    hint = bare(hint)
    if _is_named_tuple(hint):
        hints = field_types(hint)
        return tuple(hints.get(name, Any) for name in hint._fields), Any
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):  # noqa: PLR2004 - tuple[X, ...]
        return args, Any
    return (), (args[0] if args and origin in _SEQUENCES else Any)


def entries(hint: Any) -> tuple[Any, Any]:
    """The annotations of the keys and the values of a dict (``Counter[K]``: ``K`` and ``int``)."""
    hint = bare(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is collections.Counter and len(args) == 1:
        return args[0], int
    if origin in _MAPPINGS and len(args) == 2:  # noqa: PLR2004 - key, value
        return args[0], args[1]
    return Any, Any


def dataclass_fields(cls: type, hint: Any) -> dict[str, Any]:
    """The annotations of the fields of ``cls``, an instance of ``hint``: its type arguments (``Box[Line]``) given."""
    try:
        hints = field_types(cls)
    except IdempotencyModelTypeError:  # not resolved: nothing known of its fields
        return {}
    hint = bare(hint)
    if typing.get_origin(hint) is not cls:
        return hints
    given = dict(zip(getattr(cls, "__parameters__", ()), typing.get_args(hint), strict=False))
    return {name: substitute(h, given) for name, h in hints.items()}


# The annotations of each model class's fields met so far (a class defined in a test is let go with it).
_MODEL_FIELDS: weakref.WeakKeyDictionary[type, dict[str, Any]] = weakref.WeakKeyDictionary()


def model_fields(cls: type) -> dict[str, Any]:
    """The annotations of the fields of the Pydantic model class ``cls``, by name."""
    known = _MODEL_FIELDS.get(cls)
    if known is None:
        fields = getattr(cls, "__pydantic_fields__", None) or getattr(cls, "model_fields", {})
        known = _MODEL_FIELDS[cls] = {name: field.annotation for name, field in fields.items()}
    return known


def allows(hint: Any, base: type) -> bool:  # noqa: PLR0911 - one answer per form
    """Whether a value of the built-in type ``base`` is what ``hint`` annotates (``int`` for ``int``, ``Any``,
    ``float``, ``int | str``; a ``tuple`` for ``Sequence[int]``): not for a subclass (a named tuple, an enum), nor
    a ``Literal`` without a value of that type."""  # noqa: D205, D209 - one sentence
    hint = core(hint)
    if hint is Any or hint is object or isinstance(hint, typing.TypeVar):
        return True
    origin = typing.get_origin(hint)
    if origin in _UNIONS:
        return any(allows(arg, base) for arg in typing.get_args(hint))
    if origin is typing.Literal:
        return any(type(arg) is base for arg in typing.get_args(hint))
    cls = origin or hint
    if not isinstance(cls, type):  # a form not followed here (a forward reference): not judged
        return True
    if typing.is_typeddict(cls):
        return base is dict
    try:
        return issubclass(base, cls) or base in _NUMBERS.get(cls, ())
    except TypeError:  # a class issubclass cannot judge (a protocol that is not runtime-checkable)
        return True


def _is_named_tuple(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, tuple) and hasattr(hint, "_fields")
