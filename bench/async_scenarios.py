"""Async scenarios: our ``AsyncBatchProcessor`` against Powertools' ``AsyncBatchProcessor`` with its documented
idempotency pattern (``libraries.powertools_async``).

- per-record overhead: in-memory stores, a trivial ``async def`` handler, first delivery, every record at once;
- latency: every store call waits 10 ms and then answers like the in-memory store, for both libraries alike,
  so what is measured is how each library overlaps its store calls, not botocore's CPU (0.6-1.4 ms a request
  on a small machine, which alone would exceed the floor for a 100-record batch).

Each handler starts one event loop per invocation (both libraries' ``async_process_partial_response`` does so
itself, called from a sync handler outside Lambda): a cost both pay alike.
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

import libraries

from consumer.local_context import LocalContext

STORE_DELAY_S = 0.010
#: The record handler's own time in the latency row: none (it returns a small dict), for both libraries; the
#: floor is then the two store round trips of a first delivery.
HANDLER_S = 0.0


class SlowStore:
    """Our in-memory store behind a 10 ms wait on every call: a sync, blocking store (like DynamoDB's boto3),
    so the async processor reaches it through its thread pool (``persistence.ThreadedStore``)."""

    def __init__(self, delay_s: float) -> None:
        from persistence import InMemoryPersistenceLayer

        self.inner = InMemoryPersistenceLayer()
        self.delay_s = delay_s
        self.calls = 0
        self._lock = threading.Lock()

    def _wait(self) -> None:
        with self._lock:
            self.calls += 1
        time.sleep(self.delay_s)

    def acquire(self, record: Any, now_ms: int) -> Any:
        self._wait()
        return self.inner.acquire(record, now_ms)

    def complete(self, record: Any) -> None:
        self._wait()
        self.inner.complete(record)

    def release(self, record: Any) -> None:
        self._wait()
        self.inner.release(record)

    def get(self, key: str) -> Any:
        self._wait()
        return self.inner.get(key)

    def delete(self, key: str) -> bool:
        self._wait()
        return self.inner.delete(key)


class NativeSlowStore:
    """The same store, native async: every call awaits 10 ms (as an asyncio client would), with no thread."""

    def __init__(self, delay_s: float) -> None:
        from persistence import InMemoryPersistenceLayer

        self.inner = InMemoryPersistenceLayer()
        self.delay_s = delay_s
        self.calls = 0

    async def _wait(self) -> None:
        import asyncio

        self.calls += 1
        await asyncio.sleep(self.delay_s)

    async def acquire(self, record: Any, now_ms: int) -> Any:
        await self._wait()
        return self.inner.acquire(record, now_ms)

    async def complete(self, record: Any) -> None:
        await self._wait()
        self.inner.complete(record)

    async def release(self, record: Any) -> None:
        await self._wait()
        self.inner.release(record)


def _invoke_ms(handler: Any, records: int, offset: int) -> float:
    event = libraries.sqs_event(records, offset=offset)
    started = time.perf_counter()
    response = handler(event, LocalContext(timeout_ms=900_000))
    elapsed = time.perf_counter() - started
    if response["batchItemFailures"]:
        raise AssertionError(f"records failed: {response}")
    return elapsed * 1000


def async_overhead(records: int, repeats: int) -> list[Any]:
    """Microseconds per record: the fastest of ``repeats`` first deliveries (new message ids each time) to one
    warm handler per library, after one delivery that is not counted (a warm Lambda)."""
    from run import Row

    def best_us(handler: Any) -> float:
        times = [_invoke_ms(handler, records, records * i) for i in range(repeats + 1)]
        return min(times[1:]) * 1000 / records

    ours = best_us(libraries.ours_async(max_concurrency=records))
    theirs = best_us(libraries.powertools_async())
    ratio = ours / theirs
    return [Row(f"async overhead, {records}-record SQS batch, in-memory", round(ours, 1), round(theirs, 1),
                "us/record", round(ratio, 3), "<= 0.35x", ratio <= 0.35)]  # fmt: skip


def _bare_pool(records: int) -> Any:
    """The same blocking store calls with no library: each record makes two 10 ms calls through a thread pool
    of a thread per record, all records at once. What the machine itself costs to overlap them."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(records)

    async def record() -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(pool, time.sleep, STORE_DELAY_S)
        await loop.run_in_executor(pool, time.sleep, STORE_DELAY_S)

    async def batch() -> None:
        await asyncio.gather(*(record() for _ in range(records)))

    def handler(_event: dict[str, Any], _context: Any) -> dict[str, list[Any]]:
        asyncio.run(batch())
        return {"batchItemFailures": []}

    return handler


def async_latency(records: int, runs: int) -> list[Any]:
    """Milliseconds for a first delivery of ``records`` when every store call takes 10 ms; median of ``runs``.

    Each library keeps one handler and store across runs (a warm Lambda); each run delivers new message ids.
    The first run of each warms up (our store threads start then) and is not counted. Two references, with
    no target: the same calls through a bare thread pool and no library (what overlapping blocking calls in
    threads costs on this machine), and ours with a native async store (no thread). Ours and the references
    take turns, so a busy machine weighs on them alike.
    """
    from powertools_memory import SlowPowertoolsMemoryLayer
    from run import Row

    stores = SlowStore(STORE_DELAY_S), SlowPowertoolsMemoryLayer(STORE_DELAY_S), NativeSlowStore(STORE_DELAY_S)
    ours = libraries.ours_async(stores[0], max_concurrency=records)
    theirs, bare = libraries.powertools_async(stores[1]), _bare_pool(records)
    native = libraries.ours_async(stores[2], max_concurrency=records)
    ours_times, bare_times, native_times = [], [], []
    for i in range(runs + 1):
        ours_times.append(_invoke_ms(ours, records, records * i))
        bare_times.append(_invoke_ms(bare, records, 0))
        native_times.append(_invoke_ms(native, records, records * i))
    their_times = [_invoke_ms(theirs, records, records * i) for i in range(runs + 1)]
    ours_ms, their_ms, bare_ms, native_ms = (
        statistics.median(t[1:]) for t in (ours_times, their_times, bare_times, native_times)
    )
    expected = 2 * records * (runs + 1)
    if [store.calls for store in stores] != [expected] * 3:
        raise AssertionError(f"store calls (ours, Powertools, native): {[s.calls for s in stores]}, not {expected}")
    floor_ms = (2 * STORE_DELAY_S + HANDLER_S) * 1000
    ratio = ours_ms / their_ms
    return [
        Row(f"async latency, {records}-record batch, +10 ms per store call", round(ours_ms, 1), round(their_ms, 1),
            "ms", round(ratio, 3), "<= 0.1x", ratio <= 0.1),
        Row(f"async latency: ours / floor ({floor_ms:g} ms: 2 store calls + handler)", round(ours_ms / floor_ms, 2),
            "-", "x", None, "<= 1.5x", ours_ms / floor_ms <= 1.5),
        Row("async latency: bare thread pool, no library / floor", round(bare_ms / floor_ms, 2), "-", "x", None, "-",
            True),
        Row("async latency: ours, native async store / floor", round(native_ms / floor_ms, 2), "-", "x", None, "-",
            True),
    ]  # fmt: skip
