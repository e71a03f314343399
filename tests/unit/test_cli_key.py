"""``idempotent-consumer key``: each record's key as a consumer gives it, and what that key hashes, in words."""

from __future__ import annotations

import json
import uuid

import pytest
from events import kafka_event, kafka_record, sqs_event, sqs_record

from consumer import BatchProcessor, EventType, IdempotencyConfig
from consumer.cli import main
from persistence import InMemoryPersistenceLayer

BINARY_KEY = uuid.UUID("ff123456-789a-bcde-f012-3456789abcde").bytes  # a producer's UUID key: not UTF-8


def key_lines(tmp_path, capsys, event, *options):
    """What ``key --event FILE *options`` prints, line by line, and its exit code."""
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))
    code = main(["key", "--event", str(path), *options])
    captured = capsys.readouterr()
    assert not captured.err
    return code, captured.out.splitlines()


def consumer_keys(event_type, event, config):
    """The keys a batch processor gives the event's records, in order."""
    processor = BatchProcessor(event_type, store=InMemoryPersistenceLayer(), config=config)
    processor.process(event, lambda record: None)
    return [item.key for item in processor.items]


def test_a_binary_kafka_header_prints_its_bytes_and_every_records_key(tmp_path, capsys):
    event = kafka_event(
        kafka_record("orders", 0, 7, {}, headers=[("Idempotency-Key", BINARY_KEY)]),
        kafka_record("orders", 0, 8, {}, headers=[("Idempotency-Key", b"k-1")]),
    )
    code, lines = key_lines(tmp_path, capsys, event, "--header", "Idempotency-Key")
    keys = consumer_keys(EventType.KAFKA, event, IdempotencyConfig(key_header="Idempotency-Key"))
    assert code == 0
    assert lines == [
        "record 0: selected bytes ff123456789abcdef0123456789abcde (not UTF-8)",
        f"  key {keys[0]}",
        'record 1: selected "k-1"',
        f"  key {keys[1]}",
    ]


def test_a_binary_header_inside_a_selection_is_shown_in_hexadecimal(tmp_path, capsys):
    event = kafka_event(kafka_record("orders", 0, 7, {}, headers=[("Idempotency-Key", BINARY_KEY)]))
    expression = "[header(@, 'Idempotency-Key'), topic]"
    code, lines = key_lines(tmp_path, capsys, event, "--jmespath", expression)
    assert code == 0
    assert lines[0] == 'record 0: selected ["<bytes ff123456789abcdef0123456789abcde>", "orders"]'


@pytest.mark.parametrize("event_type", [None, "sqs"])
def test_an_sqs_event_keys_each_record_by_its_message_id(tmp_path, capsys, event_type):
    event = sqs_event(sqs_record("m-1", {"order_id": "o-1"}))
    options = [] if event_type is None else ["--event-type", event_type]
    code, lines = key_lines(tmp_path, capsys, event, *options)
    assert (code, lines) == (0, ['record 0: selected "m-1"', f"  key {consumer_keys(EventType.SQS, event, None)[0]}"])
