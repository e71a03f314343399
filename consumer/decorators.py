"""``@idempotent`` for whole handlers and ``@idempotent_function`` for any function."""

from __future__ import annotations

import contextlib
import functools
import threading
import weakref
from typing import TYPE_CHECKING, Any, TypeVar

from consumer._context import Invocation, system_clock
from consumer._errors import AlreadyProcessed
from consumer._handlers import refuse_async
from consumer.config import IdempotencyConfig
from consumer.guard import IdempotencyGuard

if TYPE_CHECKING:
    from collections.abc import Callable

    from consumer._context import Clock, LambdaContext
    from persistence import PersistenceLayer

R = TypeVar("R")
Handler = TypeVar("Handler", bound="Callable[[Any, Any], Any]")


def idempotent(
    *, store: PersistenceLayer, config: IdempotencyConfig | None = None, clock: Clock = system_clock
) -> Callable[[Handler], Handler]:
    """Make a whole Lambda handler idempotent (EventBridge rule targets, direct invocations).

    The key is selected from the event (EventBridge: its ``id`` by default). A duplicate returns the
    first run's stored response without running the handler. The context is registered for the length of
    the call (for ``@idempotent_function`` inside it, and threads the handler starts).

    Args:
        store: Where records live.
        config: Key selection and timings.
        clock: Epoch seconds.

    Raises:
        TypeError: When decorating an ``async def`` or generator function (not supported yet: its result
            would be committed without the body running).

    Example:
        >>> from persistence import InMemoryPersistenceLayer
        >>> @idempotent(store=InMemoryPersistenceLayer())
        ... def handler(event, context):
        ...     return {"booked": event["detail"]["seat"]}
        >>> event = {"id": "e-1", "detail-type": "SeatBooked", "detail": {"seat": "12A"}}
        >>> handler(event, None), handler(event, None)
        ({'booked': '12A'}, {'booked': '12A'})
    """

    def decorate(handler: Handler) -> Handler:
        refuse_async(handler, "@idempotent handler")

        @functools.wraps(handler)
        def wrapper(event: Any, context: LambdaContext | None) -> Any:
            with Invocation(context):
                try:
                    with IdempotencyGuard(event, store=store, config=config, context=context, clock=clock) as guard:
                        guard.result = handler(event, context)
                except AlreadyProcessed as done:  # our own guard's: a nested one's is a NestedReplayError
                    return done.response
                return guard.result

        return wrapper  # type: ignore[return-value]

    return decorate


# The functions decorated so far that are still alive, by name: two of them under one name would share
# their records (a factory's functions, lambdas), so the second is refused.
_live_functions: weakref.WeakValueDictionary[str, Callable[..., Any]] = weakref.WeakValueDictionary()
_live_lock = threading.Lock()


def _function_name(function: Callable[..., Any], name: str | None) -> str:
    if name is not None:
        if not name:
            raise ValueError("name must not be empty")
        return name
    qualname, module = getattr(function, "__qualname__", None), getattr(function, "__module__", None)
    if not isinstance(qualname, str) or "<lambda>" in qualname:
        msg = (
            f"@idempotent_function cannot tell {function!r} apart from other functions by its name (a lambda, a "
            "partial or a callable object): pass name='...' so that its records are its own"
        )
        raise TypeError(msg)
    return f"{module}.{qualname}" if isinstance(module, str) else qualname  # no module: made by exec()


def _claim(name: str, function: Callable[..., Any]) -> None:
    with _live_lock:
        other = _live_functions.get(name)
        if other is not None and other is not function:
            msg = (
                f"two live functions are both named {name!r} (made by one factory?): they would replay each other's "
                "records; pass name='...' to tell them apart"
            )
            raise TypeError(msg)
        with contextlib.suppress(TypeError):  # not weakly referenceable: cannot be tracked
            _live_functions[name] = function


def idempotent_function(
    *,
    data_keyword_argument: str,
    store: PersistenceLayer,
    config: IdempotencyConfig | None = None,
    clock: Clock = system_clock,
    name: str | None = None,
) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Make any function idempotent on one of its keyword arguments.

    The key prefix includes the function's module and qualified name, so two functions given the same
    data do not share records. A duplicate returns the stored result (see the README's "Guarantees and
    limits" for which types replay exactly; a dataclass result comes back as a dict). The key is selected
    from the argument's plain form (a dataclass's fields, a Pydantic model's ``model_dump()``). The lock
    deadline follows the Lambda context registered with :func:`register_lambda_context` (``@idempotent``
    and the batch processor register it).

    Args:
        data_keyword_argument: The argument the key is selected from; it must be passed by keyword.
        store: Where records live.
        config: Key selection and timings.
        clock: Epoch seconds.
        name: What the function's records are filed under; defaults to its module and qualified name. Needed
            for a lambda, a partial or a callable object, and to tell apart functions one factory makes.

    Raises:
        TypeError: When decorating an ``async def`` or generator function (not supported yet), a function
            without a name of its own and no ``name``, or a function whose name another live decorated
            function already has.

    Example:
        >>> from persistence import InMemoryPersistenceLayer
        >>> calls = []
        >>> @idempotent_function(data_keyword_argument="order", store=InMemoryPersistenceLayer())
        ... def charge(order):
        ...     calls.append(order["id"])
        ...     return {"charged": order["amount"]}
        >>> charge(order={"id": 7, "amount": 30}), charge(order={"id": 7, "amount": 30}), calls
        ({'charged': 30}, {'charged': 30}, [7])
    """
    resolved = config or IdempotencyConfig()

    def decorate(function: Callable[..., R]) -> Callable[..., R]:
        refuse_async(function, "@idempotent_function")
        resolved_name = _function_name(function, name)
        _claim(resolved_name, function)

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> R:
            if data_keyword_argument not in kwargs:
                msg = f"{resolved_name} is idempotent on {data_keyword_argument!r}: pass it as a keyword argument"
                raise TypeError(msg)
            prefix = f"{resolved.prefix}.{resolved_name}"
            data = kwargs[data_keyword_argument]
            try:
                with IdempotencyGuard(data, store=store, config=resolved, clock=clock, key_prefix=prefix) as guard:
                    guard.result = function(*args, **kwargs)
            except AlreadyProcessed as done:  # our own guard's: a nested one's is a NestedReplayError
                return done.response  # type: ignore[no-any-return]
            return guard.result  # type: ignore[no-any-return]

        return wrapper

    return decorate
