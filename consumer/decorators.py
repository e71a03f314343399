"""``@idempotent`` for whole handlers and ``@idempotent_function`` for any function."""

from __future__ import annotations

import contextlib
import functools
import threading
import weakref
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from consumer._context import Invocation, system_clock
from consumer._errors import AlreadyProcessed
from consumer._handlers import is_async, refuse_unrunnable
from consumer._output import FunctionOutput
from consumer.config import IdempotencyConfig
from consumer.guard import IdempotencyGuard

if TYPE_CHECKING:
    from collections.abc import Callable

    from consumer._context import Clock, LambdaContext
    from consumer.serialization import BaseIdempotencyModelSerializer, BaseIdempotencySerializer
    from persistence import PersistenceLayer

R = TypeVar("R")
P = ParamSpec("P")
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

    An ``async def`` handler stays async: the guard is entered with ``async with`` and the handler awaited
    inside the lock.

    Raises:
        TypeError: When decorating a generator or async generator function (calling it runs nothing, so its
            "result" would be committed without the body running).

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
        refuse_unrunnable(handler, "@idempotent handler", async_ok=True)

        def guard(event: Any, context: LambdaContext | None) -> IdempotencyGuard:
            return IdempotencyGuard(event, store=store, config=config, context=context, clock=clock)

        @functools.wraps(handler)
        async def async_wrapper(event: Any, context: LambdaContext | None) -> Any:
            with Invocation(context):
                try:
                    async with guard(event, context) as g:
                        g.result = await handler(event, context)
                except AlreadyProcessed as done:  # our own guard's: a nested one's is a NestedReplayError
                    return done.response
                return g.result

        @functools.wraps(handler)
        def wrapper(event: Any, context: LambdaContext | None) -> Any:
            with Invocation(context):
                try:
                    with guard(event, context) as g:
                        g.result = handler(event, context)
                except AlreadyProcessed as done:  # our own guard's: a nested one's is a NestedReplayError
                    return done.response
                return g.result

        return async_wrapper if is_async(handler) else wrapper  # type: ignore[return-value]

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
    output_serializer: BaseIdempotencySerializer | type[BaseIdempotencyModelSerializer] | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Make any function idempotent on one of its keyword arguments; an ``async def`` stays async.

    The key prefix includes the function's module and qualified name, so two functions given the same
    data do not share records. A duplicate returns the stored result (see the README's "Guarantees and
    limits" for which types replay exactly): a dataclass or a Pydantic model (also ``X | None``, or in a
    list, tuple, set or dict) comes back as itself when the return annotation names it, or through
    ``output_serializer`` (:mod:`consumer.serialization`). The key is selected
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
        output_serializer: Turns the result into what is stored and back: a serializer
            (``DataclassSerializer(Order)``, ``CustomDictSerializer(to_dict, from_dict)``), or a model serializer
            class (``PydanticSerializer``), built for the return annotation. ``None``: the one the return
            annotation calls for (:func:`~consumer.serialization.serializer_for`), if any; ``NoOpSerializer()``
            for none.

    An ``async def`` function is awaited inside the lock (``async with`` the guard), and the decorated
    function is a coroutine function again, so ``await charge(order=...)`` type-checks as before.

    Raises:
        TypeError: When decorating a generator or async generator function, a function without a name of its
            own and no ``name``, or a function whose name another live decorated function already has.
        IdempotencyModelTypeError: The serializer class declared cannot serialize the return annotation.
        IdempotencyNoSerializationModelError: A serializer class was declared for a function without a return
            annotation.

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

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        refuse_unrunnable(function, "@idempotent_function", async_ok=True)
        resolved_name = _function_name(function, name)
        output = FunctionOutput(function, output_serializer)
        _claim(resolved_name, function)
        prefix = f"{resolved.prefix}.{resolved_name}"

        def guard(kwargs: dict[str, Any]) -> IdempotencyGuard:
            if data_keyword_argument not in kwargs:
                msg = f"{resolved_name} is idempotent on {data_keyword_argument!r}: pass it as a keyword argument"
                raise TypeError(msg)
            data = kwargs[data_keyword_argument]
            serializer = output.serializer()
            return IdempotencyGuard(
                data, store=store, config=resolved, clock=clock, key_prefix=prefix, output_serializer=serializer
            )

        @functools.wraps(function)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                async with guard(kwargs) as g:
                    g.result = await function(*args, **kwargs)  # type: ignore[misc]  # is_async: a coroutine
            except AlreadyProcessed as done:  # our own guard's: a nested one's is a NestedReplayError
                return done.response
            return g.result

        @functools.wraps(function)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                with guard(kwargs) as g:
                    g.result = function(*args, **kwargs)
            except AlreadyProcessed as done:  # our own guard's: a nested one's is a NestedReplayError
                return done.response  # type: ignore[no-any-return]
            return g.result  # type: ignore[no-any-return]

        return async_wrapper if is_async(function) else wrapper  # type: ignore[return-value]

    return decorate
