"""Bad input loses nothing and names the record; clock skew within lock_grace_ms never gives two live
holders."""

from __future__ import annotations

import json

import pytest
from events import kinesis_record, sqs_event, sqs_record
from fakes import FakeContext
from harness import assert_nothing_lost
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer import (
    BatchEventError,
    BatchProcessor,
    EventType,
    IdempotencyAlreadyInProgressError,
    IdempotencyConfig,
    IdempotencyGuard,
    make_key,
)
from persistence import InMemoryPersistenceLayer, RecordStatus


def process(store, event, handler, event_type=EventType.SQS, config=None):
    processor = BatchProcessor(event_type, store=store, config=config, raise_on_entire_batch_failure=False)
    response = processor.process(event, handler)
    return processor, {f["itemIdentifier"] for f in response["batchItemFailures"]}


def test_malformed_sqs_batch_loses_nothing(store, caplog, report):
    config = IdempotencyConfig(event_key_jmespath="powertools_json(body).order_id")
    records = [
        sqs_record("ok-1", {"order_id": "o-1"}),
        sqs_record("not-json", "{{{", raw_body=True),
        sqs_record("big", {"order_id": "o-big", "blob": "x" * 256 * 1024}),
        sqs_record("unicode", {"order_id": "заказ-🚀"}),
        sqs_record("no-key", {"customer": "c-1"}),
        sqs_record("unstorable", {"order_id": "o-set"}),
        sqs_record("huge-result", {"order_id": "o-huge"}),
    ]

    def handler(record):
        order = record.json_body
        if order.get("order_id") == "o-set":
            return {"connection": object()}  # not JSON: committed without the result, with a warning
        if order.get("order_id") == "o-huge":
            return "r" * 500_000  # over 400 KB: committed without the result, with a warning
        return order.get("order_id")

    processor, failed = process(store, sqs_event(*records), handler, config=config)
    assert failed == {"not-json", "no-key"}
    error = processor.items[1].error
    assert "event_key_jmespath" in str(error)
    assert "'powertools_json(body).order_id' selected nothing on SQS message no-key" in str(processor.items[4].error)
    assert "record not-json failed" in caplog.text
    assert "cannot be stored" in caplog.text
    assert "too large to store" in caplog.text
    keys = {r["messageId"]: make_key(r, config) for r in records if r["messageId"] not in ("not-json", "no-key")}
    lost = assert_nothing_lost(store, keys, failed)
    assert processor.summary.unguarded == 0  # no key selected: failed, not run
    report(records=len(records), deliveries=len(records), duplicates=0, faults="7 kinds of bad input",
           double_effects=0, lost=lost)  # fmt: skip


def test_invalid_kinesis_data_fails_that_record_naming_it(store):
    records = [kinesis_record(1, "u", {"n": 1}), kinesis_record(2, "u2", None, raw_data="!!not base64!!")]
    processor, failed = process(store, {"Records": records}, lambda r: r.json_data, EventType.KINESIS)
    seq = records[1]["kinesis"]["sequenceNumber"]
    assert failed == {seq}
    assert seq in str(processor.items[1].error)


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({"records": []}, "no 'Records' list"),
        ({"Records": "nope"}, "no 'Records' list"),
        ({"Records": [{"body": "{}"}]}, "record 0 of the batch is not a sqs record: missing 'messageId'"),
        ({"Records": ["a string"]}, "record 0 of the batch is not a sqs record"),
    ],
)
def test_unusable_events_fail_the_invocation_so_the_batch_comes_back(store, event, message):
    with pytest.raises(BatchEventError, match=message):
        process(store, event, lambda r: None)


GRACE_MS = 1000


@settings(max_examples=300, deadline=None)
@given(
    remaining_ms=st.integers(1, 900_000),
    skew_a=st.integers(-GRACE_MS // 2, GRACE_MS // 2),
    skew_b=st.integers(-GRACE_MS // 2, GRACE_MS // 2),
    wait_ms=st.integers(0, 905_000),
)
def test_clock_skew_within_the_grace_never_gives_two_live_holders(remaining_ms, skew_a, skew_b, wait_ms):
    """A's Lambda dies at real time t0 + remaining (Lambda enforces it). B, whose clock differs from A's by
    at most lock_grace_ms, may take the lock over only once A can no longer be running."""
    store, t0 = InMemoryPersistenceLayer(), 1_700_000_000_000
    record = sqs_record("m", {})
    config = IdempotencyConfig(lock_grace_ms=GRACE_MS)
    holder_a = IdempotencyGuard(record, store=store, config=config, context=FakeContext(remaining_ms),
                                clock=lambda: (t0 + skew_a) / 1000)  # fmt: skip
    holder_a.__enter__()
    real_b = t0 + wait_ms
    holder_b = IdempotencyGuard(record, store=store, config=config, clock=lambda: (real_b + skew_b) / 1000)
    try:
        holder_b.__enter__()
    except IdempotencyAlreadyInProgressError:
        return
    a_alive = real_b < t0 + remaining_ms
    assert not a_alive, f"B took over at {wait_ms} ms while A had {remaining_ms} ms to live"
    assert store.get(holder_b.key).status is RecordStatus.IN_PROGRESS


def test_result_of_an_oversized_body_round_trips(store):
    body = {"order_id": "o-1", "notes": "ü" * 100_000}
    processor, failed = process(store, sqs_event(sqs_record("m", body)), lambda r: json.dumps(r.json_body)[:10])
    assert failed == set()
    assert processor.items[0].result == '{"order_id'
