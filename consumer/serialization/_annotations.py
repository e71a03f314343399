"""The annotations a typed replay follows: a function's return annotation and the fields of its dataclasses.

Text annotations (``from __future__ import annotations``) are resolved in the module that wrote them, else in the
globals of the function returning the class (code run by ``exec``); what resolves is kept for the next call.
"""

from __future__ import annotations

import dataclasses
import inspect
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


def is_dataclass_type(tp: Any) -> bool:
    """Whether ``tp`` is a dataclass (the class, not an instance)."""
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def core(tp: Any) -> Any:
    """``X`` for ``Annotated[X, ...]``; the supertype of a ``NewType``; any other type itself."""
    while True:
        if typing.get_origin(tp) is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif isinstance(tp, typing.NewType):
            tp = tp.__supertype__
        else:
            return tp


# The resolved field annotations of each dataclass met so far (a class defined in a test is let go with it).
_FIELD_TYPES: weakref.WeakKeyDictionary[type, dict[str, Any]] = weakref.WeakKeyDictionary()


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
    """Resolve, for :func:`rebuild`, the field annotations of every dataclass ``tp`` leads to.

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
