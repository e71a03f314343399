"""The library's two faces, sync and async, behind one interface, so one test proves both.

A test takes the ``face`` fixture (``conftest.py``) and says ``face.process(...)`` / ``face.guarded(...)`` /
``face.processor(...)`` where it would have called the sync API; the async face runs the same thing through
``AsyncBatchProcessor`` / ``async with IdempotencyGuard`` with the handler turned into an ``async def`` that
really suspends (``await asyncio.sleep(0)``) before it runs.

Each async call runs in ``asyncio.run`` as if the test had awaited it: the context variables it sets (a
processor's ``summary`` and ``items``) are kept afterwards. ``face.enter`` / ``face.exit`` take a guard through
its life cycle a step at a time (a lock held across steps: conflicts, takeovers, failed releases), and
``face.pausing`` builds a handler whose first records wait in its middle for each other (threads at a barrier,
tasks on an event), and ``face.race`` delivers one record to several guards at once (threads, or tasks of one
loop), the one that takes the lock holding it until every other has met it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from consumer import (
    AlreadyProcessed,
    AsyncBatchProcessor,
    BatchProcessor,
    IdempotencyAlreadyInProgressError,
    IdempotencyGuard,
    async_process_partial_response,
    process_partial_response,
)


class SyncFace:
    """The sync API, as the tests always called it."""

    name = "sync"

    def processor(self, event_type: Any, *, max_workers: int = 1, **options: Any) -> BatchProcessor:
        return BatchProcessor(event_type, max_workers=max_workers, **options)

    def process(self, event: Any, handler: Callable[..., Any], processor: Any, context: Any = None) -> Any:
        return process_partial_response(event, handler, processor, context)

    def guarded(self, data: Any, body: Callable[[IdempotencyGuard], Any], **guard_options: Any) -> Any:
        """Run ``body(guard)`` inside ``with IdempotencyGuard(data, ...)``; returns what the body returned."""
        with IdempotencyGuard(data, **guard_options) as guard:
            return body(guard)

    def call(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a (decorated) function of this face's kind."""
        return function(*args, **kwargs)

    def define(self, function: Callable[..., Any]) -> Callable[..., Any]:
        """``function`` itself: the kind of function this face decorates."""
        return function

    def define_delegating(self, function: Callable[..., Any]) -> Callable[..., Any]:
        """``function`` itself; it ends by returning a call of another function of this face (a nested call)."""
        return function

    def enter(self, guard: IdempotencyGuard) -> IdempotencyGuard:
        """``guard.__enter__()``: take the lock (or raise) and keep holding it after this returns."""
        return guard.__enter__()

    def exit(self, guard: IdempotencyGuard, exc: BaseException | None = None) -> Any:
        """``guard.__exit__`` as a ``with`` block ending with ``exc`` (or normally) calls it; returns its value."""
        return guard.__exit__(None if exc is None else type(exc), exc, None)

    def pausing(self, first: Callable[..., Any], then: Callable[..., Any], meet: int = 2) -> Callable[..., Any]:
        """A handler running ``first(record)``, then ``then(record)``; the first ``meet`` records to get between
        the two wait there until all of them are (a barrier: that many records run at once, or they fail)."""
        barrier, arrived, lock = threading.Barrier(meet), [0], threading.Lock()

        def handler(record: Any) -> Any:
            first(record)
            with lock:
                arrived[0] += 1
                waits = arrived[0] <= meet
            if waits:
                barrier.wait(timeout=30)
            return then(record)

        return handler

    def race(self, n: int, data: Any, body: Callable[[IdempotencyGuard], Any], **guard_options: Any) -> list[str]:
        """``n`` threads released at once each run ``body(guard)`` in a guard of ``data``; the one that takes the
        lock holds it until every other delivery has ended.

        Returns each delivery's outcome: ``"ran"``, ``"replayed"`` or ``"in progress"``.
        """
        barrier, ended = threading.Barrier(n), threading.Semaphore(0)

        def deliver() -> str:
            barrier.wait(timeout=30)
            with outcome() as seen, IdempotencyGuard(data, **guard_options) as guard:
                body(guard)
                for _ in range(n - 1):  # hold the lock while the others meet it
                    assert ended.acquire(timeout=30), "a delivery never ended"
            if seen[0] != "ran":
                ended.release()
            return seen[0]

        with ThreadPoolExecutor(n) as pool:
            return list(pool.map(lambda _: deliver(), range(n)))


@contextlib.contextmanager
def outcome() -> Iterator[list[str]]:
    """Names how the block ended in the list it yields: ``ran``, ``replayed`` or ``in progress`` (then swallowed)."""
    seen = ["ran"]
    try:
        yield seen
    except AlreadyProcessed:
        seen[0] = "replayed"
    except IdempotencyAlreadyInProgressError:
        seen[0] = "in progress"


def as_async(function: Callable[..., Any]) -> Callable[..., Any]:
    """An ``async def`` with ``function``'s signature (so the processor passes the guard the same way) that
    suspends once, then runs ``function``; an ``async def`` already is returned as it is."""
    if inspect.iscoroutinefunction(function):
        return function

    @functools.wraps(function)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        return function(*args, **kwargs)

    return wrapper


def awaited(call: Awaitable[Any]) -> Any:
    """``await call`` from sync code: run it in ``asyncio.run``, then keep the context variables it set, as an
    ``await`` in the caller's own task would have."""

    async def main() -> tuple[Any, contextvars.Context]:
        return await call, contextvars.copy_context()

    result, context = asyncio.run(main())
    for var, value in context.items():
        if var.get(main) is not value:  # ``main``: a default no variable holds
            var.set(value)
    return result


class AsyncFace:
    """The async API: ``AsyncBatchProcessor``, ``async with``, ``async def`` handlers, each run by ``asyncio.run``."""

    name = "async"

    def processor(self, event_type: Any, *, max_workers: int = 1, **options: Any) -> AsyncBatchProcessor:
        return AsyncBatchProcessor(event_type, max_concurrency=max_workers, **options)

    def process(self, event: Any, handler: Callable[..., Any], processor: Any, context: Any = None) -> Any:
        return awaited(async_process_partial_response(event, as_async(handler), processor, context))

    def guarded(self, data: Any, body: Callable[[IdempotencyGuard], Any], **guard_options: Any) -> Any:
        """Run ``body(guard)`` inside ``async with IdempotencyGuard(data, ...)`` after a real suspension."""

        async def run() -> Any:
            async with IdempotencyGuard(data, **guard_options) as guard:
                await asyncio.sleep(0)
                return body(guard)

        return awaited(run())

    def call(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return awaited(function(*args, **kwargs))

    def define(self, function: Callable[..., Any]) -> Callable[..., Any]:
        return as_async(function)

    def define_delegating(self, function: Callable[..., Any]) -> Callable[..., Any]:
        """An ``async def`` that suspends, then awaits what ``function`` returns: a call of an ``async def``."""

        @functools.wraps(function)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(0)
            return await function(*args, **kwargs)

        return wrapper

    def enter(self, guard: IdempotencyGuard) -> IdempotencyGuard:
        """``await guard.__aenter__()``."""
        return awaited(guard.__aenter__())

    def exit(self, guard: IdempotencyGuard, exc: BaseException | None = None) -> Any:
        """``await guard.__aexit__(...)``, as an ``async with`` block ending with ``exc`` awaits it."""
        return awaited(guard.__aexit__(None if exc is None else type(exc), exc, None))

    def pausing(self, first: Callable[..., Any], then: Callable[..., Any], meet: int = 2) -> Callable[..., Any]:
        """An ``async def`` running ``first(record)``, then awaiting, then ``then(record)``; the first ``meet``
        records to get between the two wait there until all of them are."""
        arrived, met = [0], asyncio.Event()

        async def handler(record: Any) -> Any:
            first(record)
            arrived[0] += 1
            if arrived[0] == meet:
                met.set()
            if arrived[0] <= meet:
                await asyncio.wait_for(met.wait(), 30)
            await asyncio.sleep(0)
            return then(record)

        return handler

    def race(self, n: int, data: Any, body: Callable[[IdempotencyGuard], Any], **guard_options: Any) -> list[str]:
        """``n`` tasks of one loop each run ``body(guard)`` in ``async with`` a guard of ``data``; the one that takes
        the lock holds it until every other delivery has ended."""
        ended = asyncio.Semaphore(0)

        async def deliver() -> str:
            with outcome() as seen:
                async with IdempotencyGuard(data, **guard_options) as guard:
                    body(guard)
                    for _ in range(n - 1):  # hold the lock while the others meet it
                        await asyncio.wait_for(ended.acquire(), 30)
            if seen[0] != "ran":
                ended.release()
            return seen[0]

        async def main() -> list[str]:
            return list(await asyncio.gather(*(deliver() for _ in range(n))))

        return awaited(main())


FACES = [SyncFace(), AsyncFace()]
