"""The type table of typed replays: what a type expression says a stored value is, and the types of its parts.

:func:`shape` reads a type expression (``Annotated``, ``NewType`` and ``| None`` taken off) into a :class:`Shape`:
the kind a rebuild follows (a dataclass, a model, an enum, a ``Literal``, a named tuple, a dict subclass, a
mapping, a sequence, or a type left as stored) and the annotations of its parts: its first items and the others,
its keys and values, its fields. The rebuild (:mod:`._typed`), the replay check
(:mod:`._round_trip`) and the messages that say where a replay failed (:mod:`._describe`) all follow a type
through it, so that they agree on what each place of a result is.

Text annotations (``from __future__ import annotations``) are resolved in the module that wrote them, else in the
globals of the function returning the class (code run by ``exec``); what resolves is kept for the next call.
Pydantic is never imported here: a class can only be a Pydantic model once ``pydantic`` is imported by whoever
defined it.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import inspect
import sys
import types
import typing
import weakref
from typing import Any, NamedTuple

from consumer._errors import IdempotencyModelTypeError
from consumer._serde import _name

_SEQUENCES = frozenset(
    {list, tuple, set, frozenset, collections.abc.Sequence, collections.abc.MutableSequence, collections.abc.Set}
    | {collections.abc.MutableSet, collections.abc.Collection, collections.abc.Iterable}
)
_SETS: dict[Any, type] = {
    set: set,
    frozenset: frozenset,
    collections.abc.Set: frozenset,
    collections.abc.MutableSet: set,
}
_MAPPINGS = frozenset({dict, collections.abc.Mapping, collections.abc.MutableMapping})
_UNIONS = (typing.Union, types.UnionType)
_NUMBERS = {float: (int,), complex: (int, float)}  # int where float is annotated is a float, for type checkers


class UnresolvedAnnotationError(IdempotencyModelTypeError):
    """An annotation names something its module does not define (yet): the type it stands for is unknown."""


class UnresolvedReturnError(UnresolvedAnnotationError):
    """A function's return annotation does not resolve (it may not name a dataclass or a model at all)."""


def is_dataclass_type(tp: Any) -> bool:
    """Whether ``tp`` is a dataclass (the class, not an instance)."""
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def is_model_type(tp: Any) -> bool:
    """Whether ``tp`` is a Pydantic v2 model class (``False`` without importing pydantic when nobody has)."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(tp, type) and issubclass(tp, pydantic.BaseModel)


def core(tp: Any) -> Any:
    """``X`` for ``Annotated[X, ...]``; the supertype of a ``NewType``; any other type itself."""
    while True:
        if typing.get_origin(tp) is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif isinstance(tp, typing.NewType):
            tp = tp.__supertype__
        else:
            return tp


def optional_of(tp: Any) -> Any:
    """``X`` for ``X | None`` or ``Optional[X]``; ``tp`` itself for any other type.

    Raises:
        IdempotencyModelTypeError: A union of several types besides ``None``: a stored dict does not say which.
    """
    tp = core(tp)
    if typing.get_origin(tp) in _UNIONS:
        rest = [arg for arg in typing.get_args(tp) if arg is not type(None)]
        if len(rest) != 1:
            msg = f"{tp} is a union of several types: a stored value does not say which of them to rebuild"
            raise IdempotencyModelTypeError(msg)
        return core(rest[0])
    return tp


class Shape(NamedTuple):
    """What a type expression says a stored value is: how it is rebuilt, and the annotations of its parts.

    Attributes:
        kind: What a rebuild makes of the value: ``"dataclass"`` (``Box[Line]`` too), ``"model"``, ``"enum"``,
            ``"literal"``, ``"named tuple"``, ``"dict kind"`` (a ``Counter``, an ``OrderedDict``), ``"mapping"``,
            ``"sequence"`` (lists, sets, ``tuple[X, ...]``), ``"tuple"`` (``tuple[A, B]``); ``"union"`` (of
            several types) and ``"stored"`` leave it as stored.
        hint: The type expression without ``Annotated``, ``NewType`` and ``| None``.
        cls: The class it names (``Box`` for ``Box[Line]``, ``frozenset`` for ``Set[X]``), if any.
        args: The type arguments (a union's members, a ``Literal``'s values).
    """

    kind: str
    hint: Any
    cls: Any = None
    args: tuple[Any, ...] = ()

    def items(self) -> tuple[tuple[Any, ...], Any]:
        """The annotations of the items of a sequence or a set: those of the first items, and that of the others.

        ``((), X)`` for ``list[X]``, ``tuple[X, ...]`` or ``set[X]``; ``((A, B), Any)`` for ``tuple[A, B]`` and a
        named tuple's fields; ``((), Any)`` for anything else.

        Raises:
            UnresolvedAnnotationError: As :func:`field_types`, for a named tuple.
        """
        if self.kind == "named tuple":
            hints = field_types(self.cls)
            return tuple(hints.get(name, Any) for name in self.cls._fields), Any
        if self.kind == "tuple":
            return self.args, Any
        return (), (self.args[0] if self.kind == "sequence" else Any)

    def entries(self) -> tuple[Any, Any]:
        """The annotations of the keys and the values of a dict (``Counter[K]``: ``K`` and ``int``)."""
        if self.kind == "dict kind":
            return _DICT_KINDS[self.cls](self.args)
        if self.cls in _ENTRIES and len(self.args) == 2:  # noqa: PLR2004 - key, value
            return self.args
        return Any, Any

    def fields(self) -> dict[str, Any]:
        """The annotations of the fields of a dataclass or a model by name; a generic dataclass's (``Box[Line]``)
        with its type variables replaced by the arguments given (``Any`` when not given); ``{}`` for another kind.

        Raises:
            UnresolvedAnnotationError: As :func:`field_types`.
        """  # noqa: D205 - the summary needs two lines
        if self.kind == "model":
            return model_fields(self.cls)
        if self.kind != "dataclass":
            return {}
        hints = field_types(self.cls)
        if self.hint is self.cls:
            return hints
        given = dict(zip(getattr(self.cls, "__parameters__", ()), self.args, strict=False))
        return {name: substitute(hint, given) for name, hint in hints.items()}


# The dict subclasses rebuilt from their stored entries: the annotations of their keys and values.
_DICT_KINDS: dict[Any, typing.Callable[[tuple[Any, ...]], tuple[Any, Any]]] = {
    collections.Counter: lambda args: (args[0], int) if args else (Any, int),
    collections.OrderedDict: lambda args: args if len(args) == 2 else (Any, Any),  # noqa: PLR2004 - key, value
}
_ENTRIES = _MAPPINGS | {collections.defaultdict}  # a defaultdict's entries are followed, not rebuilt


def shape(hint: Any) -> Shape:  # noqa: PLR0911 - one answer per kind
    """The :class:`Shape` of ``hint``: ``"stored"`` for ``Any``, a type variable, and any type that is not a
    dataclass, a model, an enum, a type stored as its base type, or a container of them."""  # noqa: D205, D209
    try:
        tp = optional_of(hint)
    except IdempotencyModelTypeError:
        return Shape("union", core(hint), args=typing.get_args(core(hint)))
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if is_dataclass_type(tp) or is_model_type(tp) or is_dataclass_type(origin):
        return Shape("model", tp, tp) if is_model_type(tp) else Shape("dataclass", tp, origin or tp, args)
    if isinstance(tp, enum.EnumMeta):
        return Shape("enum", tp, tp)
    if origin is typing.Literal:
        return Shape("literal", tp, args=args)
    if origin is None and isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_fields"):
        return Shape("named tuple", tp, tp)
    kind = origin or tp
    if isinstance(kind, type) and kind in _DICT_KINDS:
        return Shape("dict kind", tp, kind, args)
    if origin in _MAPPINGS and len(args) == 2:  # noqa: PLR2004 - key, value
        return Shape("mapping", tp, origin, args)
    if origin in _SEQUENCES and args:
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):  # noqa: PLR2004 - tuple[X, ...]
            return Shape("tuple", tp, tuple, args)
        return Shape("sequence", tp, _SETS.get(origin), args)
    return Shape("stored", tp, origin, args)


def holds_models(tp: Any) -> bool:
    """Whether a rebuild would rebuild anything for ``tp``, maybe in containers.

    It does for a dataclass or a model, and for a type stored as its base type: an enum, a ``Literal`` of enum
    members, a named tuple, a ``Counter``, an ``OrderedDict``.

    Raises:
        IdempotencyModelTypeError: As :func:`optional_of`, for a union of several types holding a model.
    """
    found = shape(tp)
    if found.kind == "union":
        if any(holds_models(arg) for arg in found.args):
            optional_of(tp)  # raises: a stored value does not say which of them to rebuild
        return False
    if found.kind == "literal":
        return any(isinstance(arg, enum.Enum) for arg in found.args)
    if found.kind in {"mapping", "sequence", "tuple"}:
        return any(holds_models(arg) for arg in found.args if arg is not Ellipsis)
    return found.kind != "stored"


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


# The fields of each dataclass, their resolved annotations, and those of each model's fields, met so far (a class
# defined in a test is let go with it).
_FIELDS: weakref.WeakKeyDictionary[type, dict[str, dataclasses.Field[Any]]] = weakref.WeakKeyDictionary()
_FIELD_TYPES: weakref.WeakKeyDictionary[type, dict[str, Any]] = weakref.WeakKeyDictionary()
_MODEL_FIELDS: weakref.WeakKeyDictionary[type, dict[str, Any]] = weakref.WeakKeyDictionary()


def fields_of(cls: type) -> dict[str, dataclasses.Field[Any]]:
    """The fields of a dataclass by name, in order (:func:`dataclasses.fields`, kept for the next call)."""
    known = _FIELDS.get(cls)
    if known is None:
        known = _FIELDS[cls] = {f.name: f for f in dataclasses.fields(cls)}
    return known


def model_fields(cls: type) -> dict[str, Any]:
    """The annotations of the fields of the Pydantic model class ``cls``, by name."""
    known = _MODEL_FIELDS.get(cls)
    if known is None:
        fields = getattr(cls, "__pydantic_fields__", None) or getattr(cls, "model_fields", {})
        known = _MODEL_FIELDS[cls] = {name: field.annotation for name, field in fields.items()}
    return known


def field_types(cls: type, namespace: dict[str, Any] | None = None) -> dict[str, Any]:
    """The resolved annotations of a dataclass's fields (``from __future__ import annotations`` included).

    They are resolved in the class's module, else in ``namespace`` (the globals of the function returning it:
    code run by ``exec``, whose classes have no module), and kept for the next call. A field a generic base
    declares has its type variables as the class binds them (``LineBox(Box[Line])``: ``item: Line``, not ``T``).

    Raises:
        UnresolvedAnnotationError: An annotation names something neither defines (a class defined inside a
            function, or imported only under ``TYPE_CHECKING``).
    """
    known = _FIELD_TYPES.get(cls)
    if known is not None:
        return known
    first: Exception | None = None
    for localns in (None,) if namespace is None else (None, namespace):
        try:
            hints = typing.get_type_hints(cls, localns=localns, include_extras=True)
        except Exception as e:  # noqa: BLE001 - any error of an annotation's evaluation: the first one is reported
            first = first or e
            continue
        hints = _FIELD_TYPES[cls] = _bound(cls, hints)
        return hints
    msg = f"the field annotations of {_name(cls)} cannot be resolved in its module ({type(first).__name__}: {first})"
    raise UnresolvedAnnotationError(msg) from first


def _bound(cls: type, hints: dict[str, Any]) -> dict[str, Any]:
    # Each annotation with the type variables of the generic base that declares it replaced by what ``cls``
    # binds them to through its bases (``class LineBox(Box[Line])``); its own type variables stay.
    bindings: dict[type, dict[Any, Any]] = {}
    _bind_bases(cls, {p: p for p in getattr(cls, "__parameters__", ())}, bindings)
    if not bindings:
        return hints
    owners = {name: c for c in reversed(cls.__mro__) for name in inspect.get_annotations(c)}
    return {name: substitute(h, bindings.get(owners.get(name, cls), {}), keep=True) for name, h in hints.items()}


def _bind_bases(cls: type, given: dict[Any, Any], bindings: dict[type, dict[Any, Any]]) -> None:
    # The type variables of each generic base of ``cls``, ``given`` the binding of those of ``cls`` itself.
    for base in vars(cls).get("__orig_bases__", ()):  # its own: a class without any inherits its base's
        origin = typing.get_origin(base)
        if isinstance(origin, type) and origin is not typing.Generic and origin not in bindings:
            params = getattr(origin, "__parameters__", ())
            args = [substitute(arg, given, keep=True) for arg in typing.get_args(base)]
            bindings[origin] = dict(zip(params, args, strict=False))
            _bind_bases(origin, bindings[origin], bindings)


def substitute(hint: Any, given: dict[Any, Any], *, keep: bool = False) -> Any:
    """``hint`` with each type variable in it replaced by its type in ``given`` (``Any`` when not given, or the
    type variable itself with ``keep``).

    ``T`` itself, and ``list[T]``, ``T | None``, ``Box[T]``: the forms that list their type variables.
    """  # noqa: D205 - the summary needs two lines
    if isinstance(hint, typing.TypeVar):
        return given.get(hint, hint if keep else Any)
    params = () if isinstance(hint, type) else getattr(hint, "__parameters__", ())
    return hint[tuple(given.get(p, p if keep else Any) for p in params)] if params else hint


def resolve_fields(tp: Any, namespace: dict[str, Any] | None = None, seen: set[type] | None = None) -> None:
    """Resolve, for a rebuild, the field annotations of every dataclass ``tp`` leads to.

    Raises:
        UnresolvedAnnotationError: As :func:`field_types`.
    """
    seen = set() if seen is None else seen
    tp = core(tp)
    for cls in (tp, typing.get_origin(tp)):  # Box[Line]: Box too
        if is_dataclass_type(cls) and cls not in seen:
            seen.add(cls)
            for hint in field_types(cls, namespace).values():
                resolve_fields(hint, namespace, seen)
    for arg in typing.get_args(tp):
        resolve_fields(arg, namespace, seen)


#: What :func:`return_type` answers for a function without a return annotation.
NO_ANNOTATION: Any = object()


def return_type(function: Any) -> Any:
    """The resolved return annotation of ``function`` (``-> None`` is ``NoneType``), or :data:`NO_ANNOTATION`.

    Raises:
        UnresolvedReturnError: The annotation is text that does not resolve in the function's module (yet).
    """
    annotations = getattr(function, "__annotations__", None)
    if not isinstance(annotations, dict) or "return" not in annotations:
        return NO_ANNOTATION
    annotation = annotations["return"]
    if not isinstance(annotation, str):
        return type(None) if annotation is None else annotation
    holder = types.SimpleNamespace(__annotations__={"return": annotation})
    try:
        return typing.get_type_hints(holder, namespace_of(function), None, include_extras=True)["return"]
    except Exception as e:
        msg = f"the return annotation of {function!r} does not resolve ({type(e).__name__}: {e})"
        raise UnresolvedReturnError(msg) from e


def namespace_of(function: Any) -> dict[str, Any]:
    """The globals of the module that defined ``function`` (through ``functools.wraps`` wrappers)."""
    while hasattr(function, "__wrapped__"):  # functools.wraps copies the annotations, not the module
        function = function.__wrapped__
    namespace = getattr(function, "__globals__", None)
    return namespace if isinstance(namespace, dict) else {}
