"""Findings of a second review, of the changes that landed after the first: each a test of the promise that every
record ends committed after its body ran once, reported in batchItemFailures (or raised), or replayed from a
committed record. Each test names the ending it defends.
"""

from __future__ import annotations

import concurrent.futures
import threading

import pytest

from consumer import (
    BatchProcessor,
    EventType,
    IdempotencyConfig,
    IdempotencyConfigError,
    idempotent_function,
    process_partial_response,
)
from persistence import SQLitePersistenceLayer

# -- an @idempotent_function record handler: the same key, written differently, was refused -----------------------


@pytest.mark.parametrize(
    ("processors", "functions"),
    [
        # "" is the record's own id, as None (the default config) is: the same key
        (IdempotencyConfig(event_key_jmespath=""), IdempotencyConfig()),
        # the same expression, spaced differently
        (
            IdempotencyConfig(event_key_jmespath="powertools_json(body).order_id"),
            IdempotencyConfig(event_key_jmespath="powertools_json( body ) . order_id"),
        ),
        # a header by key_header, and by the header() function key_header stands for
        (
            IdempotencyConfig(key_header="Idempotency-Key"),
            IdempotencyConfig(event_key_jmespath="header(@, 'Idempotency-Key')"),
        ),
    ],
    ids=["empty-is-the-default", "spaced", "key-header-as-header-call"],
)
def test_a_processor_config_selecting_the_functions_own_key_is_not_refused(tmp_path, processors, functions):
    # Refused with a TypeError on every invocation (the whole batch back, forever): ending 2 for every record of a
    # consumer whose configs agree. The refusal compared the option's text, not what it selects.
    event_type = EventType.KAFKA if processors.key_header else EventType.SQS
    charged = []

    @idempotent_function(
        data_keyword_argument="record",
        store=SQLitePersistenceLayer(tmp_path / "f.sqlite3"),
        config=functions,
        name=f"charge-{tmp_path.name}",  # one per case: a failed case's function may still be alive
    )
    def charge(record):
        charged.append(record)
        return "charged"

    processor = BatchProcessor(event_type, config=processors)
    if event_type is EventType.SQS:
        event = {"Records": [{"messageId": m, "body": '{"order_id": "o-1"}'} for m in ("m-1", "m-1")]}
    else:
        record = {
            "topic": "t",
            "partition": 0,
            "offset": 0,
            "value": "e30=",
            "headers": [{"Idempotency-Key": list(b"k-1")}],
        }
        event = {
            "eventSource": "aws:kafka",
            "eventSourceArn": "arn:aws:kafka:eu-west-1:1:cluster/c/1",
            "records": {"t-0": [record, {**record, "offset": 1}]},
        }
    assert process_partial_response(event, charge, processor) == {"batchItemFailures": []}
    assert len(charged) == 1  # the second record replays the first's commit


# -- a nested batch handed to a thread of the application's own: the outer pool's workers all wait for it ----------


@pytest.mark.xfail(
    strict=True,
    reason=(
        "a nested batch run by a thread outside the processor's pool (an executor of the application's, "
        "asyncio.to_thread) carries no worker marker: it queues its records on the pool whose every worker waits "
        "for it. Detecting a pool with no idle worker needs ThreadPoolExecutor internals or a pool of our own"
    ),
)
def test_a_nested_batch_run_from_another_thread_of_the_record_does_not_wait_for_the_busy_pool(tmp_path):
    # Each outer record hands its fan-out to an executor of its own (a common way to bound a call's time) and waits
    # at most 5 s for it. Both of the processor's workers run an outer record; the inner records queue behind them
    # and never start: each outer record fails on its wait (ending 2, correct but never progressing: on every
    # redelivery the same, until the queue's redrive moves the messages to the dead-letter queue). Without the
    # timeout the invocation hangs until Lambda's.
    store = SQLitePersistenceLayer(tmp_path / "s.sqlite3")
    processor = BatchProcessor(EventType.SQS, store=store, max_workers=2)
    both_started = threading.Barrier(2, timeout=10)
    ran = []

    def part(record):
        ran.append(record.message_id)

    def fan_out(record):
        both_started.wait()  # every worker of the pool holds an outer record
        inner = {"Records": [{"messageId": f"{record.message_id}-{i}", "body": "{}"} for i in range(2)]}
        own = concurrent.futures.ThreadPoolExecutor(1)
        try:
            return own.submit(process_partial_response, inner, part, processor).result(timeout=5)
        finally:
            own.shutdown(wait=False)  # the fan-out ends once a worker is free: the outer record failed meanwhile

    event = {"Records": [{"messageId": f"o-{i}", "body": "{}"} for i in range(2)]}
    assert process_partial_response(event, fan_out, processor) == {"batchItemFailures": []}
    assert sorted(ran) == ["o-0-0", "o-0-1", "o-1-0", "o-1-1"]


# -- the 100-year bound: the one duration in milliseconds was left unbounded ---------------------------------------


class _Context:
    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def test_a_lock_grace_past_a_hundred_years_is_refused_when_the_config_is_built(tmp_path):
    # lock_grace_ms is added to every lock deadline, as the other durations are: past 64-bit milliseconds SQLite
    # raised OverflowError on every record's acquire, so every record failed on every delivery (ending 2, forever,
    # and every redelivery the same) instead of the config being refused once, as a longer expiry is.
    with pytest.raises(IdempotencyConfigError, match=r"lock_grace_ms must be at most 3153600000000 \(100 years\)"):
        IdempotencyConfig(lock_grace_ms=10**19)
    longest = IdempotencyConfig(lock_grace_ms=100 * 365 * 24 * 3600 * 1000)
    processor = BatchProcessor(EventType.SQS, store=SQLitePersistenceLayer(tmp_path / "s.sqlite3"), config=longest)
    event = {"Records": [{"messageId": "m-1", "body": "{}"}, {"messageId": "m-1", "body": "{}"}]}
    ran = []
    assert process_partial_response(event, ran.append, processor, _Context()) == {"batchItemFailures": []}
    assert len(ran) == 1
    assert processor.summary.processed == 1
    assert processor.summary.replayed == 1
