"""The cut-over under ``AsyncBatchProcessor`` with a native async store that needs the loop's default thread pool.

A native async store may use the default pool itself (``asyncio.to_thread`` around a sync client, or a DNS lookup
when it reconnects). The read-through must never block one of that pool's threads on such a store call: with as
many records at once as the pool has threads, every thread would wait for a call that waits for a thread. The
scenario runs in a subprocess, so that a regression fails the test at its timeout instead of hanging pytest (no
``wait_for`` can stop a loop whose threads never return).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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
        done = subprocess.run(  # noqa: S603 - our interpreter, our script
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
