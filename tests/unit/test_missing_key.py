"""A key selection that selects nothing fails its record by default: never run unguarded unless the user chose it.

The error (and, under ``raise_on_no_idempotency_key=False``, the warning) names the expression and the record by its
id, never its payload; where the selection went into a field holding JSON text it names the fix, which the tests
check selects the key.
"""

from __future__ import annotations

import base64
import gzip
import json
import logging
import subprocess
import sys
from dataclasses import dataclass

import pytest
from events import failures, kafka_event, kafka_failures, kafka_record, kinesis_record, sqs_event, sqs_record
from fakes import FakeContext

from consumer import (
    EventType,
    IdempotencyConfig,
    IdempotencyKeyError,
    idempotent,
    idempotent_function,
    make_key,
)
from consumer.keys import key_selection
from persistence import InMemoryPersistenceLayer

SECRET = "card-4111111111111111"  # in every payload here: never in an error or a log line
BODY_KEY = IdempotencyConfig(event_key_jmespath="body.order_id")  # the commonest mistake: an SQS body is JSON text
BODY_FIX = "body holds JSON text; select inside it with powertools_json(body).order_id"


def order(order_id: str) -> dict[str, str]:
    return {"order_id": order_id, "card": SECRET}


def test_in_a_batch_a_record_whose_selection_is_missing_is_reported_and_its_body_never_runs(face, caplog):
    # It used to run unguarded on every delivery, counted as success, with one generic warning per invocation.
    store, ran = InMemoryPersistenceLayer(), []
    processor = face.processor(EventType.SQS, store=store, config=BODY_KEY, raise_on_entire_batch_failure=False)
    event = sqs_event(sqs_record("m-1", order("o-1")), sqs_record("m-2", order("o-2")))
    with caplog.at_level(logging.WARNING, logger="idempotent_consumer"):
        for _ in range(2):  # every delivery alike
            assert failures(face.process(event, ran.append, processor)) == ["m-1", "m-2"]
    assert ran == []
    assert list(store.scan()) == []
    said = f"no idempotency key: 'body.order_id' selected nothing on SQS message m-1; {BODY_FIX}"
    assert [type(item.error) for item in processor.items] == [IdempotencyKeyError] * 2
    assert str(processor.items[0].error) == said
    assert (processor.summary.failed, processor.summary.unguarded) == (2, 0)
    assert f"record m-1 failed: IdempotencyKeyError: {said}" in caplog.text
    assert SECRET not in caplog.text


def test_a_kafka_value_is_json_text_once_decoded_and_the_fix_says_so(face):
    ran = []
    config = IdempotencyConfig(event_key_jmespath="value.order_id")
    processor = face.processor(
        EventType.KAFKA, store=InMemoryPersistenceLayer(), config=config, raise_on_entire_batch_failure=False
    )
    event = kafka_event(kafka_record("orders", 0, 5, order("o-1")), kafka_record("orders", 1, 7, order("o-2")))
    assert kafka_failures(face.process(event, ran.append, processor)) == [("orders-0", 5), ("orders-1", 7)]
    assert ran == []
    assert str(processor.items[0].error) == (
        "no idempotency key: 'value.order_id' selected nothing on Kafka record orders-0@5; value holds base64-encoded "
        "JSON text; select inside it with powertools_json(powertools_base64(value)).order_id"
    )


def test_without_raising_each_record_runs_unguarded_and_its_warning_carries_the_fix(face, caplog):
    ran = []
    config = IdempotencyConfig(event_key_jmespath="body.order_id", raise_on_no_idempotency_key=False)
    processor = face.processor(EventType.SQS, store=InMemoryPersistenceLayer(), config=config)
    event = sqs_event(sqs_record("m-1", order("o-1")))
    with caplog.at_level(logging.WARNING, logger="idempotent_consumer"):
        assert face.process(event, ran.append, processor) == {"batchItemFailures": []}
    assert len(ran) == 1
    assert processor.summary.unguarded == 1
    said = f"no idempotency key: 'body.order_id' selected nothing on SQS message m-1; {BODY_FIX}"
    assert f"record m-1 ran unguarded: {said}; a redelivery runs it again" in caplog.text
    assert SECRET not in caplog.text


def test_idempotent_raises_naming_the_event_and_the_fix_for_a_detail_sent_as_text(face):
    calls = []
    event = {"id": "e-1", "detail-type": "OrderPlaced", "source": "shop", "detail": json.dumps(order("o-1"))}

    def handler(event, context):
        calls.append(event["id"])

    config = IdempotencyConfig(event_key_jmespath="detail.order_id")
    decorated = idempotent(store=InMemoryPersistenceLayer(), config=config)(face.define(handler))
    with pytest.raises(IdempotencyKeyError) as raised:
        face.call(decorated, event, FakeContext())
    assert calls == []
    assert str(raised.value) == (
        "no idempotency key: 'detail.order_id' selected nothing on EventBridge event e-1; detail holds JSON text; "
        "select inside it with powertools_json(detail).order_id"
    )


def test_idempotent_function_raises_naming_the_stream_record_and_the_fix(face):
    calls = []
    config = IdempotencyConfig(event_key_jmespath="kinesis.data.order_id")

    def charge(record):
        calls.append(record)

    store = InMemoryPersistenceLayer()  # one function per face: the error's traceback keeps the other one alive
    decorated = idempotent_function(data_keyword_argument="record", store=store, config=config, name=face.name)(
        face.define(charge)
    )
    record = kinesis_record(1, "p", order("o-1"))
    with pytest.raises(IdempotencyKeyError) as raised:
        face.call(decorated, record=record)
    assert calls == []
    sequence = record["kinesis"]["sequenceNumber"]
    assert str(raised.value) == (
        f"no idempotency key: 'kinesis.data.order_id' selected nothing on Kinesis record {sequence}; kinesis.data "
        "holds base64-encoded JSON text; select inside it with powertools_json(powertools_base64(kinesis.data))"
        ".order_id"
    )


def test_an_idempotent_function_record_handler_in_a_batch_reports_the_record(face):
    # The record-handler pattern: a processor without a store, the handler guarded by its own decorator.
    calls = []

    def record_handler(record):
        calls.append(record.message_id)

    store = InMemoryPersistenceLayer()
    guarded = idempotent_function(data_keyword_argument="record", store=store, config=BODY_KEY, name=f"h-{face.name}")
    processor = face.processor(EventType.SQS, raise_on_entire_batch_failure=False)
    event = sqs_event(sqs_record("m-1", order("o-1")))
    assert failures(face.process(event, guarded(face.define(record_handler)), processor)) == ["m-1"]
    assert calls == []
    assert str(processor.items[0].error).endswith(BODY_FIX)


@dataclass
class Order:
    customer: str


def gzipped(value: object) -> str:
    return base64.b64encode(gzip.compress(json.dumps(value).encode())).decode()


SQS = sqs_record("m-1", {"order_id": "o-1", "items": [{"sku": "s-1"}], "inner": json.dumps({"id": 7})})


@pytest.mark.parametrize(
    ("data", "expression", "said", "fixed"),
    [
        (SQS, "[body.order_id, body.customer]",
         "on SQS message m-1; body holds JSON text; select inside it with powertools_json(body).order_id", "o-1"),
        (SQS, "body.items[0].sku",
         "on SQS message m-1; body holds JSON text; select inside it with powertools_json(body).items[0].sku", "s-1"),
        (SQS, "powertools_json(body).inner.id",
         ("on SQS message m-1; powertools_json(body).inner holds JSON text; select inside it with "
          "powertools_json(powertools_json(body).inner).id"), 7),
        ({"id": "e-1", "detail-type": "x", "order-detail": json.dumps({"id": 3})}, '"order-detail".id',
         ('on EventBridge event e-1; "order-detail" holds JSON text; select inside it with '
          'powertools_json("order-detail").id'), 3),
        ({"data": gzipped({"id": 5})}, "data.id",
         ("; data holds base64-encoded gzip JSON text; select inside it with "
          "powertools_json(powertools_base64_gzip(data)).id"), 5),
        # The fix names the function where the rest of the expression cannot be written back (a projection).
        (SQS, "body.items[*].sku",
         "on SQS message m-1; body holds JSON text; select inside it with powertools_json(body)", None),
    ],
    ids=["multi-select", "index", "json-in-json", "quoted-field", "gzip", "projection"],
)  # fmt: skip
def test_the_fix_named_selects_the_key(data, expression, said, fixed):
    with pytest.raises(IdempotencyKeyError) as raised:
        make_key(data, IdempotencyConfig(event_key_jmespath=expression))
    message = str(raised.value)
    assert message.startswith(f"no idempotency key: {expression!r} selected nothing")
    assert message.endswith(said)
    suggested = message.rpartition(" select inside it with ")[2]
    selection, _ = key_selection(data, IdempotencyConfig(event_key_jmespath=suggested))
    if fixed is not None:
        assert selection == fixed or selection[0] == fixed
    assert SECRET not in message


@pytest.mark.parametrize(
    ("data", "expression", "said"),
    [
        (sqs_record("m-1", "plain text, not JSON", raw_body=True), "body.order_id", "on SQS message m-1"),
        (sqs_record("m-1", {"id": 1}), "powertools_json(body).order_id", "on SQS message m-1"),  # JSON: absent there
        (Order("c-1"), "order_id", "'order_id' selected nothing"),  # a function's argument: no id to name
        (json.dumps(order("o-1")), "order_id",
         "'order_id' selected nothing; @ holds JSON text; select inside it with powertools_json(@).order_id"),
        ({"dynamodb": {"SequenceNumber": "100"}, "eventID": "e"}, "dynamodb.NewImage.id", "on DynamoDB record 100"),
    ],
    ids=["text-body", "absent-in-json", "argument", "argument-as-json-text", "dynamodb"],
)  # fmt: skip
def test_the_record_is_named_by_its_id_and_no_fix_is_named_where_none_is_known(data, expression, said):
    with pytest.raises(IdempotencyKeyError) as raised:
        make_key(data, IdempotencyConfig(event_key_jmespath=expression))
    assert str(raised.value).endswith(said)


def test_keying_records_that_have_keys_never_loads_what_a_missing_key_says():
    # The message (and its JSON-text check) is built on the failure path only: no cost to a record that has its key.
    code = (
        "import sys, json\n"
        "from consumer import BatchProcessor, EventType, IdempotencyConfig, IdempotencyGuard\n"
        "from persistence import InMemoryPersistenceLayer\n"
        "config = IdempotencyConfig(event_key_jmespath='powertools_json(body).order_id')\n"
        "records = [{'messageId': f'm-{i}', 'body': json.dumps({'order_id': i})} for i in range(3)]\n"
        "BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer(), config=config).process("
        "{'Records': records}, lambda r: None)\n"
        "with IdempotencyGuard(records[0], store=InMemoryPersistenceLayer(), config=config): pass\n"
        "print('consumer.sources._missing_key' in sys.modules)\n"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert shown.strip() == "False"
