"""What a user's function is: async or not, refused when it is a generator, and whether it asks for the guard."""

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


def is_async(function: Callable[..., Any]) -> bool:
    """Whether calling ``function`` returns a coroutine: an ``async def``, a partial of one, an async ``__call__``."""
    import inspect  # noqa: PLC0415 - costs 6 ms at import time; checked once per function

    return any(inspect.iscoroutinefunction(candidate) for candidate in _candidates(function))


def refuse_unrunnable(function: Callable[..., Any], what: str, *, async_ok: bool) -> None:
    """Raise ``TypeError`` for a function whose "result" would be committed before its work ran.

    Generator and async generator functions are always refused; ``async def`` unless ``async_ok`` (the async
    processor and the decorators await it).

    Args:
        function: The user's function (or callable object).
        what: How the error names it (``"record handler"``, ``"@idempotent handler"``).
        async_ok: Whether the caller awaits the function's coroutine.
    """
    import inspect  # noqa: PLC0415 - see is_async

    for candidate in _candidates(function):
        if inspect.isasyncgenfunction(candidate):
            msg = (
                f"{what} {_name(function)} is an async generator function: calling it runs nothing until it is "
                "iterated. Return a value (e.g. a list) instead."
            )
            raise TypeError(msg)
        if not async_ok and inspect.iscoroutinefunction(candidate):
            msg = (
                f"{what} {_name(function)} is async: calling it returns an awaitable, not a result, so the record "
                "would be committed without its body running. Use AsyncBatchProcessor (or a plain def)."
            )
            raise TypeError(msg)
        if inspect.isgeneratorfunction(candidate):
            msg = (
                f"{what} {_name(function)} is a generator function: calling it runs nothing until the generator "
                "is consumed. Return a value (e.g. a list) instead."
            )
            raise TypeError(msg)


def _candidates(function: Callable[..., Any]) -> tuple[Any, ...]:
    return (function, getattr(function, "__call__", None))  # noqa: B004 - a callable object's method


def handler_shape(handler: Callable[..., Any], *, async_ok: bool = False) -> HandlerShape:
    """Inspect ``handler`` (cached when it is hashable); raises ``TypeError`` as :func:`refuse_unrunnable` does."""
    try:
        hash(handler)
    except TypeError:  # an unhashable callable object: inspected on every batch
        return _shape(handler, async_ok=async_ok)
    return _cached_shape(handler, async_ok=async_ok)


@functools.lru_cache(maxsize=64)
def _cached_shape(handler: Callable[..., Any], *, async_ok: bool) -> HandlerShape:
    return _shape(handler, async_ok=async_ok)


def _shape(handler: Callable[..., Any], *, async_ok: bool) -> HandlerShape:
    import inspect  # noqa: PLC0415 - see is_async

    refuse_unrunnable(handler, "record handler", async_ok=async_ok)
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
