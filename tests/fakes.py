"""An injectable clock, a Lambda context, and a store that counts its calls."""

from __future__ import annotations

import collections
import uuid
from dataclasses import dataclass, field
from typing import Any

from records import NOW_S


@dataclass
class FakeClock:
    """Epoch seconds that move only when told to."""

    now: float = float(NOW_S)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class FakeContext:
    """A Lambda context whose remaining time follows a clock (or stays fixed without one)."""

    remaining_ms: int = 30_000
    clock: FakeClock | None = None
    aws_request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    function_name: str = "orders-consumer"
    _started: float | None = None

    def __post_init__(self) -> None:
        self._started = self.clock() if self.clock else None

    def get_remaining_time_in_millis(self) -> int:
        if self.clock is None or self._started is None:
            return self.remaining_ms
        return self.remaining_ms - int((self.clock() - self._started) * 1000)


class CountingStore:
    """Wraps a store and counts each call by name."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: collections.Counter[str] = collections.Counter()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return attr(*args, **kwargs)

        return counted
