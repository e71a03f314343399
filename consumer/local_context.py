"""A stand-in Lambda context for running handlers locally (the CLI, samples, users' tests)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable


@dataclass
class LocalContext:
    """Looks like Lambda's context object; its deadline is ``timeout_ms`` after it was made.

    Examples:
        >>> LocalContext(timeout_ms=3000, clock=lambda: 0.0).get_remaining_time_in_millis()
        3000
    """

    timeout_ms: int = 30_000
    function_name: str = "local"
    memory_limit_in_mb: int = 128
    clock: Callable[[], float] = time.monotonic
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    _started: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        """Start the countdown."""
        self._started = self.clock()

    @property
    def invoked_function_arn(self) -> str:
        """A plausible ARN for the function."""
        return f"arn:aws:lambda:local:000000000000:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the deadline (never negative)."""
        left = self.timeout_ms - int((self.clock() - self._started) * 1000)
        return left if left > 0 else 0  # noqa: FURB136 - max() is a call, several times this test's cost (per record)
