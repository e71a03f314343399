"""What the batch's lean path leaves out changes nothing a user sees: the summary is counted as the batch ends and
built only when read, the same for the sync and the async processor."""

from __future__ import annotations

import gc
import logging

import pytest
from events import failures, sqs_event, sqs_record
from fakes import FakeContext

import consumer.batch._summary as batch_summary
from consumer import (
    BatchProcessor,
    BatchSummary,
    EventType,
    IdempotencyConfig,
    Item,
    Outcome,
    current_idempotency_key,
    process_partial_response,
)
from persistence import InMemoryPersistenceLayer

EVENT = sqs_event(sqs_record("m-1", 1), sqs_record("m-2", 2), sqs_record("m-1", 1))


def handler(record):
    if record.message_id == "m-2":
        raise ValueError("declined")
    return {"done": record.message_id}


def test_the_summary_counts_the_outcomes_as_the_batch_ended_whatever_a_hook_does_to_an_item(face):
    def rewrite(item: Item) -> None:
        item.outcome = Outcome.FAILED  # a hook's own business: the batch's counts were taken before it ran

    processor = face.processor(EventType.SQS, store=InMemoryPersistenceLayer(), on_outcome=rewrite)
    response = face.process(EVENT, handler, processor, FakeContext())
    assert failures(response) == ["m-2"]
    summary = processor.summary
    assert (summary.records, summary.processed, summary.replayed, summary.failed) == (3, 1, 1, 1)
    assert processor.summary is summary  # built once, on the first read


def test_a_batch_that_succeeded_with_info_off_builds_no_summary_until_it_is_read(face, monkeypatch, caplog):
    built: list[BatchSummary] = []

    class Counted(BatchSummary):
        __slots__ = ()

        def __init__(self, **fields: object) -> None:
            super().__init__(**fields)  # type: ignore[arg-type]  # the summary's own fields
            built.append(self)

    monkeypatch.setattr(batch_summary, "BatchSummary", Counted)
    caplog.set_level(logging.WARNING, logger="idempotent_consumer")
    processor = face.processor(EventType.SQS, store=InMemoryPersistenceLayer())
    face.process(sqs_event(sqs_record("m-1", 1)), handler, processor, FakeContext())
    assert built == []  # nothing logged, no metrics: nothing read it
    assert processor.summary.processed == 1
    assert built == [processor.summary]


@pytest.mark.parametrize("level", [logging.INFO, logging.WARNING])
def test_the_summary_line_is_written_exactly_when_its_level_is_on(face, caplog, level):
    caplog.set_level(level, logger="idempotent_consumer")
    processor = face.processor(EventType.SQS, store=InMemoryPersistenceLayer())
    face.process(sqs_event(sqs_record("m-1", 1)), handler, processor, FakeContext())
    lines = [r for r in caplog.records if r.getMessage().startswith("batch processed")]
    assert len(lines) == (1 if level == logging.INFO else 0)
    face.process(EVENT, handler, processor, FakeContext())  # a failure: the WARNING line, whatever INFO is
    lines = [r for r in caplog.records if r.getMessage().startswith("batch processed: 3")]
    assert [r.levelno for r in lines] == [logging.WARNING]


def test_one_processor_gives_each_handler_what_it_asks_for_whatever_ran_before(face):
    # The processor keeps the last handler's shape for the next batch: a different handler is inspected afresh.
    processor = face.processor(EventType.SQS, store=InMemoryPersistenceLayer())
    seen: list[object] = []

    def plain(record):
        seen.append(record.message_id)

    def with_guard(record, guard):
        seen.append(guard.key is not None)

    for index, record_handler in enumerate((plain, with_guard, plain, with_guard)):
        response = face.process(sqs_event(sqs_record(f"m-{index}", index)), record_handler, processor, FakeContext())
        assert failures(response) == []
    assert seen == ["m-0", True, "m-2", True]


def test_a_handler_made_anew_for_each_batch_is_inspected_anew(face):
    # A handler that is gone may leave its address to the next one: the kept shape is the last handler's only while
    # that handler lives.
    processor = face.processor(EventType.SQS, store=InMemoryPersistenceLayer())
    seen: list[object] = []
    for index in range(6):
        if index % 2:

            def record_handler(record, guard):
                seen.append(guard.key is not None)

        else:

            def record_handler(record):
                seen.append(record.message_id)

        face.process(sqs_event(sqs_record(f"m-{index}", index)), record_handler, processor, FakeContext())
        del record_handler
        gc.collect()
    assert seen == ["m-0", True, "m-2", True, "m-4", True]


@pytest.mark.parametrize(
    ("variables", "guarded"),
    [
        ({"IDEMPOTENCY_DISABLED": "1"}, False),
        ({"IDEMPOTENCY_DISABLED": "0"}, True),
        ({"POWERTOOLS_IDEMPOTENCY_DISABLED": "true"}, False),
        ({"IDEMPOTENCY_DISABLED": "off", "POWERTOOLS_IDEMPOTENCY_DISABLED": "on"}, True),  # ours decides
        ({"IDEMPOTENCY_DISABLED": "", "POWERTOOLS_IDEMPOTENCY_DISABLED": "yes"}, False),  # ours empty: theirs
        ({}, True),
    ],
)
def test_the_disable_switch_set_between_two_invocations_decides_the_next_one(face, monkeypatch, variables, guarded):
    # Read once per invocation, never kept across invocations: a test sets it between two batches of one processor.
    monkeypatch.setenv("IDEMPOTENCY_DISABLED", "1")
    store = InMemoryPersistenceLayer()
    processor = face.processor(EventType.SQS, store=store)
    face.process(sqs_event(sqs_record("m-0", 0)), handler, processor, FakeContext())
    if "IDEMPOTENCY_DISABLED" not in variables:
        monkeypatch.delenv("IDEMPOTENCY_DISABLED")
    for name, value in variables.items():  # IDEMPOTENCY_DISABLED changes in place: os.environ keeps its size
        monkeypatch.setenv(name, value)
    face.process(sqs_event(sqs_record("m-1", 1)), handler, processor, FakeContext())
    assert (processor.summary.processed, processor.summary.unguarded) == ((1, 0) if guarded else (0, 1))
    assert len(list(store.scan())) == (1 if guarded else 0)


def test_a_batch_record_reads_the_remaining_time_once_for_its_margin_and_its_lock_deadline():
    """The deadline-margin check and the lock deadline share one read: the deadline is the one the check saw."""
    reads: list[int] = []

    class Shrinking:  # each read is 1,000 ms less than the one before, as if a second passed between reads
        def get_remaining_time_in_millis(self) -> int:
            reads.append(60_000 - 1_000 * len(reads))
            return reads[-1]

    store = InMemoryPersistenceLayer()
    deadlines: list[tuple[int, int]] = []  # (the lock deadline, the reads made when the body ran)

    def body(record):
        deadlines.append((store.get(current_idempotency_key()).in_progress_expires_at, len(reads)))

    processor = BatchProcessor(EventType.SQS, store=store, config=IdempotencyConfig(lock_grace_ms=0), clock=lambda: 7.0)
    process_partial_response(sqs_event(sqs_record("m-1", 1), sqs_record("m-2", 2)), body, processor, Shrinking())
    # Each lock deadline is now (7,000 ms) plus the remaining time of the read its record's margin check made last.
    assert deadlines == [(7_000 + reads[n - 1], n) for _, n in deadlines]
    assert deadlines[1][1] - deadlines[0][1] == 1  # one read a record
