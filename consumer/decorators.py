"""``@idempotent`` for whole handlers and ``@idempotent_function`` for any function."""

from __future__ import annotations

import functools
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


def idempotent_function(
    *,
    data_keyword_argument: str,
    store: PersistenceLayer,
    config: IdempotencyConfig | None = None,
    clock: Clock = system_clock,
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

    Raises:
        TypeError: When decorating an ``async def`` or generator function (not supported yet).

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
        name = f"{function.__module__}.{function.__qualname__}"

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> R:
            if data_keyword_argument not in kwargs:
                msg = f"{name} is idempotent on {data_keyword_argument!r}: pass it as a keyword argument"
                raise TypeError(msg)
            prefix = f"{resolved.prefix}.{name}"
            data = kwargs[data_keyword_argument]
            try:
                with IdempotencyGuard(data, store=store, config=resolved, clock=clock, key_prefix=prefix) as guard:
                    guard.result = function(*args, **kwargs)
            except AlreadyProcessed as done:  # our own guard's: a nested one's is a NestedReplayError
                return done.response  # type: ignore[no-any-return]
            return guard.result  # type: ignore[no-any-return]

        return wrapper

    return decorate
