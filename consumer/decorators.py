"""``@idempotent`` for whole handlers and ``@idempotent_function`` for any function."""

from __future__ import annotations

import contextlib
import functools
import threading
import weakref
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from consumer._context import Invocation, system_clock
from consumer._errors import AlreadyProcessed, DataArgumentError
from consumer._handlers import GuardedFunction, is_async, refuse_unrunnable
from consumer._output import FunctionOutput
from consumer.config import IdempotencyConfig
from consumer.guard import IdempotencyGuard

if TYPE_CHECKING:
    from collections.abc import Callable

    from consumer._context import Clock
    from consumer.serialization import BaseIdempotencyModelSerializer, BaseIdempotencySerializer
    from persistence import PersistenceLayer

R = TypeVar("R")
P = ParamSpec("P")
_HANDLER_ARITY = 2  # handler(event, context)
Handler = TypeVar("Handler", bound="Callable[[Any, Any], Any]")


def idempotent(
    *,
    store: PersistenceLayer | None = None,
    config: IdempotencyConfig | None = None,
    clock: Clock = system_clock,
    persistence_store: PersistenceLayer | None = None,
    key_prefix: str | None = None,
) -> Callable[[Handler], Handler]:
    """Make a whole Lambda handler idempotent (EventBridge rule targets, direct invocations).

    The key is selected from the event (EventBridge: its ``id`` by default). A duplicate returns the
    first run's stored response without running the handler. The context is registered for the length of
    the call (for ``@idempotent_function`` inside it, and threads the handler starts).

    Args:
        store: Where records live.
        config: Key selection and timings.
        clock: Epoch seconds.
        persistence_store: Powertools' name for ``store`` (an alias: pass one of the two).
        key_prefix: The prefix of this handler's keys, exactly (``"{key_prefix}#{hash}"``); defaults to
            ``config.prefix``. Powertools' option of the same name.

    An ``async def`` handler stays async: the guard is entered with ``async with`` and the handler awaited
    inside the lock. Called by position or by keyword (``handler(event=..., context=...)``), the handler is
    passed both by position, as in Powertools.

    Raises:
        TypeError: When decorating a generator or async generator function (calling it runs nothing, so its
            "result" would be committed without the body running).

    Examples:
        >>> from persistence import InMemoryPersistenceLayer
        >>> @idempotent(store=InMemoryPersistenceLayer())
        ... def handler(event, context):
        ...     return {"booked": event["detail"]["seat"]}
        >>> event = {"id": "e-1", "detail-type": "SeatBooked", "detail": {"seat": "12A"}}
        >>> handler(event, None), handler(event, None)
        ({'booked': '12A'}, {'booked': '12A'})
    """
    resolved_store = _one_store(store, persistence_store)
    _check_prefix(key_prefix)

    def decorate(handler: Handler) -> Handler:
        refuse_unrunnable(handler, "@idempotent handler", async_ok=True)

        def guard(event: Any, _context: object) -> IdempotencyGuard:  # made in Invocation(context): its context
            return IdempotencyGuard(event, store=resolved_store, config=config, clock=clock, key_prefix=key_prefix)

        def bind(event: Any, context: object) -> tuple[Any, object]:
            return event, context

        # The call bound once to (event, context), passed on positionally as Powertools does (whatever the
        # handler names them); a call that does not fit fails naming the handler, as calling it would.
        functools.update_wrapper(bind, handler, assigned=("__name__", "__qualname__"), updated=())

        def arguments(*args: Any, **kwargs: Any) -> tuple[Any, object]:
            if len(args) > _HANDLER_ARITY:  # a method's self comes first: it would be taken for the event
                message = (
                    f"{handler.__qualname__}() is called as handler(event, context) under @idempotent, but "
                    f"{len(args)} positional arguments were given. On a method, self counts as one: "
                    "@idempotent decorates a plain handler function; on a method use "
                    "@idempotent_function(data_keyword_argument=...)"
                )
                raise TypeError(message)
            return bind(*args, **kwargs)

        return _guarded(handler, guard, lambda _event, context: Invocation(context), arguments)  # type: ignore[return-value]

    return decorate


def _guarded(
    function: Callable[..., Any],
    guard: Callable[..., IdempotencyGuard],
    scope: Callable[..., contextlib.AbstractContextManager[Any]] = lambda *_, **__: contextlib.nullcontext(),
    arguments: Callable[..., tuple[Any, ...]] | None = None,
) -> Callable[..., Any]:
    """``function`` run inside the guard ``guard(*args, **kwargs)`` makes, within ``scope(*args, **kwargs)`` (none).

    ``arguments``, when given, binds the call once: all three are then called with the positional arguments it
    returns (a call it refuses runs nothing).

    Both decorators' one body, with a face for each kind of function: an ``async def`` one is awaited inside the lock
    (``async with`` the guard) and stays a coroutine function; any other runs inside ``with``. A duplicate returns
    the stored response: only our own guard's ``AlreadyProcessed`` says so (a nested one's is a
    ``NestedReplayError``).
    """

    @functools.wraps(function)
    async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
        if arguments is not None:
            args, kwargs = arguments(*args, **kwargs), {}
        with scope(*args, **kwargs):
            try:
                async with guard(*args, **kwargs) as g:
                    g.result = await function(*args, **kwargs)
            except AlreadyProcessed as done:
                return done.response
            return g.result

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if arguments is not None:
            args, kwargs = arguments(*args, **kwargs), {}
        with scope(*args, **kwargs):
            try:
                with guard(*args, **kwargs) as g:
                    g.result = function(*args, **kwargs)
            except AlreadyProcessed as done:
                return done.response
            return g.result

    return async_wrapper if is_async(function) else wrapper


# The functions decorated so far that are still alive, by name: two of them under one name would share
# their records (a factory's functions, lambdas), so the second is refused.
_live_functions: weakref.WeakValueDictionary[str, Callable[..., Any]] = weakref.WeakValueDictionary()
_live_lock = threading.Lock()


def _one_store(store: PersistenceLayer | None, persistence_store: PersistenceLayer | None) -> PersistenceLayer:
    """The store given as ``store=`` or as ``persistence_store=`` (Powertools' name), never two different ones."""
    if store is None and persistence_store is None:
        raise TypeError("pass store= (or persistence_store=, Powertools' name for it): where the records live")
    if store is not None and persistence_store is not None and store is not persistence_store:
        raise TypeError("pass store= or persistence_store= (its Powertools name), not two different stores")
    return store if store is not None else persistence_store  # type: ignore[return-value]  # one is set


def _check_prefix(key_prefix: str | None) -> None:
    if key_prefix is not None and (not isinstance(key_prefix, str) or not key_prefix):
        raise ValueError(f"key_prefix must be a non-empty string (None for the default), got {key_prefix!r}")


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
    store: PersistenceLayer | None = None,
    config: IdempotencyConfig | None = None,
    clock: Clock = system_clock,
    name: str | None = None,
    output_serializer: BaseIdempotencySerializer | type[BaseIdempotencyModelSerializer] | None = None,
    persistence_store: PersistenceLayer | None = None,
    key_prefix: str | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Make any function idempotent on one of its keyword arguments; an ``async def`` stays async.

    By default the key prefix includes the function's module and qualified name
    (``"{config.prefix}.{module}.{qualname}#{hash}"``), so two functions given the same data do not share
    records. An explicit ``key_prefix`` (here, or ``config.key_prefix``) is the whole prefix, used exactly
    (``"{key_prefix}#{hash}"``): renaming or moving the function keeps its records, and functions sharing one
    ``key_prefix`` share records. A duplicate returns the stored result (see "What a replay returns" in
    docs/guarantees.md for which types replay exactly): a dataclass or a Pydantic model (also ``X | None``, or in a
    list, tuple, set or dict) comes back as itself when the return annotation names it, or through
    ``output_serializer`` (:mod:`consumer.serialization`). The key is selected
    from the argument's plain form (a dataclass's fields, a Pydantic model's ``model_dump()``). The lock
    deadline follows the Lambda context registered with :func:`register_lambda_context` (``@idempotent``
    and the batch processor register it). Handed to a batch processor as its record handler, the function
    receives each record by ``data_keyword_argument`` and is run inside its own guard only (see
    :class:`~consumer.BatchProcessor`).

    Args:
        data_keyword_argument: The argument the key is selected from; it must be passed by keyword.
        store: Where records live.
        config: Key selection and timings.
        clock: Epoch seconds.
        name: What the function's records are filed under, after ``config.prefix``; defaults to its module and
            qualified name. Needed for a lambda, a partial or a callable object, and to tell apart functions one
            factory makes. Not with an explicit ``key_prefix``, which replaces the whole prefix.
        output_serializer: Turns the result into what is stored and back: a serializer
            (``DataclassSerializer(Order)``, ``CustomDictSerializer(to_dict, from_dict)``), or a model serializer
            class (``PydanticSerializer``), built for the return annotation. ``None``: the one the return
            annotation calls for (:func:`~consumer.serialization.serializer_for`), if any; ``NoOpSerializer()``
            for none.
        persistence_store: Powertools' name for ``store`` (an alias: pass one of the two).
        key_prefix: The prefix of the function's keys, exactly; Powertools' option of the same name. Defaults to
            ``config.key_prefix`` when that is set.

    An ``async def`` function is awaited inside the lock (``async with`` the guard), and the decorated
    function is a coroutine function again, so ``await charge(order=...)`` type-checks as before.
    Called without its data as that keyword argument (``charge({...})``), it raises ``DataArgumentError`` (a
    ``TypeError``, and a ``RuntimeError`` as in Powertools) and runs nothing.

    Raises:
        TypeError: When decorating a generator or async generator function, a function without a name of its
            own and no ``name`` (or key prefix), or a function whose name another live decorated function already
            has; when no store (or two different ones) is given; when ``name`` comes with an explicit key prefix.
        IdempotencyModelTypeError: The serializer class declared cannot serialize the return annotation.
        IdempotencyNoSerializationModelError: A serializer class was declared for a function without a return
            annotation.

    Examples:
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
    resolved_store = _one_store(store, persistence_store)
    _check_prefix(key_prefix)
    exact_prefix = key_prefix or resolved.key_prefix
    if exact_prefix is not None and name is not None:
        msg = f"name={name!r} and key_prefix={exact_prefix!r}: an explicit key prefix is the whole prefix; pass one"
        raise TypeError(msg)

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        refuse_unrunnable(function, "@idempotent_function", async_ok=True)
        output = FunctionOutput(function, output_serializer)
        if exact_prefix is None:
            resolved_name = _function_name(function, name)
            _claim(resolved_name, function)  # the name is part of the key: two live functions may not share it
            prefix = f"{resolved.prefix}.{resolved_name}"
        else:  # the key does not depend on the function's name: those sharing a prefix share records, by design
            resolved_name = getattr(function, "__qualname__", None) or repr(function)
            prefix = exact_prefix

        def guard(*_args: Any, **kwargs: Any) -> IdempotencyGuard:
            if data_keyword_argument not in kwargs:  # Powertools' words first: code may match on them
                msg = (
                    f"Unable to extract {data_keyword_argument!r} from keyword arguments: {resolved_name} is "
                    f"idempotent on {data_keyword_argument!r}; pass it as a keyword argument"
                )
                raise DataArgumentError(msg)
            data = kwargs[data_keyword_argument]
            serializer = output.serializer()
            return IdempotencyGuard(
                data,
                store=resolved_store,
                config=resolved,
                clock=clock,
                key_prefix=prefix,
                output_serializer=serializer,
            )

        decorated = _guarded(function, guard)
        own = GuardedFunction(
            function,
            data_keyword_argument,
            resolved_store,
            resolved,
            clock,
            prefix,
            output.serializer,
            weakref.ref(decorated),
        )
        setattr(decorated, "__idempotent_function__", own)  # noqa: B010 - read by the batch processors
        return decorated

    return decorate
