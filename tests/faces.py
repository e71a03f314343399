"""The library's two faces, sync and async, behind one interface, so one test proves both.

A test takes the ``face`` fixture (``conftest.py``) and says ``face.process(...)`` / ``face.guarded(...)`` /
``face.processor(...)`` where it would have called the sync API; the async face runs the same thing through
``AsyncBatchProcessor`` / ``async with IdempotencyGuard`` with the handler turned into an ``async def`` that
really suspends (``await asyncio.sleep(0)``) before it runs.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

from consumer import (
    AsyncBatchProcessor,
    BatchProcessor,
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


def as_async(function: Callable[..., Any]) -> Callable[..., Any]:
    """An ``async def`` with ``function``'s signature (so the processor passes the guard the same way) that
    suspends once, then runs ``function``."""

    @functools.wraps(function)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        return function(*args, **kwargs)

    return wrapper


class AsyncFace:
    """The async API: ``AsyncBatchProcessor``, ``async with``, ``async def`` handlers, each run by ``asyncio.run``."""

    name = "async"

    def processor(self, event_type: Any, *, max_workers: int = 1, **options: Any) -> AsyncBatchProcessor:
        return AsyncBatchProcessor(event_type, max_concurrency=max_workers, **options)

    def process(self, event: Any, handler: Callable[..., Any], processor: Any, context: Any = None) -> Any:
        return asyncio.run(async_process_partial_response(event, as_async(handler), processor, context))

    def guarded(self, data: Any, body: Callable[[IdempotencyGuard], Any], **guard_options: Any) -> Any:
        """Run ``body(guard)`` inside ``async with IdempotencyGuard(data, ...)`` after a real suspension."""

        async def run() -> Any:
            async with IdempotencyGuard(data, **guard_options) as guard:
                await asyncio.sleep(0)
                return body(guard)

        return asyncio.run(run())

    def call(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return asyncio.run(function(*args, **kwargs))

    def define(self, function: Callable[..., Any]) -> Callable[..., Any]:
        return as_async(function)


FACES = [SyncFace(), AsyncFace()]
