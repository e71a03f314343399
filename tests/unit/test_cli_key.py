"""``idempotent-consumer key``: each record's key as a consumer gives it, and what that key hashes, in words."""

from __future__ import annotations

import hashlib
import json
import uuid

import pytest
from events import kafka_event, kafka_record, sqs_event, sqs_record

from consumer import BatchProcessor, EventType, IdempotencyConfig
from consumer.cli import main
from persistence import InMemoryPersistenceLayer

BODY_ID = "powertools_json(body).order_id"
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
    assert lines[0] == 'record 0: selected [{"__ic__":"bytes","v":"ff123456789abcdef0123456789abcde"},"orders"]'


@pytest.mark.parametrize("event_type", [None, "sqs"])
def test_an_sqs_event_keys_each_record_by_its_message_id(tmp_path, capsys, event_type):
    event = sqs_event(sqs_record("m-1", {"order_id": "o-1"}))
    options = [] if event_type is None else ["--event-type", event_type]
    code, lines = key_lines(tmp_path, capsys, event, *options)
    assert (code, lines) == (0, ['record 0: selected "m-1"', f"  key {consumer_keys(EventType.SQS, event, None)[0]}"])


def hashes_to(selected: str, key_line: str) -> bool:
    """Whether the JSON a ``selected`` line shows is, byte for byte, what the key on the next line hashes."""
    digest = key_line.removeprefix("  key ").partition("#")[2]
    return hashlib.new(IdempotencyConfig().hash_function, selected.encode()).hexdigest() == digest


@pytest.mark.parametrize(
    ("options", "config", "selected"),
    [
        ([], None, 'record 0: selected "m-1"'),
        (["--jmespath", BODY_ID], IdempotencyConfig(event_key_jmespath=BODY_ID), 'record 0: selected "o-1"'),
        (["--jmespath", ""], IdempotencyConfig(event_key_jmespath=""), "record 0: selected {"),  # the whole record
        (["--header", "Idempotency-Key", "--no-raise-on-no-idempotency-key"],
         IdempotencyConfig(key_header="Idempotency-Key", raise_on_no_idempotency_key=False),
         "record 0: no header 'Idempotency-Key': its own id selected {\"__ic__\":\"own-id\",\"v\":\"m-1\"}"),
    ],
    ids=["default", "expression", "whole-record", "header-absent"],
)  # fmt: skip
def test_what_is_shown_as_selected_is_what_the_key_hashes(tmp_path, capsys, options, config, selected):
    event = {"Records": [{"messageId": "m-1", "body": '{"order_id": "o-1"}', "eventSource": "aws:sqs"}]}
    code, (shown, key_line) = key_lines(tmp_path, capsys, event, *options)
    assert code == 0
    assert shown.startswith(selected)
    assert hashes_to(shown.partition(" selected ")[2], key_line)
    assert key_line == f"  key {consumer_keys(EventType.SQS, event, config)[0]}"


@pytest.mark.parametrize(
    ("event", "said"),
    [
        ({"Records": "abc"}, "the event's 'Records' is a JSON string: a list of records is expected"),
        ({"Records": {}}, "the event's 'Records' is a JSON object: a list of records is expected"),
        ({"Records": []}, "the event has no records of its own for --event-type sqs (a 'Records' list of them)"),
        ([1, 2], "the event is a JSON array: an event is an object"),
    ],
)
def test_an_event_of_the_wrong_shape_is_one_line_naming_what_is_wrong(tmp_path, capsys, event, said):
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))
    assert main(["key", "--event", str(path)]) == 1
    assert capsys.readouterr().err == f"idempotent-consumer: {said}\n"


def test_a_record_that_is_not_an_object_is_one_line_and_the_others_are_keyed(tmp_path, capsys):
    code, lines = key_lines(tmp_path, capsys, {"Records": [1, {"messageId": "m-1"}]})
    assert code == 1  # that record gets no key
    assert lines[:2] == [
        "record 0: not a record: a JSON number, where an object is expected",
        'record 1: selected "m-1"',
    ]


@pytest.mark.parametrize("source", ["kinesis", "dynamodb"])
def test_a_header_on_a_source_without_headers_is_refused_as_the_processor_refuses_it(tmp_path, capsys, source):
    # It used to show each record keyed by its own id, vouching for a config the processor refuses at start.
    record = {"eventSource": f"aws:{source}", "eventID": "shardId-0:1", "kinesis": {"data": "e30="}}
    path = tmp_path / "event.json"
    path.write_text(json.dumps({"Records": [record]}))
    assert main(["key", "--event", str(path), "--header", "Idempotency-Key"]) == 2
    said = f"key_header: {source} records carry no headers; select the key with event_key_jmespath"
    assert capsys.readouterr().err == f"idempotent-consumer: {said}\n"
    with pytest.raises(ValueError, match=said):
        BatchProcessor(EventType(source), config=IdempotencyConfig(key_header="Idempotency-Key"))


def test_bytes_inside_a_selection_never_show_as_a_text_does(tmp_path, capsys):
    # A String attribute holding the text the bytes were shown as ("<bytes ff01>") hashes to another key: the two
    # lines must differ as the keys do. What is shown is what is hashed.
    binary = sqs_record("m-1", {})
    binary["messageAttributes"] = {"Idem": {"dataType": "Binary", "binaryValue": "/wE="}}
    text = sqs_record("m-2", {})
    text["messageAttributes"] = {"Idem": {"dataType": "String", "stringValue": "<bytes ff01>"}}
    code, lines = key_lines(tmp_path, capsys, sqs_event(binary, text), "--jmespath", "[header(@, 'Idem')]")
    assert code == 0
    assert lines[0] == 'record 0: selected [{"__ic__":"bytes","v":"ff01"}]'
    assert lines[2] == 'record 1: selected ["<bytes ff01>"]'
    assert lines[1] != lines[3]


def test_a_missing_selection_exits_1_naming_the_record_and_the_fix_as_the_processor_fails_it(tmp_path, capsys):
    # body is JSON text: body.order_id selects nothing. The command used to print "no key" and exit 0.
    event = sqs_event(sqs_record("m-1", {"order_id": "o-1"}), sqs_record("m-2", {"order_id": "o-2"}))
    code, lines = key_lines(tmp_path, capsys, event, "--jmespath", "body.order_id")
    processor = BatchProcessor(
        EventType.SQS,
        store=InMemoryPersistenceLayer(),
        config=IdempotencyConfig(event_key_jmespath="body.order_id"),
        raise_on_entire_batch_failure=False,
    )
    ran = []
    processor.process(event, ran.append)
    assert code == 1
    assert ran == []
    assert lines == [f"record {index}: {item.error}" for index, item in enumerate(processor.items)]
    assert lines[0] == (
        "record 0: no idempotency key: 'body.order_id' selected nothing on SQS message m-1; body holds JSON text; "
        "select inside it with powertools_json(body).order_id"
    )


def test_without_raising_a_missing_selection_says_it_would_run_unguarded_with_the_same_words(tmp_path, capsys):
    event = sqs_event(sqs_record("m-1", {"order_id": "o-1"}))
    code, lines = key_lines(tmp_path, capsys, event, "--jmespath", "body.order_id", "--no-raise-on-no-idempotency-key")
    assert code == 0  # what the consumer does, as configured: the record runs (unguarded)
    assert lines == [
        "record 0: selected null",
        (
            "  would run unguarded: no idempotency key: 'body.order_id' selected nothing on SQS message m-1; body "
            "holds JSON text; select inside it with powertools_json(body).order_id"
        ),
    ]
