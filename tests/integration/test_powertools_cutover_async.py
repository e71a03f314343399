"""The cut-over under ``AsyncBatchProcessor`` with a native async store that needs the loop's default thread pool.

A native async store may use the default pool itself (``asyncio.to_thread`` around a sync client, or a DNS lookup
when it reconnects). The read-through must never block one of that pool's threads on such a store call: with as
many records at once as the pool has threads, every thread would wait for a call that waits for a thread. The
scenario runs in a subprocess, so that a regression fails the test at its timeout instead of hanging pytest (no
``wait_for`` can stop a loop whose threads never return).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from consumer import IdempotencyConfig, IdempotencyGuard, PowertoolsCutover
from persistence import IdempotencyRecord, InMemoryPersistenceLayer, RecordStatus

ROOT = Path(__file__).resolve().parents[2]

SCENARIO = '''
import asyncio
import concurrent.futures
import datetime as dt
import json

from consumer import AsyncBatchProcessor, EventType, IdempotencyConfig, PowertoolsCutover
from persistence import InMemoryPersistenceLayer

POOL = 6  # the loop's default pool on Lambda's 2 vCPUs: min(32, cpus + 4)
RECORDS = 10  # AsyncBatchProcessor's default max_concurrency: more records at once than the pool has threads


class PooledStore:
    """A native async store over a sync one, its writes run in the default pool (asyncio.to_thread)."""

    def __init__(self):
        self.inner = InMemoryPersistenceLayer()
        self.writing = 0
        self.pool_busy = asyncio.Event()

    async def acquire(self, record, now_ms):
        return self.inner.acquire(record, now_ms)

    async def _write(self, write, record):
        # The premise, by a barrier: POOL records have reached our store's write before any of them needs a thread.
        self.writing += 1
        if self.writing == POOL:
            self.pool_busy.set()
        await self.pool_busy.wait()
        await asyncio.to_thread(write, record)

    async def complete(self, record):
        await self._write(self.inner.complete, record)

    async def release(self, record):
        await self._write(self.inner.release, record)


class Table:  # the Powertools table: even records COMPLETED, odd ones INPROGRESS with a live lock
    items = {}

    def get_item(self, **request):
        return {"Item": self.items[request["Key"]["id"]["S"]]}


cutover = PowertoolsCutover(
    table_name="pt", until=dt.datetime(2099, 1, 1, tzinfo=dt.timezone.utc), key_prefix="p",
    event_key_jmespath="messageId", boto3_client=Table(),
)
for n in range(RECORDS):
    completed = {"status": {"S": "COMPLETED"}, "data": {"S": f'"by powertools {n}"'}}
    in_progress = {"status": {"S": "INPROGRESS"}, "in_progress_expiration": {"N": "4000000000000"}}
    Table.items[cutover.powertools_key({"messageId": f"m-{n}"})] = {
        **(in_progress if n % 2 else completed), "expiration": {"N": "4000000000"}
    }
store = PooledStore()
processor = AsyncBatchProcessor(EventType.SQS, store=store, config=IdempotencyConfig(powertools_cutover=cutover),
                                raise_on_entire_batch_failure=False)
ran = []


async def handler(record):
    ran.append(record.message_id)


async def main():
    asyncio.get_running_loop().set_default_executor(concurrent.futures.ThreadPoolExecutor(POOL))
    event = {"Records": [{"messageId": f"m-{n}", "body": "{}"} for n in range(RECORDS)]}
    response = await processor.process(event, handler)
    outcomes = [item.outcome.name for item in processor.items]
    results = [item.result for item in processor.items]
    kept = sorted(record.key for record in store.inner.scan())
    print(json.dumps({"response": response, "ran": ran, "outcomes": outcomes, "results": results, "kept": kept}))


asyncio.run(main())
'''


def test_a_native_async_store_that_needs_the_default_pool_never_waits_for_a_thread_the_read_through_holds():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", SCENARIO], capture_output=True, text=True, timeout=30, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the batch hung: the read-through's threads waited for store calls that waited for a thread")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["ran"] == []  # every record was Powertools': none runs here
    assert answer["outcomes"] == ["REPLAYED", "IN_PROGRESS"] * 5
    assert answer["results"][::2] == [f"by powertools {n}" for n in range(0, 10, 2)]
    assert answer["response"] == {"batchItemFailures": [{"itemIdentifier": f"m-{n}"} for n in range(1, 10, 2)]}
    assert len(answer["kept"]) == 5  # the COMPLETED records' copies; the in-progress ones' locks were released


UNTIL = dt.datetime(2099, 1, 1, tzinfo=dt.timezone.utc)
COMPLETED = {"status": {"S": "COMPLETED"}, "expiration": {"N": "4000000000"}, "data": {"S": '"by powertools"'}}


class _Table:
    """The Powertools table: one COMPLETED item; a read waits for ``answer`` when it is given."""

    def __init__(self, answer: threading.Event | None = None) -> None:
        self.answer = answer
        self.reading = threading.Event()

    def get_item(self, **_: Any) -> dict[str, Any]:
        self.reading.set()
        if self.answer is not None:
            assert self.answer.wait(30)
        return {"Item": COMPLETED}


class _HeldStore:
    """A native async store whose commits wait for ``proceed`` (``committing`` is set meanwhile)."""

    def __init__(self) -> None:
        self.inner = InMemoryPersistenceLayer()
        self.committing = asyncio.Event()
        self.proceed = asyncio.Event()

    async def acquire(self, record: IdempotencyRecord, now_ms: int) -> IdempotencyRecord | None:
        return self.inner.acquire(record, now_ms)

    async def complete(self, record: IdempotencyRecord) -> None:
        self.committing.set()
        await self.proceed.wait()
        self.inner.complete(record)

    async def release(self, record: IdempotencyRecord) -> None:
        self.inner.release(record)


def _guarded(store: Any, table: _Table, ran: list[int]) -> Any:
    cutover = PowertoolsCutover(table_name="pt", until=UNTIL, key_prefix="p", event_key_jmespath="messageId",
                                boto3_client=table)  # fmt: skip
    config = IdempotencyConfig(powertools_cutover=cutover, event_key_jmespath="messageId")

    async def run() -> None:
        async with IdempotencyGuard({"messageId": "m-1"}, store=store, config=config):
            ran.append(1)

    return run()


def test_a_cancellation_while_the_copy_is_committed_keeps_the_copy_and_runs_nothing(caplog):
    store, ran = _HeldStore(), []

    async def main() -> None:
        task = asyncio.ensure_future(_guarded(store, _Table(), ran))
        await store.committing.wait()
        task.cancel()
        await asyncio.sleep(0)  # the cancellation reaches the read-through, which waits for the commit's answer
        store.proceed.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert ran == []
    kept = list(store.inner.scan())
    assert [(record.status, record.response) for record in kept] == [(RecordStatus.COMPLETE, '"by powertools"')]
    assert "could not release" not in caplog.text  # the copy stands: no release was tried over it


def test_a_cancellation_during_the_powertools_read_waits_for_it_and_releases_our_lock():
    answer, store, ran = threading.Event(), _HeldStore(), []
    table = _Table(answer)

    async def main() -> None:
        task = asyncio.ensure_future(_guarded(store, table, ran))
        assert await asyncio.to_thread(table.reading.wait, 30)  # the read is under way in its thread
        task.cancel()
        await asyncio.sleep(0)
        answer.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert ran == []
    assert not store.committing.is_set()  # nothing copied: the record is Powertools' to replay when redelivered
    assert list(store.inner.scan()) == []  # our lock was released
