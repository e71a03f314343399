"""A holder killed between its body and its commit, with writes queued (``guard.write``): neither the writes nor
the record's commit land; the redelivery after the lock's deadline writes once. Processes race for one key."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import pytest
from events import sqs_event, sqs_record
from ledgers import START, DynamoDBLedger, SQLiteLedger

from consumer import BatchProcessor, EventType, IdempotencyConfig, make_key
from consumer.local_context import LocalContext
from persistence import RecordStatus

CONFIG = IdempotencyConfig(lock_grace_ms=500)
RECORD = sqs_record("msg-debit", 30)
KEY = make_key(RECORD, CONFIG)


def _ledger(store, table):
    return SQLiteLedger(store) if table is None else DynamoDBLedger(store, table)


def debit(ledger):
    def handler(record, guard):
        ledger.debit(guard, int(record.body), record.message_id)
        return "debited"

    return handler


def _worker_killed_while_committing(factory, table, committing) -> None:
    store = factory()
    commit = store.complete_with

    def stalled(record, writes):  # the body returned; its writes and the record are on their way
        committing.set()
        time.sleep(120)
        commit(record, writes)

    store.complete_with = stalled
    processor = BatchProcessor(EventType.SQS, store=store, config=CONFIG)
    processor.process(sqs_event(RECORD), debit(_ledger(store, table)), LocalContext(timeout_ms=10_000))


def _worker_racing(factory, table, start, outcomes) -> None:
    store = factory()
    processor = BatchProcessor(EventType.SQS, store=store, config=CONFIG, raise_on_entire_batch_failure=False)
    start.wait(timeout=60)
    response = processor.process(sqs_event(RECORD), debit(_ledger(store, table)), LocalContext(timeout_ms=10_000))
    outcomes.put("failed" if response["batchItemFailures"] else "ok")


@pytest.fixture
def ledger_table(race_factory, ddb_server):
    """The ledger's table (``None`` on SQLite: the store's own file), set up beside the records."""
    store = race_factory()
    if race_factory.backend == "sqlite":
        SQLiteLedger.create(store)
        return None
    return DynamoDBLedger.create(ddb_server, store).table


@pytest.mark.slow
@pytest.mark.parametrize("race_factory", ["sqlite", "dynamodb"], indirect=True)
def test_a_holder_killed_before_its_commit_writes_nothing_and_the_redelivery_writes_once(
    race_factory, ledger_table, report
):
    ctx = multiprocessing.get_context("spawn")
    committing = ctx.Event()
    doomed = ctx.Process(target=_worker_killed_while_committing, args=(race_factory, ledger_table, committing))
    doomed.start()
    assert committing.wait(timeout=60), "the worker never reached its commit"
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.join(timeout=10)
    assert doomed.exitcode == -signal.SIGKILL
    store = race_factory()
    ledger = _ledger(store, ledger_table)
    assert store.get(KEY).status is RecordStatus.IN_PROGRESS
    assert (ledger.balance(), ledger.transfers()) == (START, [])  # neither the writes nor the commit

    def later():
        return time.time() + 10.6  # past the killed holder's lock deadline: time travel instead of sleeping

    redelivery = BatchProcessor(EventType.SQS, store=store, config=CONFIG, clock=later)
    assert redelivery.process(sqs_event(RECORD), debit(ledger))["batchItemFailures"] == []
    assert store.get(KEY).status is RecordStatus.COMPLETE
    assert (ledger.balance(), ledger.transfers()) == (START - 30, ["transfer#msg-debit"])
    report(records=1, deliveries=2, duplicates=1, faults="SIGKILL before the commit", double_effects=0, lost=0)


@pytest.mark.slow
@pytest.mark.parametrize("race_factory", ["sqlite", "dynamodb"], indirect=True)
def test_processes_racing_for_one_key_debit_once(race_factory, ledger_table, report):
    ctx = multiprocessing.get_context("spawn")
    start, outcomes = ctx.Event(), ctx.Queue()
    workers = [ctx.Process(target=_worker_racing, args=(race_factory, ledger_table, start, outcomes)) for _ in range(4)]
    for worker in workers:
        worker.start()
    start.set()
    for worker in workers:
        worker.join(timeout=120)
    results = sorted(outcomes.get(timeout=10) for _ in workers)
    ledger = _ledger(race_factory(), ledger_table)
    assert results.count("ok") >= 1  # the others met its live lock (reported) or its commit (replayed)
    assert (ledger.balance(), ledger.transfers()) == (START - 30, ["transfer#msg-debit"])
    report(records=1, deliveries=4, duplicates=3, faults="4 processes, one key", double_effects=0, lost=0)
