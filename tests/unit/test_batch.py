"""The batch processor: partial responses, ordering, failure rules, deadline, summary, bad input; each test that
takes ``face`` runs through BatchProcessor and AsyncBatchProcessor alike (``tests/faces.py``)."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from events import ddb_record, failures, kinesis_record, sqs_event, sqs_record
from fakes import FakeClock, FakeContext

from consumer import (
    AsyncBatchProcessor,
    BatchEventError,
    BatchProcessingError,
    BatchProcessor,
    EventType,
    IdempotencyConfig,
    IdempotencyGuard,
    IdempotencyKeyError,
    UnexpectedBatchTypeError,
)
from persistence import InMemoryPersistenceLayer


@pytest.fixture
def store():
    return InMemoryPersistenceLayer()


def poison_on(*bad):
    """A handler that records what it ran and raises on the bodies in ``bad``."""
    ran = []

    def handler(record):
        payload = record.json_body if hasattr(record, "json_body") else record.json_data
        ran.append(payload)
        if payload in bad:
            raise ValueError(f"poison: {payload}")
        return {"ok": payload}

    handler.ran = ran
    return handler


class TestSQS:
    def test_only_failed_records_are_reported(self, face, store):
        handler = poison_on(2)
        event = sqs_event(*(sqs_record(f"m{i}", i) for i in range(1, 4)))
        processor = face.processor(EventType.SQS, store=store)
        assert failures(face.process(event, handler, processor)) == ["m2"]
        assert handler.ran == [1, 2, 3]
        summary = processor.summary
        assert (summary.records, summary.processed, summary.failed) == (3, 2, 1)

    def test_redelivered_batch_replays_and_retries_only_the_failure(self, face, store):
        event = sqs_event(*(sqs_record(f"m{i}", i) for i in range(1, 4)))
        processor = face.processor(EventType.SQS, store=store)
        face.process(event, poison_on(2), processor)
        handler = poison_on()
        assert failures(face.process(event, handler, processor)) == []
        assert handler.ran == [2]
        assert (processor.summary.replayed, processor.summary.processed) == (2, 1)

    def test_duplicate_inside_one_batch_runs_once(self, face, store):
        handler = poison_on()
        event = sqs_event(sqs_record("m1", 1), sqs_record("m1", 1))
        processor = face.processor(EventType.SQS, store=store)
        assert failures(face.process(event, handler, processor)) == []
        assert handler.ran == [1]

    def test_live_lock_of_another_invocation_is_a_failure(self, face, store):
        record = sqs_record("m1", 1)
        with IdempotencyGuard(record, store=store) as guard:
            processor = face.processor(EventType.SQS, store=store)
            response = face.process(sqs_event(record, sqs_record("m2", 2)), poison_on(), processor)
            guard.result = "first"
        assert failures(response) == ["m1"]
        assert processor.summary.in_progress == 1

    @pytest.mark.parametrize("passing", ["positional", "keyword"])
    def test_handler_can_take_the_guard_for_its_key(self, face, store, passing):
        keys = []

        def positional(record, guard):
            keys.append((record.message_id, guard.key))

        def keyword(record, *, guard):
            keys.append((record.message_id, guard.key))

        processor = face.processor(EventType.SQS, store=store)
        handler = positional if passing == "positional" else keyword
        assert failures(face.process(sqs_event(sqs_record("m1", 1)), handler, processor)) == []
        assert keys[0][0] == "m1"
        assert keys[0][1].startswith("local#")
        assert store.get(keys[0][1]) is not None

    def test_all_failed_raises_with_every_cause(self, face, store):
        event = sqs_event(sqs_record("m1", 1), sqs_record("m2", 2))
        processor = face.processor(EventType.SQS, store=store)
        with pytest.raises(BatchProcessingError) as caught:
            face.process(event, poison_on(1, 2), processor)
        assert [item_id for item_id, _ in caught.value.errors] == ["m1", "m2"]
        assert all(isinstance(e, ValueError) for _, e in caught.value.errors)
        assert failures(caught.value.response) == ["m1", "m2"]

    def test_all_failed_returns_when_told_not_to_raise(self, face, store):
        event = sqs_event(sqs_record("m1", 1), sqs_record("m2", 2))
        processor = face.processor(EventType.SQS, store=store, raise_on_entire_batch_failure=False)
        assert failures(face.process(event, poison_on(1, 2), processor)) == ["m1", "m2"]

    def test_an_empty_batch_is_refused_as_lambda_never_sends_one(self, face, store):
        processor = face.processor(EventType.SQS, store=store)
        with pytest.raises(UnexpectedBatchTypeError, match="'Records' list is empty"):
            face.process({"Records": []}, poison_on(), processor)


class TestFIFO:
    EVENT = sqs_event(
        sqs_record("a1", "a1", group="A"),
        sqs_record("b1", "b1", group="B"),
        sqs_record("a2", "a2", group="A"),
        sqs_record("b2", "b2", group="B"),
        sqs_record("a3", "a3", group="A"),
    )

    def test_fifo_is_detected_and_a_failure_fails_the_rest_of_the_batch(self, face, store):
        handler = poison_on("b1")
        processor = face.processor(EventType.SQS, store=store)
        response = face.process(self.EVENT, handler, processor)
        assert failures(response) == ["b1", "a2", "b2", "a3"]
        assert handler.ran == ["a1", "b1"]
        assert (processor.summary.event_type, processor.summary.skipped) == ("sqs_fifo", 3)

    def test_skip_group_on_error_fails_only_the_rest_of_that_group(self, face, store):
        handler = poison_on("b1")
        processor = face.processor(EventType.SQS_FIFO, store=store, skip_group_on_error=True)
        assert failures(face.process(self.EVENT, handler, processor)) == ["b1", "b2"]
        assert handler.ran == ["a1", "b1", "a2", "a3"]

    def test_parallel_groups_keep_fifo_order_and_lose_nothing(self, face, store):
        ran, lock = [], threading.Lock()
        records = [sqs_record(f"{g}{i}", f"{g}{i}", group=g) for i in range(5) for g in "ABCD"]

        def handler(record):
            with lock:
                ran.append(record.message_id)
            if record.message_id == "B1":
                raise ValueError("poison")

        processor = face.processor(EventType.SQS, store=store, max_workers=4, skip_group_on_error=True)
        failed = set(failures(face.process(sqs_event(*records), handler, processor)))
        assert failed == {"B1", "B2", "B3", "B4"}
        assert [m for m in ran if m.startswith("B")] == ["B0", "B1"]
        for group in "ACD":
            assert [m for m in ran if m.startswith(group)] == [f"{group}{i}" for i in range(5)]
        completed = {item.item_id for item in processor.items if item.outcome.succeeded}
        assert completed | failed == {r["messageId"] for r in records}


class TestStreams:
    def test_kinesis_failure_skips_the_rest_of_its_partition_key_only(self, face, store):
        event = {"Records": [kinesis_record(1, "u1", 1), kinesis_record(2, "u2", 2), kinesis_record(3, "u1", 3)]}
        handler = poison_on(1)
        processor = face.processor(EventType.KINESIS, store=store)
        response = face.process(event, handler, processor)
        assert failures(response) == [
            event["Records"][0]["kinesis"]["sequenceNumber"],
            event["Records"][2]["kinesis"]["sequenceNumber"],
        ]
        assert handler.ran == [1, 2]

    def test_stop_on_first_failure_reports_every_later_record(self, face, store):
        event = {"Records": [kinesis_record(i, f"u{i}", i) for i in range(1, 5)]}
        handler = poison_on(2)
        processor = face.processor(EventType.KINESIS, store=store, stop_on_first_failure=True)
        response = face.process(event, handler, processor)
        assert failures(response) == [r["kinesis"]["sequenceNumber"] for r in event["Records"][1:]]
        assert handler.ran == [1, 2]

    def test_dynamodb_stream_records_are_typed_and_reported_by_sequence_number(self, face, store):
        image = {"pk": {"S": "acct-1"}, "balance": {"N": "12.50"}, "tags": {"SS": ["a"]}, "n": {"N": "3"}}
        event = {"Records": [ddb_record(1, "acct-1", image), ddb_record(2, "acct-1", None, "REMOVE")]}
        seen = []

        def handler(record):
            seen.append((record.event_name, record.keys, record.new_image))
            if record.event_name == "REMOVE":
                raise RuntimeError("cannot remove")

        processor = face.processor(EventType.DYNAMODB_STREAMS, store=store)
        assert failures(face.process(event, handler, processor)) == [f"{2:021d}"]
        assert seen[0][1] == {"pk": "acct-1"}
        assert seen[0][2]["n"] == 3
        assert str(seen[0][2]["balance"]) == "12.50"
        assert seen[0][2]["tags"] == {"a"}

    @pytest.mark.parametrize("build", [kinesis_record, ddb_record], ids=["kinesis", "dynamodb"])
    def test_two_streams_read_by_one_function_share_no_record(self, face, store, build):
        # eventID is unique within its stream only: the second stream's record 1 replayed the first's result.
        ran = []
        source = EventType.KINESIS if build is kinesis_record else EventType.DYNAMODB_STREAMS
        processor = face.processor(source, store=store)
        for stream in ("orders", "refunds"):
            record = build(1, "k", None)
            record["eventSourceARN"] += f"-{stream}"  # another stream (or table), the same eventID
            assert failures(face.process({"Records": [record]}, lambda r, s=stream: ran.append(s), processor)) == []
        assert ran == ["orders", "refunds"]
        assert (processor.summary.processed, processor.summary.replayed) == (1, 0)


class TestDeadlineAndParallelism:
    def test_records_are_deferred_when_the_deadline_is_near(self, face, store, caplog):
        clock = FakeClock()
        context = FakeContext(remaining_ms=5000, clock=clock)

        def slow(record):
            clock.advance(1.5)

        event = sqs_event(*(sqs_record(f"m{i}", i) for i in range(5)))
        processor = face.processor(EventType.SQS, store=store, clock=clock, deadline_margin_ms=1000)
        with caplog.at_level(logging.WARNING, logger="idempotent_consumer"):
            response = face.process(event, slow, processor, context)
        # 5000 ms: m0 (3500 left), m1 (2000 left), m2 (500 left), then less than 1000 ms: deferred.
        assert failures(response) == ["m3", "m4"]
        assert processor.summary.deferred == 2
        deferred = [r.getMessage() for r in caplog.records if getattr(r, "outcome", None) == "deferred"]
        assert [line.split(" deferred:")[0] for line in deferred] == ["record m3", "record m4"]

    def test_parallel_workers_keep_per_key_order(self, face, store):
        order: dict[str, list[int]] = {}
        active, peak, lock = [0], [0], threading.Lock()

        def start(record):
            with lock:
                active[0] += 1
                peak[0] = max(peak[0], active[0])

        def finish(record):  # after a pause in which other keys' records may run (threads sleep, tasks await)
            with lock:
                order.setdefault(record.partition_key, []).append(record.json_data)
                active[0] -= 1

        records = [kinesis_record(i, f"k{i % 4}", i) for i in range(40)]
        processor = face.processor(EventType.KINESIS, store=store, max_workers=4)
        assert failures(face.process({"Records": records}, face.pausing(start, finish), processor)) == []
        assert order == {f"k{j}": list(range(j, 40, 4)) for j in range(4)}
        assert peak[0] > 1, "records of different keys never ran at the same time"

    def test_parallel_duplicates_replay_instead_of_failing_on_the_lock(self, face, store):
        ran, lock = [], threading.Lock()

        def handler(record):
            with lock:
                ran.append(record.message_id)
            time.sleep(0.005)

        event = sqs_event(*(sqs_record(f"m{i % 5}", i % 5) for i in range(20)))
        processor = face.processor(EventType.SQS, store=store, max_workers=8)
        assert failures(face.process(event, handler, processor)) == []
        assert sorted(ran) == [f"m{i}" for i in range(5)]
        assert (processor.summary.processed, processor.summary.replayed) == (5, 15)

    def test_parallel_sqs_standard_runs_every_record_once(self, face, store):
        ran, lock = [], threading.Lock()

        def handler(record):
            with lock:
                ran.append(record.message_id)

        event = sqs_event(*(sqs_record(f"m{i}", i) for i in range(50)))
        processor = face.processor(EventType.SQS, store=store, max_workers=8)
        assert failures(face.process(event, handler, processor)) == []
        assert sorted(ran) == sorted(f"m{i}" for i in range(50))


class TestBadInput:
    def test_event_without_records_is_unusable(self, face, store):
        with pytest.raises(BatchEventError, match="no 'Records' list"):
            face.process({"detail": {}}, poison_on(), face.processor(EventType.SQS, store=store))

    def test_record_without_its_identifier_fails_the_invocation(self, face, store):
        bad = sqs_record("m2", 2)
        del bad["messageId"]
        event = sqs_event(sqs_record("m1", 1), bad)
        with pytest.raises(BatchEventError, match="record 1 of the batch is not a sqs record: missing 'messageId'"):
            face.process(event, poison_on(), face.processor(EventType.SQS, store=store))

    def test_undecodable_kinesis_data_fails_only_that_record_naming_it(self, face, store, caplog):
        event = {"Records": [kinesis_record(1, "u1", 1), kinesis_record(2, "u2", None, raw_data="%%%")]}
        processor = face.processor(EventType.KINESIS, store=store)
        response = face.process(event, lambda r: r.json_data, processor)
        bad_seq = event["Records"][1]["kinesis"]["sequenceNumber"]
        assert failures(response) == [bad_seq]
        assert f"Kinesis record {bad_seq}: data is not valid base64" in caplog.text

    def test_non_json_body_with_a_json_key_expression_fails_that_record(self, face, store):
        config = IdempotencyConfig(event_key_jmespath="powertools_json(body).order_id")
        event = sqs_event(sqs_record("m1", {"order_id": "o-1"}), sqs_record("m2", "not json", raw_body=True))
        processor = face.processor(EventType.SQS, store=store, config=config)
        assert failures(face.process(event, lambda r: 1, processor)) == ["m2"]
        assert isinstance(processor.items[1].error, IdempotencyKeyError)


def test_summary_is_logged_once_with_its_counts_as_fields(face, store, caplog):
    processor = face.processor(EventType.SQS, store=store)
    with caplog.at_level(logging.INFO, logger="idempotent_consumer"):
        face.process(sqs_event(sqs_record("m1", 1), sqs_record("m2", 2)), poison_on(2), processor)
    (record,) = [r for r in caplog.records if hasattr(r, "batch_summary")]
    assert record.getMessage().startswith("batch processed: 2 sqs records: 1 processed, 1 failed (")
    assert record.levelno == logging.WARNING  # a record failed
    summary = record.batch_summary
    assert {k: summary[k] for k in ("records", "processed", "failed", "replayed", "deferred")} == {
        "records": 2,
        "processed": 1,
        "failed": 1,
        "replayed": 0,
        "deferred": 0,
    }


def test_processor_rejects_bad_settings(store):
    with pytest.raises(ValueError, match="max_workers"):
        BatchProcessor(EventType.SQS, store=store, max_workers=0)
    with pytest.raises(ValueError, match="max_concurrency"):
        AsyncBatchProcessor(EventType.SQS, store=store, max_concurrency=0)
    with pytest.raises(ValueError, match="deadline_margin_ms"):
        AsyncBatchProcessor(EventType.SQS, store=store, deadline_margin_ms=-1)
