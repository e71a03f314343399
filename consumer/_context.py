"""What users bring (a Lambda context, a clock) and the one holder of the current invocation's context."""

from __future__ import annotations

import contextvars
import threading
import time
from typing import TYPE_CHECKING, Protocol, final, runtime_checkable

if TYPE_CHECKING:
    from types import TracebackType


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


def system_clock() -> float:
    """The default clock: :func:`time.time`."""
    return time.time()


_UNSET = None
_current: contextvars.ContextVar[tuple[LambdaContext | None] | None] = contextvars.ContextVar(
    "idempotent_consumer_lambda_context", default=_UNSET
)
# The invocations running in this process, for threads that did not copy the invocation's contextvars
# (a plain threading.Thread). Lambda runs one invocation per process at a time; with several at once
# (a test runner, a local server) nobody can tell which one a bare thread belongs to, so none is used.
_running: list[LambdaContext | None] = []
_running_lock = threading.Lock()


@final
class Invocation:
    """The Lambda context of one invocation, registered until :meth:`close` (or the end of a ``with`` block).

    Returned by :func:`register_lambda_context`; the batch processor and the decorators open one per call.
    """

    __slots__ = ("_closed", "_context", "_token")

    def __init__(self, context: LambdaContext | None) -> None:
        """Register ``context`` for the current thread (and the threads and tasks it starts) now."""
        self._context = context
        self._token = _current.set((context,))
        self._closed = False
        with _running_lock:
            _running.append(context)

    def close(self) -> None:
        """Unregister the context: guards made afterwards no longer see it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with _running_lock:
            for index, running in enumerate(_running):
                if running is self._context:
                    del _running[index]
                    break
        try:
            _current.reset(self._token)
        except ValueError:  # closed from another context than the one that opened it: clear it there
            _current.set(_UNSET)

    def __enter__(self) -> Invocation:
        """The invocation itself."""
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        """Unregister the context."""
        self.close()


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
    registered = _current.get()
    if registered is not None:
        return registered[0]
    with _running_lock:
        return _running[0] if len(_running) == 1 else None
