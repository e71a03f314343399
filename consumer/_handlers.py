"""What a user's function is: async or not, refused when it is a generator, and whether it asks for the guard."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from consumer._context import Clock
    from consumer.config import IdempotencyConfig
    from consumer.serialization import BaseIdempotencySerializer
    from persistence import PersistenceLayer

#: How a record handler receives the guard: not at all, as its second positional argument, or by keyword. OWN: the
#: handler is an ``@idempotent_function``: it runs in its own guard, given the record by its data keyword argument.
NO_GUARD, POSITIONAL, KEYWORD, OWN = "none", "positional", "keyword", "own"
#: The parameter Powertools' batch processor passes the Lambda context by, when a record handler has it.
LAMBDA_CONTEXT = "lambda_context"


class GuardedFunction:
    """What ``@idempotent_function`` guards, as a batch processor needs it to run the function as a record handler.

    Internal, and written by hand rather than as a dataclass: a dataclass's generated methods are compiled when
    the module is imported, on every cold start (docs/performance.md). Built once per decorated function.

    Attributes:
        function: The undecorated function.
        data_keyword_argument: The argument the record is passed by (and the key selected from).
        store: The function's store.
        config: The function's config.
        clock: The function's clock.
        key_prefix: The prefix of the function's keys.
        output_serializer: The function's output serializer for this call (declared, or from its annotation).
        decorated: What the decorator returned, weakly (it holds this object: a strong reference would keep both
            alive until a garbage collection): only that object runs as this function (a decorator stacked above it
            copies the attribute with ``functools.wraps``, and must run too).
    """

    __slots__ = ("clock", "config", "data_keyword_argument", "decorated", "function", "key_prefix",
                 "output_serializer", "store")  # fmt: skip

    def __init__(  # noqa: PLR0917 - one argument per attribute, in order
        self,
        function: Callable[..., Any],
        data_keyword_argument: str,
        store: PersistenceLayer,
        config: IdempotencyConfig,
        clock: Clock,
        key_prefix: str,
        output_serializer: Callable[[], BaseIdempotencySerializer | None],
        decorated: weakref.ref[Callable[..., Any]],
    ) -> None:
        """Hold what the decorator resolved for ``function``."""
        self.function = function
        self.data_keyword_argument = data_keyword_argument
        self.store = store
        self.config = config
        self.clock = clock
        self.key_prefix = key_prefix
        self.output_serializer = output_serializer
        self.decorated = decorated


class HandlerShape:
    """What the batch processor needs to know about a record handler (hand-written, as :class:`GuardedFunction`).

    Attributes:
        guard_passing: How the handler gets the guard (``OWN``: it is an ``@idempotent_function``).
        lambda_context: Whether it takes the Lambda context by a ``lambda_context`` parameter (as in Powertools).
    """

    __slots__ = ("guard_passing", "lambda_context")

    def __init__(self, guard_passing: str, lambda_context: bool = False) -> None:
        """Describe a handler."""
        self.guard_passing = guard_passing
        self.lambda_context = lambda_context


def guarded_function(handler: Callable[..., Any]) -> GuardedFunction | None:
    """What ``@idempotent_function`` made of ``handler``, or ``None`` for any other function.

    ``None`` too for a wrapper of one (a tracer's or a validator's, stacked above it): the wrapper is called as any
    record handler is, and the ``@idempotent_function`` inside it guards the record when it is reached.
    """
    own = getattr(handler, "__idempotent_function__", None)
    if not isinstance(own, GuardedFunction):
        return None
    return own if getattr(handler, "__func__", handler) is own.decorated() else None  # __func__: a bound method


#: What of a processor's config selects the records' keys: dropped silently, records keyed otherwise run again.
_KEY_OPTIONS = (
    ("event_key_jmespath", "key_expression"),
    ("key_header", "key_expression"),
    ("payload_validation_jmespath", "validation_expression"),
)


def _tree(config: IdempotencyConfig, compiled: str) -> object:
    """What ``config``'s compiled expression (``key_expression``...) selects, as its parsed tree (``None``: unset)."""
    expression = getattr(config, compiled)
    return None if expression is None else expression.parsed


def refuse_dropped_config(config: IdempotencyConfig | None, handler: Callable[..., Any]) -> None:
    """Refuse what of a processor ``config`` an ``@idempotent_function`` ``handler`` would silently not use.

    Such a handler runs in its own guard, with its own config: a cut-over on the processor's config only would be
    dropped, and every record Powertools already processed would run again; so would a key expression (or header,
    or payload validation) the processor sets and the function's config does not: records the processor's key
    would replay (two messages of one order) would each run.

    Raises:
        TypeError: ``config`` reads a Powertools table, or selects keys, unlike the function's own config.
    """
    own = guarded_function(handler)
    if config is None or own is None:
        return
    if config.powertools_cutover is not None and not own.config.powertools_cutover:
        msg = (
            "the processor's config reads a Powertools table (powertools_cutover), but its record handler is an "
            "@idempotent_function, which runs in its own guard with its own config: put powertools_cutover on the "
            "function's config (records Powertools processed would otherwise run again)"
        )
        raise TypeError(msg)
    for name, compiled in _KEY_OPTIONS:
        value, its = getattr(config, name), getattr(own.config, name)
        if value is None or _tree(config, compiled) == _tree(own.config, compiled):
            continue  # unset; or the same selection, however written ("" as None, key_header as header(@, ...))
        msg = (
            f"the processor's config sets {name} {value!r}, but its record handler is an @idempotent_function, "
            f"which runs in its own guard with its own config ({name} {its!r}): put {name} on the function's "
            "config (records would otherwise be keyed by the function's config, and those the processor's would "
            "replay run again)"
        )
        raise TypeError(msg)


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


# Shapes of the handlers seen so far, kept only while the handler lives: holding on to it would keep the name of a
# decorated function taken (``@idempotent_function`` refuses a second live function of that name).
_shapes: weakref.WeakKeyDictionary[Any, dict[bool, HandlerShape]] = weakref.WeakKeyDictionary()


def handler_shape(handler: Callable[..., Any], *, async_ok: bool = False) -> HandlerShape:
    """Inspect ``handler`` (remembered while it lives); raises ``TypeError`` as :func:`refuse_unrunnable` does."""
    try:
        known = _shapes.get(handler)
    except TypeError:  # unhashable, or not weakly referenceable: inspected on every batch
        return _shape(handler, async_ok=async_ok)
    shape = None if known is None else known.get(async_ok)
    if shape is None:
        shape = _shape(handler, async_ok=async_ok)
        _shapes.setdefault(handler, {})[async_ok] = shape
    return shape


def _shape(handler: Callable[..., Any], *, async_ok: bool) -> HandlerShape:
    import inspect  # noqa: PLC0415 - see is_async

    refuse_unrunnable(handler, "record handler", async_ok=async_ok)
    try:
        params = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError):
        params = []
    by_name = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    context = any(p.name == LAMBDA_CONTEXT and p.kind in by_name for p in params)
    if guarded_function(handler) is not None:
        return HandlerShape(OWN, context)
    if isinstance(getattr(handler, "__idempotent_function__", None), GuardedFunction):
        msg = (
            f"record handler {_name(handler)} wraps an @idempotent_function (a decorator above it copied its "
            "attributes with functools.wraps): the processor would run the record in that function's guard and "
            "skip your wrapper. Put @idempotent_function outermost (directly above def), or call the wrapped "
            "function from a plain record handler"
        )
        raise TypeError(msg)
    # Passed only where the handler unambiguously asks: a parameter named "guard", or a second positional
    # parameter with no default (a call without it would fail). `def h(record, retries=3)` keeps its 3.
    if any(p.name == "guard" and p.kind in by_name for p in params):
        return HandlerShape(KEYWORD, context)
    positional = [
        p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != LAMBDA_CONTEXT
    ]
    if len(positional) > 1 and positional[1].default is inspect.Parameter.empty:
        return HandlerShape(POSITIONAL, context)
    return HandlerShape(NO_GUARD, context)


def _name(function: Callable[..., Any]) -> str:
    return getattr(function, "__qualname__", None) or type(function).__qualname__
