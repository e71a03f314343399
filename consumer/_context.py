"""What users bring (a Lambda context, a clock) and the one holder of the current invocation's context."""

from __future__ import annotations

import contextvars
import threading
import time
from typing import TYPE_CHECKING, Protocol, final, runtime_checkable

if TYPE_CHECKING:
    from types import TracebackType

    from consumer.guard import IdempotencyGuard


@runtime_checkable
class LambdaContext(Protocol):
    """The part of the Lambda context object the library uses."""

    @property
    def aws_request_id(self) -> str:
        """The invocation's request id."""
        ...

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before Lambda stops the invocation."""
        ...


class Clock(Protocol):
    """A callable returning the current time in epoch seconds (like :func:`time.time`)."""

    def __call__(self) -> float:
        """Return the current time in epoch seconds."""
        ...


#: The default clock: :func:`time.time` itself (a function calling it would add a call to each read, two a record).
system_clock: Clock = time.time


def lambda_context_of(context: LambdaContext | None) -> LambdaContext | None:
    """The Lambda context of ``context``: itself, or the ``lambda_context`` a durable function's context carries.

    A durable function (the AWS durable execution SDK's ``@durable_execution``) hands its handler a
    ``DurableContext``: recognised, as Powertools recognises it, by its ``lambda_context`` and ``state``. Its
    ``lambda_context`` is the invocation's, whose deadline bounds the lock.
    """
    inner = getattr(context, "lambda_context", None)
    return inner if inner is not None and hasattr(context, "state") else context


# The innermost invocation opened in this thread or task (and the threads and tasks it starts with a copy of its
# contextvars). A closed one is passed over for the one open around it (Invocation._outer): invocations closed out of
# order, or from another thread, never leave a finished invocation's context behind.
_current: contextvars.ContextVar[Invocation | None] = contextvars.ContextVar(
    "idempotent_consumer_invocation", default=None
)
# The invocations running in this process, for threads that did not copy the invocation's contextvars
# (a plain threading.Thread). Lambda runs one invocation per process at a time; with several at once
# (a test runner, a local server) nobody can tell which one a bare thread belongs to, so none is used.
# Keyed by the Invocation, in the order they opened: each open and close is one dict operation, atomic under the
# GIL, so opening and closing one takes no lock; a reader copies the values in one operation.
_running: dict[Invocation, LambdaContext | None] = {}
# The context registered Powertools' way (config.register_lambda_context): one for the process, replaced by each
# call, never stacked, and never closed by its caller. It counts only while it is the context of the invocation that
# started last (_latest, one slot: each write replaces it whole) and its deadline has not passed: a warm container's
# next invocation never sees the last one's. The lock keeps a registration and its check-and-drop apart.
_registered: list[LambdaContext] = []
_latest: list[LambdaContext | None] = [None]
_registered_lock = threading.Lock()
_guard: contextvars.ContextVar[IdempotencyGuard | None] = contextvars.ContextVar(
    "idempotent_consumer_guard", default=None
)


@final
class Invocation:
    """The Lambda context of one invocation, registered until :meth:`close` (or the end of a ``with`` block).

    Returned by :func:`register_lambda_context`; the batch processor and the decorators open one per call.
    """

    __slots__ = ("_closed", "_context", "_outer", "_token")
    _closed: bool
    _context: LambdaContext | None
    _outer: Invocation | None

    def __init__(self, context: LambdaContext | None) -> None:
        """Register ``context`` for the current thread (and the threads and tasks it starts) now.

        A durable function's context registers the Lambda context it carries (:func:`lambda_context_of`).
        """
        self._context = context = lambda_context_of(context)
        self._outer = _open(_current.get())  # the one open around it, which counts again once this one closes
        self._token = _current.set(self)
        self._closed = False
        _running[self] = context
        if context is not None:
            _latest[0] = context

    def close(self) -> None:
        """Unregister the context: guards made afterwards no longer see it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        _running.pop(self, None)
        if _current.get() is not self:  # an invocation opened inside it is still open, or another thread closes it
            return  # readers pass over it: it is closed
        try:
            _current.reset(self._token)
        except ValueError:  # a copy of the context that opened it (a thread started with copy_context())
            _current.set(self._outer)

    def __enter__(self) -> Invocation:
        """The invocation itself."""
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        """Unregister the context."""
        self.close()


def _open(invocation: Invocation | None) -> Invocation | None:
    """``invocation`` while it is open, else the nearest one open around it: closed ones are passed over."""
    while invocation is not None and invocation._closed:  # noqa: SLF001 - this module's own class
        invocation = invocation._outer  # noqa: SLF001
    return invocation


def register_lambda_context(context: LambdaContext | None) -> Invocation:
    """Make ``context`` the Lambda context of guards that are not given one (``@idempotent_function``).

    ``@idempotent`` and the batch processor do this for you, for the length of their call. In a plain
    handler, use it as a context manager so the context cannot outlive the invocation::

        def handler(event, context):
            with register_lambda_context(context):
                return charge(order=event)

    Called without ``with``, the context stays registered until the returned object is closed.
    """
    return Invocation(context)


def current_lambda_context() -> LambdaContext | None:
    """The context registered for the current invocation, if any.

    Seen by the thread that registered it and by the threads and tasks it starts with a copy of its
    contextvars (the batch processor's workers, asyncio tasks); a plain ``threading.Thread`` sees it when it
    is the only invocation running in the process, as on Lambda.
    """
    invocation = _open(_current.get())
    if invocation is not None:
        return invocation._context  # noqa: SLF001 - this module's own class
    running = list(_running.values())  # one copy, atomic: other threads may open and close meanwhile
    if running:
        first = running[0]
        return first if all(_same_invocation(first, other) for other in running) else None
    with _registered_lock:
        return _registered_context()


def register_invocation_context(context: LambdaContext | None) -> None:
    """Powertools' ``config.register_lambda_context(context)``: make ``context`` this invocation's, until the next.

    Unlike :func:`register_lambda_context`, nothing is returned to close: each call replaces the context the
    previous one registered (a warm container calls it once per invocation; nothing piles up). Guards that are not
    given a context, and are not inside a batch, ``@idempotent`` or ``with register_lambda_context(...)`` (whose
    own context comes first), use it in every thread, as long as it belongs to the invocation that started last
    and its deadline has not passed. So a context left behind by the previous invocation on a warm container never
    sets the next one's lock deadline: once our processor or ``@idempotent`` receives the next invocation's
    context, or the old one's deadline passes, it no longer counts (the lock then lasts ``lock_timeout_seconds``).
    ``None`` unregisters it. A durable function's context registers the Lambda context it carries.
    """
    context = lambda_context_of(context)
    with _registered_lock:
        _registered[:] = [] if context is None else [context]
        if context is not None:
            _latest[0] = context


def _registered_context() -> LambdaContext | None:
    """The context registered Powertools' way, while it is still the current invocation's (lock held)."""
    if not _registered:
        return None
    context, latest = _registered[0], _latest[0]
    if latest is not None and not _same_invocation(context, latest):
        del _registered[:]  # a later invocation has started: this one is over
        return None
    remaining_time = getattr(context, "get_remaining_time_in_millis", None)
    if remaining_time is not None and remaining_time() <= 0:
        del _registered[:]  # past its deadline: Lambda has ended that invocation
        return None
    return context


def _same_invocation(one: LambdaContext | None, other: LambdaContext | None) -> bool:
    if one is other:
        return True
    request_id = getattr(one, "aws_request_id", None)
    return request_id is not None and request_id == getattr(other, "aws_request_id", None)


def current_idempotency_key() -> str | None:
    """The idempotency key of the guarded body running now, or ``None`` outside one.

    Readable inside ``@idempotent`` and ``@idempotent_function`` bodies, batch record handlers and ``with
    IdempotencyGuard(...)`` blocks; pass it downstream (payment APIs take idempotency keys). Inside nested guards it
    is the innermost one's key, and the outer key again once the inner block has ended. It is ``None`` outside a
    guarded body, and in a body that runs unguarded (no key selected, or idempotency disabled): never a key that is
    not this body's. Backed by a context variable: the batch processor's worker threads and the asyncio tasks a
    body starts see it; a plain ``threading.Thread`` the body starts does not (run it with
    ``contextvars.copy_context().run``).

    Examples:
        >>> from consumer import idempotent_function
        >>> from persistence import InMemoryPersistenceLayer
        >>> @idempotent_function(data_keyword_argument="order", store=InMemoryPersistenceLayer(), key_prefix="pay")
        ... def charge(order):
        ...     return current_idempotency_key()[:4]
        >>> charge(order={"id": 7}), current_idempotency_key()
        ('pay#', None)
    """
    guard = _guard.get()
    return None if guard is None else guard.key


def current_guard() -> IdempotencyGuard | None:
    """The guard whose body runs now (the innermost one), or ``None`` outside a guarded body.

    Seen where :func:`current_idempotency_key` is; it reaches the guard of a body that did not get it as an
    argument: an ``@idempotent_function`` or ``@idempotent`` body queuing a write with ``current_guard().write``
    (docs/exactly-once-writes.md).
    """
    return _guard.get()


def enter_key(guard: IdempotencyGuard) -> contextvars.Token[IdempotencyGuard | None]:
    """Make ``guard`` the current one (its body is about to run); reset with :func:`leave_key`."""
    return _guard.set(guard)


def leave_key(token: contextvars.Token[IdempotencyGuard | None]) -> None:
    """Restore the guard that was current before :func:`enter_key` returned ``token``."""
    try:
        _guard.reset(token)
    except ValueError:  # left in another context than the one it was entered in: clear it there
        _guard.set(None)
