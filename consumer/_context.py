"""What users bring: a Lambda context and a clock."""

from __future__ import annotations

import contextvars
import time
from typing import Protocol, runtime_checkable


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


_current_context: contextvars.ContextVar[LambdaContext | None] = contextvars.ContextVar(
    "idempotent_consumer_lambda_context", default=None
)


def register_lambda_context(context: LambdaContext | None) -> None:
    """Make ``context`` the Lambda context of guards that are not given one (``@idempotent_function``).

    ``@idempotent`` and the batch processor call this for you; call it yourself at the top of a plain
    handler that uses ``@idempotent_function``, so lock deadlines follow the invocation's deadline.
    """
    _current_context.set(context)


def current_lambda_context() -> LambdaContext | None:
    """The context registered for the current invocation (or thread), if any."""
    return _current_context.get()
