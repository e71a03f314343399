"""A holder killed mid-handler, and a holder that outlives its deadline: neither loses a record, neither
can overwrite the invocation that took over."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time

import pytest
from events import sqs_event, sqs_record
from harness import effects

from consumer import BatchProcessor, EventType, IdempotencyConfig, LockLostError, make_key
from consumer.local_context import LocalContext
from persistence import RecordStatus
from samples.ledger import Ledger

CONFIG = IdempotencyConfig(lock_grace_ms=500)
RECORD = sqs_record("msg-crash", {"order": 1})
KEY = make_key(RECORD, CONFIG)


def _doomed_worker(factory, ledger_path, locked) -> None:
    store = factory()
    processor = BatchProcessor(EventType.SQS, store=store, config=CONFIG)

    def handler(record):
        locked.set()  # the lock is ours; the effect and the commit are still to come
        time.sleep(120)
        Ledger(ledger_path).record("crash", record.message_id, "doomed")

    processor.process(sqs_event(RECORD), handler, LocalContext(timeout_ms=10_000))


def later(seconds: float):
    """A clock ``seconds`` ahead of this one: time travel instead of sleeping past a deadline."""
    return lambda: time.time() + seconds


@pytest.mark.slow
@pytest.mark.parametrize("race_factory", ["sqlite", "dynamodb", "redis"], indirect=True)  # memory: one process
def test_sigkilled_holder_blocks_until_its_deadline_then_is_taken_over(race_factory, tmp_path, report):
    ledger_path = str(tmp_path / "ledger.sqlite3")
    ctx = multiprocessing.get_context("spawn")
    locked = ctx.Event()
    doomed = ctx.Process(target=_doomed_worker, args=(race_factory, ledger_path, locked))
    doomed.start()
    assert locked.wait(timeout=60), "the worker never took the lock"
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.join(timeout=10)
    assert doomed.exitcode == -signal.SIGKILL
    store = race_factory()
    held = store.get(KEY)
    assert held.status is RecordStatus.IN_PROGRESS
    handler = lambda record: Ledger(ledger_path).record("crash", record.message_id, "redelivery")  # noqa: E731

    # Redelivered before the lock deadline (10 s + 0.5 s grace after the lock was taken): a live lock, reported
    # failed. A second before it by the clock, whatever the time the worker took to start and be killed.
    just_before = held.in_progress_expires_at / 1000 - 1
    early = BatchProcessor(
        EventType.SQS, store=store, config=CONFIG, clock=lambda: just_before, raise_on_entire_batch_failure=False
    )
    assert early.process(sqs_event(RECORD), handler)["batchItemFailures"] == [{"itemIdentifier": "msg-crash"}]
    assert early.summary.in_progress == 1

    # Past the deadline the record is stuck no longer: the next delivery takes it over and completes it.
    assert held.is_lock_expired(int(later(10.6)() * 1000))
    late = BatchProcessor(EventType.SQS, store=store, config=CONFIG, clock=later(10.6))
    assert late.process(sqs_event(RECORD), handler)["batchItemFailures"] == []
    assert store.get(KEY).status is RecordStatus.COMPLETE
    assert effects(Ledger(ledger_path), "crash") == {"msg-crash": 1}
    report(records=1, deliveries=3, duplicates=2, faults="SIGKILL mid-handler", double_effects=0, lost=0)


@pytest.mark.slow
def test_stale_holder_commit_is_refused_and_its_record_reported_failed(race_factory, tmp_path, report):
    store = race_factory()
    ledger = Ledger(str(tmp_path / "ledger.sqlite3"))
    entered, resume = threading.Event(), threading.Event()
    other = sqs_record("msg-other", {"order": 2})

    def paused_handler(record):
        if record.message_id == "msg-crash":
            entered.set()
            resume.wait(timeout=60)  # a pause that outlives the lock deadline
        ledger.record("stale", record.message_id, "stale holder")
        return "stale"

    stale = BatchProcessor(EventType.SQS, store=store, config=CONFIG)
    stale_response, stale_items = {}, []

    def run_stale():
        # Its time left stands still: the record after the paused one runs whatever the time the pause took.
        context = LocalContext(3000, clock=lambda: 0.0)
        stale_response.update(stale.process(sqs_event(RECORD, other), paused_handler, context))
        stale_items.extend(stale.items)  # a processor's items are those of the calling thread's last batch

    thread = threading.Thread(target=run_stale)
    thread.start()
    assert entered.wait(timeout=30)

    fresh = BatchProcessor(EventType.SQS, store=store, config=CONFIG, clock=later(5))
    fresh_handler = lambda record: (ledger.record("stale", record.message_id, "new holder"), "fresh")[1]  # noqa: E731
    assert fresh.process(sqs_event(RECORD), fresh_handler)["batchItemFailures"] == []
    resume.set()
    thread.join(timeout=30)

    assert stale_response["batchItemFailures"] == [{"itemIdentifier": "msg-crash"}]  # redelivered, then replayed
    error = stale_items[0].error
    assert isinstance(error, LockLostError)
    assert error.key == KEY
    assert error.existing_record.response == '"fresh"'
    assert store.get(KEY).response == '"fresh"'  # nothing overwritten
    assert stale_items[1].outcome.value == "processed"
    replay = BatchProcessor(EventType.SQS, store=store, config=CONFIG, clock=later(5))
    assert replay.process(sqs_event(RECORD), fresh_handler)["batchItemFailures"] == []
    assert replay.summary.replayed == 1
    # The paused holder's own effect did happen (it ran past its deadline, which Lambda would not allow);
    # the fence keeps its result from overwriting the new holder's.
    assert effects(ledger, "stale") == {"msg-crash": 2, "msg-other": 1}
    report(
        records=2,
        deliveries=4,
        duplicates=2,
        faults="holder paused past deadline",
        double_effects="1 (stale holder, fenced)",
        lost=0,
    )
