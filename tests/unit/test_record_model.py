"""``BatchProcessor(event_type, model=...)``: the handler gets each record parsed into a Pydantic model.

The key is still selected from the record as delivered; a record that does not fit fails alone, its lock released,
with an error naming the record and its fields and quoting none of its values; one that completed replays without
being parsed. Powertools' own parser models work as any model does (a subprocess imports them from bench/.venv).
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pydantic
import pytest
from events import failures, kafka_event, kafka_failures, kafka_record, sqs_event, sqs_record

from consumer import (
    AsyncBatchProcessor,
    BatchProcessor,
    EventType,
    IdempotencyConfig,
    RecordModelError,
    make_key,
    process_partial_response,
)
from persistence import InMemoryPersistenceLayer

ROOT = Path(__file__).resolve().parents[2]
BENCH_SITE = next((ROOT / "bench" / ".venv" / "lib").glob("python3*/site-packages"), None)
SECRET = "card-4111-1111"  # a value of the record that no message or log line may quote


class Order(pydantic.BaseModel):
    id: str
    amount: int


class OrderMessage(pydantic.BaseModel):
    """An SQS record whose body is an order (as Powertools' ``SqsRecordModel`` subclassed with ``Json[Order]``)."""

    messageId: str  # noqa: N815 - the event's field name
    body: pydantic.Json[Order]


def test_the_handler_gets_the_model_and_the_key_is_the_records_own():
    store, seen = InMemoryPersistenceLayer(), []
    modelled = BatchProcessor(EventType.SQS, store=store, model=OrderMessage)
    event = sqs_event(sqs_record("m-1", {"id": "o-1", "amount": 30}))

    def handler(message: OrderMessage) -> int:
        seen.append(message)
        return message.body.amount

    assert process_partial_response(event, handler, modelled) == {"batchItemFailures": []}
    assert [(m.messageId, m.body) for m in seen] == [("m-1", Order(id="o-1", amount=30))]
    plain = BatchProcessor(EventType.SQS, store=store)  # the same record, unparsed: the same key, so it replays
    process_partial_response(event, lambda record: pytest.fail("ran twice"), plain)
    assert plain.summary.replayed == 1
    assert plain.items[0].key == modelled.items[0].key
    assert plain.items[0].result == 30


def test_a_record_that_does_not_fit_fails_alone_naming_its_fields_and_quoting_no_value(caplog):
    store, ran = InMemoryPersistenceLayer(), []
    processor = BatchProcessor(EventType.SQS, store=store, model=OrderMessage)
    event = sqs_event(
        sqs_record("m-1", {"id": "o-1", "amount": 30}),
        sqs_record("m-2", {"id": "o-2", "amount": SECRET}),
        sqs_record("m-3", {"id": "o-3", "amount": 7}),
    )
    with caplog.at_level(logging.DEBUG, logger="idempotent_consumer"):
        response = process_partial_response(event, lambda m: ran.append(m.messageId), processor)
    assert failures(response) == ["m-2"]
    assert ran == ["m-1", "m-3"]
    error = processor.items[1].error
    assert isinstance(error, RecordModelError)
    assert isinstance(error, ValueError)
    assert error.item_identifier == "m-2"
    assert error.model is OrderMessage
    assert error.errors == [(("body", "amount"), "int_parsing")]
    assert str(error) == "record m-2 does not fit OrderMessage (1 errors: body.amount: int_parsing)"
    assert error.__cause__ is None
    assert error.__suppress_context__
    assert SECRET not in caplog.text  # the failed record's log line and traceback included
    assert "m-2" in caplog.text
    assert store.get(processor.items[1].key) is None  # its lock released: a redelivery runs it again


def test_a_record_that_completed_replays_without_being_parsed_again():
    store = InMemoryPersistenceLayer()
    event = sqs_event(sqs_record("m-1", {"id": "o-1", "amount": 30}))
    process_partial_response(event, lambda record: "charged", BatchProcessor(EventType.SQS, store=store))

    class Stricter(pydantic.BaseModel):  # a later deployment's model the stored record would not fit
        messageId: int  # noqa: N815 - the event's field name

    processor = BatchProcessor(EventType.SQS, store=store, model=Stricter)
    assert process_partial_response(event, lambda m: pytest.fail("ran twice"), processor) == {"batchItemFailures": []}
    assert (processor.summary.replayed, processor.items[0].result) == (1, "charged")


def test_the_async_processor_parses_too():
    processor = AsyncBatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer(), model=OrderMessage)

    async def handler(message: OrderMessage) -> int:
        await asyncio.sleep(0)
        return message.body.amount

    event = sqs_event(sqs_record("m-1", {"id": "o-1", "amount": 30}), sqs_record("m-2", {"id": "o-2"}))

    async def main():
        return await processor.process(event, handler)

    assert failures(asyncio.run(main())) == ["m-2"]
    assert processor.items[1].error.errors == [(("body", "amount"), "missing")]


def test_a_kafka_record_is_parsed_as_its_event_carries_it():
    """A model that forbids unknown fields sees no ``eventSource`` or cluster: those are added for the key only."""

    class Strict(pydantic.BaseModel, extra="forbid"):
        topic: str
        partition: int
        offset: int
        timestamp: int
        timestampType: str  # noqa: N815 - the event's field name
        value: str
        headers: list[dict[str, list[int]]]

    seen = []
    processor = BatchProcessor(EventType.KAFKA, store=InMemoryPersistenceLayer(), model=Strict)
    event = kafka_event(kafka_record("orders", 0, 5, {"id": 1}), kafka_record("orders", 0, 6, {"id": 2}))
    event["records"]["orders-0"][1]["timestampType"] = 6  # our parser does not read it; the model refuses it
    assert kafka_failures(process_partial_response(event, lambda r: seen.append(r.offset), processor)) == [
        ("orders-0", 6)
    ]
    assert seen == [5]


def test_a_model_must_be_a_pydantic_model_class():
    with pytest.raises(TypeError, match="Pydantic model class"):
        BatchProcessor(EventType.SQS, model=dict)
    with pytest.raises(TypeError, match="Pydantic model class"):
        AsyncBatchProcessor(EventType.SQS, model=OrderMessage(messageId="m", body=json.dumps({"id": "o", "amount": 1})))


POWERTOOLS_MODELS = textwrap.dedent(
    """\
    import base64, json, sys
    sys.path.append(sys.argv[1])  # Powertools from bench/.venv; Pydantic is this environment's own
    from aws_lambda_powertools.utilities.parser.models import KinesisDataStreamRecord, SqsRecordModel
    from consumer import BatchProcessor, EventType, process_partial_response
    from persistence import InMemoryPersistenceLayer

    sqs = {"messageId": "m-1", "receiptHandle": "h", "body": "hello", "md5OfBody": "0" * 32,
           "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000000", "SenderId": "s",
                          "ApproximateFirstReceiveTimestamp": "1700000000000"},
           "messageAttributes": {}, "eventSource": "aws:sqs", "awsRegion": "eu-west-1",
           "eventSourceARN": "arn:aws:sqs:eu-west-1:123456789012:orders"}
    broken = {**sqs, "messageId": "m-2", "attributes": {}}
    bodies = []
    processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer(), model=SqsRecordModel)
    response = process_partial_response({"Records": [sqs, broken]}, lambda r: bodies.append(r.body), processor)
    kinesis = {"kinesis": {"kinesisSchemaVersion": "1.0", "partitionKey": "k", "sequenceNumber": "49590",
                           "data": base64.b64encode(b'{"n": 1}').decode(), "approximateArrivalTimestamp": 1.0},
               "eventSource": "aws:kinesis", "eventVersion": "1.0", "eventID": "shardId-0:49590",
               "eventName": "aws:kinesis:record", "invokeIdentityArn": "arn:aws:iam::123456789012:role/r",
               "awsRegion": "eu-west-1", "eventSourceARN": "arn:aws:kinesis:eu-west-1:123456789012:stream/s"}
    streams = BatchProcessor(EventType.KinesisDataStreams, store=InMemoryPersistenceLayer(),
                             model=KinesisDataStreamRecord)
    data = []
    process_partial_response({"Records": [kinesis]}, lambda r: data.append(r.kinesis.data.decode()), streams)
    print(json.dumps({"response": response, "bodies": bodies, "error": str(processor.items[1].error),
                      "data": data}))
    """
)


@pytest.mark.skipif(BENCH_SITE is None, reason="bench/.venv (with aws-lambda-powertools) is missing")
def test_powertools_parser_models_parse_the_records(tmp_path):
    script = tmp_path / "models.py"
    script.write_text(POWERTOOLS_MODELS)
    done = subprocess.run(
        [sys.executable, str(script), str(BENCH_SITE)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["response"] == {"batchItemFailures": [{"itemIdentifier": "m-2"}]}
    assert report["bodies"] == ["hello"]
    assert report["error"].startswith("record m-2 does not fit SqsRecordModel (")
    assert "attributes.ApproximateReceiveCount: missing" in report["error"]
    assert report["data"] == ['{"n": 1}']


def test_an_sqs_processor_meeting_a_fifo_queue_keeps_its_model_config_and_stop_on_first_failure():
    # BatchProcessor(EventType.SQS) finds the queue is FIFO (its ARN) and runs the batch as one, with its settings.
    config = IdempotencyConfig(event_key_jmespath="powertools_json(body).id")
    processor = BatchProcessor(
        EventType.SQS, store=InMemoryPersistenceLayer(), config=config, model=OrderMessage, skip_group_on_error=True,
        stop_on_first_failure=True, raise_on_entire_batch_failure=False,
    )  # fmt: skip
    seen = []

    def handler(order):
        seen.append(order.body.id)
        raise ValueError("declined")

    first, second = {"id": "o-1", "amount": 1}, {"id": "o-2", "amount": 2}
    event = sqs_event(sqs_record("m-1", first, group="a"), sqs_record("m-2", second, group="b"))
    response = process_partial_response(event, handler, processor)
    assert processor.summary.event_type == "sqs_fifo"
    assert seen == ["o-1"]  # parsed into the model; the other group is not started after the failure
    assert failures(response) == ["m-1", "m-2"]
    assert processor.items[0].key == make_key(event["Records"][0], config)
