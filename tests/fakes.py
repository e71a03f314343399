"""An injectable clock, an event loop whose clock the test moves, a Lambda context, a store that counts its
calls, and one that signals when an acquire meets a live lock."""

from __future__ import annotations

import asyncio
import collections
import threading
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from records import NOW_S

from persistence import RecordStatus

WAIT_S = 5  # what a barrier waits at most: long enough never to be reached on a good run


@dataclass
class FakeClock:
    """Epoch seconds that move only when told to."""

    now: float = float(NOW_S)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


T = TypeVar("T")


class SteppedLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock the test moves on: its timers (a processor's deadline timer, ``asyncio.sleep``,
    timeouts) fire when the test says, not whenever a loaded machine gets there. Time still passes meanwhile:
    give the deadline a window no run reaches by itself, then ``advance`` past it."""

    def __init__(self) -> None:
        super().__init__()
        self.offset = 0.0

    def time(self) -> float:
        return super().time() + self.offset

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` on (from the loop's thread): the timers now due fire on its next turn, in
        the order they were due, before any timer set after this call."""
        self.offset += seconds


def run_stepped(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on a :class:`SteppedLoop`: inside, ``asyncio.get_running_loop().advance(s)``."""
    loop = SteppedLoop()
    try:
        return loop.run_until_complete(main)
    finally:
        try:
            left = asyncio.all_tasks(loop)
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()


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


class MeetingStore:
    """A store that counts the acquires that met a live lock (another record's); ``met(n)`` waits for ``n``."""

    def __init__(self, inner) -> None:
        self.inner, self.meetings, self._changed = inner, 0, threading.Condition()
        self.blocking = getattr(inner, "blocking", True)  # the in-memory store is called on the loop, as it is

    def met(self, count: int = 1) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self.meetings >= count, WAIT_S)

    def acquire(self, record, now_ms):
        existing = self.inner.acquire(record, now_ms)
        if existing is not None and existing.status is RecordStatus.IN_PROGRESS:
            with self._changed:
                self.meetings += 1
                self._changed.notify_all()
        return existing

    def complete(self, record):
        self.inner.complete(record)

    def release(self, record):
        self.inner.release(record)

    def get(self, key):
        return self.inner.get(key)

    def delete(self, key):
        return self.inner.delete(key)

    def scan(self, status=None, limit=None):
        return self.inner.scan(status, limit)
