"""consumer.testing.simulate: the real guard holds on the shipped stores, and each seeded protocol bug is caught."""

from __future__ import annotations

import dataclasses
import itertools
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest

from consumer.testing import SimulationFailure, simulate
from persistence import DynamoDBPersistenceLayer, InMemoryPersistenceLayer, RecordStatus, SQLitePersistenceLayer

if TYPE_CHECKING:
    from pathlib import Path

    from persistence import IdempotencyRecord


class _CompleteIgnoresLease(InMemoryPersistenceLayer):
    """Commits over any IN_PROGRESS record, whoever holds it."""

    def complete(self, record: IdempotencyRecord) -> None:
        existing = self.get(record.key)
        if existing is not None and existing.status is RecordStatus.IN_PROGRESS:
            self._records[record.key] = record
            return
        super().complete(record)


class _AcquireTakesLiveLock(InMemoryPersistenceLayer):
    """Takes over an IN_PROGRESS lock whatever its deadline."""

    def acquire(self, record: IdempotencyRecord, now_ms: int) -> IdempotencyRecord | None:
        existing = self.get(record.key)
        if existing is not None and existing.status is RecordStatus.IN_PROGRESS:
            self._records[record.key] = record
            return None
        return super().acquire(record, now_ms)


class _ReleaseIgnoresStatus(InMemoryPersistenceLayer):
    """Deletes a record under the lease read, whatever its status (the CLI delete bug: a COMPLETE one too)."""

    def release(self, record: IdempotencyRecord) -> None:
        existing = self.get(record.key)
        if existing is not None and existing.lease == record.lease:
            del self._records[record.key]
            return
        super().release(record)


class _CompleteKeepsDeadline(InMemoryPersistenceLayer):
    """Writes COMPLETE but leaves the lock's deadline on the record."""

    def complete(self, record: IdempotencyRecord) -> None:
        existing = self.get(record.key)
        super().complete(record)
        stored = self.get(record.key)
        if existing is not None and stored is not None and existing.lease == record.lease:
            deadline = existing.in_progress_expires_at
            self._records[record.key] = dataclasses.replace(stored, in_progress_expires_at=deadline)


class _WallClockAcquire(InMemoryPersistenceLayer):
    """Judges a lock's deadline by the machine's clock instead of the caller's ``now_ms``."""

    def acquire(self, record: IdempotencyRecord, now_ms: int) -> IdempotencyRecord | None:  # noqa: ARG002
        return super().acquire(record, int(time.time() * 1000))


SEEDED_BUGS = {
    "complete ignores the lease": (_CompleteIgnoresLease, "complete accepted without the lease"),
    "acquire takes over a live lock": (_AcquireTakesLiveLock, "acquire took a record that was not free"),
    "release ignores the status": (_ReleaseIgnoresStatus, "release deleted a record other than the one read"),
    "complete keeps the lock deadline": (_CompleteKeepsDeadline, "kept its lock deadline"),
    "acquire ignores the injected clock": (_WallClockAcquire, "acquire took a record that was not free"),
}


@pytest.mark.parametrize("bug", SEEDED_BUGS)
def test_each_seeded_bug_is_caught_and_its_schedule_replays_it(bug: str) -> None:
    store_type, violation = SEEDED_BUGS[bug]
    with pytest.raises(SimulationFailure) as caught:
        simulate(store_type, budget_s=300, seed=0)  # found in seconds: the budget is a safety net
    failure = caught.value
    assert any(violation in line for line in failure.violations), failure
    assert failure.trace, failure
    with pytest.raises(SimulationFailure) as again:  # a run is a function of its schedule: it fails the same way
        simulate(store_type, schedule=failure.schedule)
    assert again.value.violations == failure.violations
    assert again.value.trace == failure.trace


def test_the_memory_store_holds_in_every_schedule_with_one_fault() -> None:
    report = simulate(InMemoryPersistenceLayer, budget_s=600, seed=0, depth=100, random_runs=0)  # bounded by depth
    assert report.exhaustive_complete, report
    assert report.longest <= report.depth, report  # every schedule, whatever its length
    assert report.exhaustive_runs > 1000, report


def test_sqlite_on_a_real_file_holds(tmp_path: Path) -> None:
    path = tmp_path / "simulated.sqlite3"

    def make_store() -> SQLitePersistenceLayer:  # one file (a new one per run is 6x slower), emptied for each run
        store = SQLitePersistenceLayer(path)
        for record in list(store.scan()):
            store.delete(record.key)
        return store

    # Bounded by runs, not time: every schedule to 4 choices, then 50 random ones (the budget is a safety net).
    report = simulate(make_store, budget_s=600, seed=0, depth=4, random_runs=50)
    assert report.exhaustive_complete, report
    assert report.random_runs == 50, report


def test_a_failing_schedule_holds_on_the_real_store() -> None:
    with pytest.raises(SimulationFailure) as caught:
        simulate(_AcquireTakesLiveLock, budget_s=300, seed=0)
    assert caught.value.schedule  # the shortest failing schedule found: not the default, which holds
    assert simulate(InMemoryPersistenceLayer, schedule=caught.value.schedule).exhaustive_runs == 1


def test_import_consumer_never_loads_the_simulator() -> None:
    code = "import sys, consumer; assert 'consumer.testing' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_redis_on_a_real_server_holds(redis_server: Any) -> None:
    import redis  # noqa: PLC0415 - the optional store's client

    from persistence.redis import RedisPersistenceLayer  # noqa: PLC0415 - the optional store

    client = redis.Redis.from_url(redis_server.url)
    epoch = int(time.time())  # Redis expires keys by its own clock: the simulated time starts near it
    runs = itertools.count()

    def make_store() -> RedisPersistenceLayer:
        return RedisPersistenceLayer(client, key_prefix=f"simulated-{epoch}-{next(runs)}:")

    try:
        # Bounded by runs, not time: every schedule to 2 choices, then 60 random ones (the budget is a safety net).
        report = simulate(make_store, budget_s=600, seed=0, epoch_s=epoch, depth=2, random_runs=60)
    finally:
        client.close()
    assert report.exhaustive_complete, report
    assert report.random_runs == 60, report


def test_dynamodb_local_holds_at_a_smaller_bound(ddb_server: Any) -> None:
    client = ddb_server.client()
    table = ddb_server.create_table()
    epoch = int(time.time())  # near the real time, as a real table's TTL would see it

    def make_store() -> DynamoDBPersistenceLayer:  # one table, emptied for each run
        store = DynamoDBPersistenceLayer(table_name=table, boto3_client=client)
        for record in list(store.scan()):
            store.delete(record.key)
        return store

    # Bounded by runs, not time: every schedule to 2 choices (the budget is a safety net).
    report = simulate(make_store, budget_s=600, seed=0, epoch_s=epoch, depth=2, random_runs=0)
    assert report.exhaustive_complete, report
    assert report.exhaustive_runs >= 40, report  # the schedules to 2 choices (a memory store: 40)
