"""Faults at every store call (acquire, complete, release), one position at a time and at random: after
botocore's retries a record is either done or reported failed with an error naming its key; none is
marked COMPLETE without its handler having run; none is silently dropped."""

from __future__ import annotations

import time

import dynamodb_local
import pytest
from botocore.config import Config
from botocore.retries.standard import ExponentialBackoff
from events import sqs_event, sqs_record
from faults import KINDS, FaultInjector
from harness import effects

from consumer import BatchProcessor, EventType, IdempotencyConfig, make_key
from persistence import DynamoDBPersistenceLayer, PersistenceLayerError, RecordStatus
from samples.ledger import Ledger

ATTEMPTS = 3  # botocore standard retry mode: one call and two retries
CONFIG = IdempotencyConfig(lock_timeout_seconds=30)


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch):
    # Retries behave as botocore's standard mode decides; only the waiting between them is skipped.
    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0)


@pytest.fixture
def faulty(ddb_server):
    client = dynamodb_local.client_for(
        ddb_server.endpoint_url, Config(retries={"mode": "standard", "total_max_attempts": ATTEMPTS})
    )
    injector = FaultInjector(client, seed=11)
    return DynamoDBPersistenceLayer(table_name=ddb_server.create_table(), boto3_client=client), injector


@pytest.fixture
def ledger(tmp_path):
    return Ledger(str(tmp_path / "ledger.sqlite3"))


def later(seconds: float):
    return lambda: time.time() + seconds


def run(store, ledger, records, handler=None, clock=time.time):
    processor = BatchProcessor(
        EventType.SQS, store=store, config=CONFIG, clock=clock, raise_on_entire_batch_failure=False
    )

    def record_effect(record):
        ledger.record("faults", record.message_id, "ran")
        return "ok"

    response = processor.process(sqs_event(*records), handler or record_effect)
    return processor, {f["itemIdentifier"] for f in response["batchItemFailures"]}


RECORD = sqs_record("msg-1", {"order": 1})
KEY = make_key(RECORD, CONFIG)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("operation", ["PutItem", "UpdateItem"])
def test_one_transient_fault_is_retried_away(faulty, ledger, operation, kind):
    store, injector = faulty
    injector.fail(operation, kind, 1)
    _, failed = run(store, ledger, [RECORD])
    assert injector.total == 1
    assert failed == set()
    assert store.get(KEY).status is RecordStatus.COMPLETE
    assert effects(ledger, "faults") == {"msg-1": 1}


@pytest.mark.parametrize("kind", ["throttle", "server", "connection"])
def test_acquire_that_keeps_failing_reports_the_record_and_never_runs_it(faulty, ledger, kind, report):
    store, injector = faulty
    injector.fail("PutItem", kind, ATTEMPTS)
    processor, failed = run(store, ledger, [RECORD])
    assert failed == {"msg-1"}
    error = processor.items[0].error
    assert isinstance(error, PersistenceLayerError)
    assert error.key == KEY
    assert KEY in str(error)
    assert effects(ledger, "faults") == {}
    assert store.get(KEY) is None
    report(records=1, deliveries=1, duplicates=0, faults=injector.total, double_effects=0, lost=0)


@pytest.mark.parametrize("kind", ["throttle", "server", "connection"])
def test_complete_that_keeps_failing_reports_the_record_and_never_marks_it_complete(faulty, ledger, kind, report):
    store, injector = faulty
    injector.fail("UpdateItem", kind, ATTEMPTS)
    processor, failed = run(store, ledger, [RECORD])
    assert failed == {"msg-1"}
    assert processor.items[0].error.key == KEY
    assert store.get(KEY).status is RecordStatus.IN_PROGRESS  # the lock stands until its deadline
    # Redelivered before the deadline: in progress. After it: taken over, run, committed.
    assert run(store, ledger, [RECORD])[1] == {"msg-1"}
    assert run(store, ledger, [RECORD], clock=later(31))[1] == set()
    assert store.get(KEY).status is RecordStatus.COMPLETE
    # The handler ran before the failed commit and again after the takeover: the one window where a side
    # effect repeats (pass guard.key downstream to close it).
    assert effects(ledger, "faults") == {"msg-1": 2}
    report(records=1, deliveries=3, duplicates=2, faults=injector.total, double_effects="1 (commit failed)", lost=0)


def test_lost_answer_to_a_successful_commit_is_not_a_failure(faulty, ledger):
    store, injector = faulty
    injector.fail("UpdateItem", "lost_response", 1)  # applied; the retry finds our own COMPLETE record
    _, failed = run(store, ledger, [RECORD])
    assert failed == set()
    assert effects(ledger, "faults") == {"msg-1": 1}


@pytest.mark.parametrize("kind", ["throttle", "server", "connection", "lost_response"])
def test_release_faults_never_lose_the_record(faulty, ledger, kind):
    store, injector = faulty

    def failing(record):
        raise RuntimeError("downstream refused")

    injector.fail("DeleteItem", kind, ATTEMPTS)
    processor, failed = run(store, ledger, [RECORD], handler=failing)
    assert failed == {"msg-1"}
    assert isinstance(processor.items[0].error, RuntimeError)  # the handler's error, not the release's
    record = store.get(KEY)
    assert record is None or record.status is RecordStatus.IN_PROGRESS  # never COMPLETE: the handler failed
    assert run(store, ledger, [RECORD], clock=later(31))[1] == set()


@pytest.mark.slow
def test_random_faults_on_every_call_nothing_lost_nothing_complete_without_running(faulty, ledger, report):
    store, injector = faulty
    records = [sqs_record(f"msg-{i:03d}", {"order": i}) for i in range(200)]
    injector.randomly(0.3)
    pending, deliveries, ahead = records, 0, 0
    for _ in range(30):
        deliveries += len(pending)
        processor, failed = run(store, ledger, pending, clock=later(ahead))
        ran = {i.record.message_id for i in processor.items if i.outcome.value == "processed"}
        for message_id in ran:  # COMPLETE only ever after the handler ran
            assert effects(ledger, "faults")[message_id] >= 1
        pending = [r for r in pending if r["messageId"] in failed]
        if not pending:
            break
        ahead += 31  # the next redelivery comes after any lock left by a failed commit has expired
    assert pending == [], "records still failing after 30 redeliveries"
    injector.randomly(0.0)  # check the outcome without faults
    counts = effects(ledger, "faults")
    assert set(counts) == {r["messageId"] for r in records}
    for r in records:
        assert store.get(make_key(r, CONFIG)).status is RecordStatus.COMPLETE
    doubles = sum(1 for c in counts.values() if c > 1)
    commit_faults = sum(n for (op, kind), n in injector.injected.items() if op == "UpdateItem")
    assert doubles <= commit_faults  # a repeat needs a commit that failed after its handler ran
    report(records=200, deliveries=deliveries, duplicates=deliveries - 200, faults=injector.total,
           double_effects=f"{doubles} (commit failed)", lost=0)  # fmt: skip
