"""Results in their stored form and back, led by a type: dataclasses and Pydantic models, nested in containers.

:func:`plain` turns every dataclass and Pydantic model inside a result into a dict (no type needed: it walks the
value). :func:`rebuild` walks a stored value alongside a type expression and turns each dict found where the type
says a dataclass or a model back into one; everything else stays as the result encoder replayed it (exact types:
tuples, Decimals, datetimes, ...). Pydantic is never imported here: a class can only be a Pydantic model once
``pydantic`` is imported by whoever defined it.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import json
import sys
import types
import typing
import weakref
from typing import Any

from consumer._errors import IdempotencyModelTypeError
from consumer._serde import _name


class UnresolvedAnnotationError(IdempotencyModelTypeError):
    """An annotation names something its module does not define (yet): the type it stands for is unknown."""


class UnresolvedReturnError(UnresolvedAnnotationError):
    """A function's return annotation does not resolve (it may not name a dataclass or a model at all)."""


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


def is_dataclass_type(tp: Any) -> bool:
    """Whether ``tp`` is a dataclass (the class, not an instance)."""
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def is_model_type(tp: Any) -> bool:
    """Whether ``tp`` is a Pydantic v2 model class (``False`` without importing pydantic when nobody has)."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(tp, type) and issubclass(tp, pydantic.BaseModel)


def plain(value: Any) -> Any:
    """``value`` with every dataclass (its fields, as :func:`dataclasses.asdict` has them) and Pydantic model
    (``model_dump(mode="json")``) inside it turned into a dict; lists, tuples, sets (a list, once they hold dicts)
    and dict values are walked."""  # noqa: D205, D209
    t = type(value)
    if t is dict:
        return {k: plain(v) for k, v in value.items()}
    if t is list or t is tuple:
        return t(plain(v) for v in value)
    if t is set or t is frozenset:  # frozen dataclasses become dicts, which no set holds: then a list
        items = [plain(v) for v in value]
        return items if any(type(v) is dict for v in items) else t(items)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if is_model_type(t):
        return value.model_dump(mode="json")
    return value


def _core(tp: Any) -> Any:
    # Annotated[X, ...] is X; a NewType is its supertype.
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
    tp = _core(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        rest = [arg for arg in typing.get_args(tp) if arg is not type(None)]
        if len(rest) != 1:
            msg = f"{tp} is a union of several types: a stored value does not say which of them to rebuild"
            raise IdempotencyModelTypeError(msg)
        return _core(rest[0])
    return tp


def holds_models(tp: Any) -> bool:
    """Whether :func:`rebuild` would rebuild anything for ``tp`` (a dataclass or model, maybe in containers).

    Raises:
        IdempotencyModelTypeError: As :func:`optional_of`, for a union of several types holding a model.
    """
    try:
        tp = optional_of(tp)
    except IdempotencyModelTypeError:
        if any(holds_models(arg) for arg in typing.get_args(_core(tp))):
            raise
        return False
    if is_dataclass_type(tp) or is_model_type(tp):
        return True
    origin = typing.get_origin(tp)
    if origin in _SEQUENCES or origin in _MAPPINGS:
        return any(holds_models(arg) for arg in typing.get_args(tp) if arg is not Ellipsis)
    return False


def rebuild(tp: Any, value: Any) -> Any:
    """``value`` (a stored result) with each dict in a dataclass or model position of ``tp`` rebuilt as one.

    ``None`` stays ``None``; a union of several types, a type variable, ``Any`` and every type that is not a
    dataclass, a model or a container of them leave the value as stored.

    Raises:
        TypeError: A dataclass position holds something other than a dict of its fields.
        Exception: Whatever the dataclass's constructor or the model's validation raises.
    """
    if value is None:
        return None
    try:
        tp = optional_of(tp)
    except IdempotencyModelTypeError:
        return value
    if is_dataclass_type(tp):
        return _dataclass(tp, value)
    if is_model_type(tp):
        return _model(tp, value)
    return _contents(tp, value)


def _model(model: Any, value: Any) -> Any:
    try:  # JSON in, as model_dump(mode="json") wrote it: strict models accept their JSON forms (dates as text)
        text = json.dumps(value)
    except (TypeError, ValueError):  # not JSON data: validated as it is
        return model.model_validate(value)
    return model.model_validate_json(text)


def _contents(tp: Any, value: Any) -> Any:
    # The elements of a container type, rebuilt; a value that is not such a container stays as stored.
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if args and origin in _MAPPINGS and isinstance(value, dict) and len(args) == 2:  # noqa: PLR2004 - key, value
        return {rebuild(args[0], k): rebuild(args[1], v) for k, v in value.items()}
    if not args or origin not in _SEQUENCES or type(value) not in _CONTAINERS:
        return value
    if origin in _SETS and type(value) is list:  # a set of dataclasses is stored as a list
        return _SETS[origin](rebuild(args[0], v) for v in value)
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):  # noqa: PLR2004 - tuple[X, ...]
        return tuple([rebuild(a, v) for a, v in zip(args, value, strict=False)] + list(value[len(args) :]))
    return type(value)(rebuild(args[0], v) for v in value)


def _dataclass(cls: type, value: Any) -> Any:
    if not isinstance(value, dict):
        raise TypeError(f"a {_name(cls)} is stored as a dict of its fields, found {type(value).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(map(str, value.keys() - fields.keys()))
    if unknown:
        raise TypeError(f"{_name(cls)} has no field {', '.join(map(repr, unknown))}")
    hints = field_types(cls)
    values = {name: rebuild(hints.get(name, Any), v) for name, v in value.items()}
    made = cls(**{name: v for name, v in values.items() if fields[name].init})
    for name, v in values.items():  # fields the constructor does not take hold what the first run had
        if not fields[name].init:
            object.__setattr__(made, name, v)
    return made


# The resolved field annotations of each dataclass met so far (a class defined in a test is let go with it).
_FIELD_TYPES: weakref.WeakKeyDictionary[type, dict[str, Any]] = weakref.WeakKeyDictionary()


def field_types(cls: type, namespace: dict[str, Any] | None = None) -> dict[str, Any]:
    """The resolved annotations of a dataclass's fields (``from __future__ import annotations`` included).

    They are resolved in the class's module, else in ``namespace`` (the globals of the function returning it:
    code run by ``exec``, whose classes have no module), and kept for the next call.

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
        _FIELD_TYPES[cls] = hints
        return hints
    msg = f"the field annotations of {_name(cls)} cannot be resolved in its module ({type(first).__name__}: {first})"
    raise UnresolvedAnnotationError(msg) from first


def resolve_fields(tp: Any, namespace: dict[str, Any] | None = None, seen: set[type] | None = None) -> None:
    """Resolve, for :func:`rebuild`, the field annotations of every dataclass ``tp`` leads to.

    Raises:
        UnresolvedAnnotationError: As :func:`field_types`.
    """
    seen = set() if seen is None else seen
    tp = _core(tp)
    if is_dataclass_type(tp) and tp not in seen:
        seen.add(tp)
        for hint in field_types(tp, namespace).values():
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
