"""What a user's function is: refused when it is async or a generator, and whether it asks for the guard."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

#: How a record handler receives the guard: not at all, as its second positional argument, or by keyword.
NO_GUARD, POSITIONAL, KEYWORD = "none", "positional", "keyword"


@dataclass(frozen=True, slots=True)
class HandlerShape:
    """What the batch processor needs to know about a record handler."""

    guard_passing: str


def refuse_async(function: Callable[..., Any], what: str) -> None:
    """Raise ``TypeError`` for an ``async def`` or generator function: its "result" would be committed unrun.

    Args:
        function: The user's function (or callable object).
        what: How the error names it (``"record handler"``, ``"@idempotent handler"``).
    """
    import inspect  # noqa: PLC0415 - costs 6 ms at import time; checked once per function

    for candidate in (function, getattr(function, "__call__", None)):  # noqa: B004 - a callable object's method
        if inspect.iscoroutinefunction(candidate) or inspect.isasyncgenfunction(candidate):
            msg = (
                f"{what} {_name(function)} is async: calling it returns an awaitable, not a result, so the record "
                "would be committed without its body running. Use a plain def."
            )
            raise TypeError(msg)
        if inspect.isgeneratorfunction(candidate):
            msg = (
                f"{what} {_name(function)} is a generator function: calling it runs nothing until the generator "
                "is consumed. Return a value (e.g. a list) instead."
            )
            raise TypeError(msg)


def handler_shape(handler: Callable[..., Any]) -> HandlerShape:
    """Inspect ``handler`` (cached when it is hashable); raises ``TypeError`` when it is async or a generator."""
    try:
        hash(handler)
    except TypeError:  # an unhashable callable object: inspected on every batch
        return _shape(handler)
    return _cached_shape(handler)


@functools.lru_cache(maxsize=64)
def _cached_shape(handler: Callable[..., Any]) -> HandlerShape:
    return _shape(handler)


def _shape(handler: Callable[..., Any]) -> HandlerShape:
    import inspect  # noqa: PLC0415 - see refuse_async

    refuse_async(handler, "record handler")
    try:
        params = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError):
        return HandlerShape(NO_GUARD)
    # Passed only where the handler unambiguously asks: a parameter named "guard", or a second positional
    # parameter with no default (a call without it would fail). `def h(record, retries=3)` keeps its 3.
    if any(p.name == "guard" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params):
        return HandlerShape(KEYWORD)
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) > 1 and positional[1].default is inspect.Parameter.empty:
        return HandlerShape(POSITIONAL)
    return HandlerShape(NO_GUARD)


def _name(function: Callable[..., Any]) -> str:
    return getattr(function, "__qualname__", None) or type(function).__qualname__
