"""Records, errors and messages shaped as Powertools' are, so that code written for it reads and catches them.

A record handler written for Powertools reads its record as the raw event (``record["body"]``), a Kafka record's
``value`` as base64 text, and catches ``UnexpectedBatchTypeError`` or ``RuntimeError`` where Powertools raises them.
"""

from __future__ import annotations

import base64
import copy
import json

import pytest
from events import ddb_record, kafka_event, kafka_record, kinesis_record, sqs_event, sqs_record

from consumer import (
    BatchEventError,
    BatchProcessingError,
    BatchProcessor,
    DataArgumentError,
    EventType,
    IdempotencyConfig,
    IdempotencyError,
    IdempotencyModelTypeError,
    IdempotencyNoSerializationModelError,
    UnexpectedBatchTypeError,
    idempotent_function,
    make_key,
    process_partial_response,
)
from consumer.serialization import DataclassSerializer, PydanticSerializer
from persistence import DynamoDBPersistenceLayer, InMemoryPersistenceLayer

# -- records read as their raw event ------------------------------------------------------------------------------

BATCHES = {
    EventType.SQS: sqs_event(sqs_record("m-1", {"order": 1})),
    EventType.KINESIS: {"Records": [kinesis_record(1, "user-1", {"click": 1})]},
    EventType.DYNAMODB_STREAMS: {"Records": [ddb_record(1, "acct-1", {"pk": {"S": "acct-1"}})]},
    EventType.KAFKA: kafka_event(kafka_record("orders", 0, 7, {"order": 1}, key=b"k")),
}
#: What the event carries for each source's one record (a Kafka record without its event's fields).
DELIVERED = {
    EventType.SQS: BATCHES[EventType.SQS]["Records"][0],
    EventType.KINESIS: BATCHES[EventType.KINESIS]["Records"][0],
    EventType.DYNAMODB_STREAMS: BATCHES[EventType.DYNAMODB_STREAMS]["Records"][0],
    EventType.KAFKA: BATCHES[EventType.KAFKA]["records"]["orders-0"][0],
}


def handed(event_type, face=None):
    """The typed record a processor hands its handler for the source's one-record batch."""
    seen = []
    event = copy.deepcopy(BATCHES[event_type])
    if face is None:
        process_partial_response(event, seen.append, BatchProcessor(event_type, store=InMemoryPersistenceLayer()))
    else:
        face.process(event, seen.append, face.processor(event_type, store=InMemoryPersistenceLayer()))
    return seen[0]


@pytest.mark.parametrize("event_type", list(BATCHES), ids=lambda t: t.value)
def test_every_typed_record_reads_as_its_raw_event_as_powertools_records_do(face, event_type):
    record, delivered = handed(event_type, face), DELIVERED[event_type]
    first = next(iter(delivered))
    assert record[first] == delivered[first]
    assert record.get(first) == delivered[first]
    assert record.get("no-such-field") is None
    assert record.get("no-such-field", "default") == "default"
    assert first in record
    assert "no-such-field" not in record
    with pytest.raises(KeyError):
        _ = record["no-such-field"]
    assert list(record) == list(delivered)
    assert len(record) == len(delivered)
    assert dict(record.raw_event) == delivered
    assert dict(record.items()) == delivered
    assert list(record.values()) == list(delivered.values())


def test_typed_attributes_stay_as_they_were_beside_the_raw_reads():
    sqs, kinesis, stream = handed(EventType.SQS), handed(EventType.KINESIS), handed(EventType.DYNAMODB_STREAMS)
    assert (sqs["body"], sqs.body, sqs.json_body, sqs.message_id) == (
        '{"order": 1}',
        '{"order": 1}',
        {"order": 1},
        "m-1",
    )
    assert list(sqs.keys()) == list(DELIVERED[EventType.SQS])
    assert kinesis.json_data == {"click": 1}
    assert kinesis["kinesis"]["data"] == kinesis.kinesis.data == kinesis.kinesis["data"]
    assert kinesis.kinesis.data_as_json() == {"click": 1}
    # DynamoDBStreamRecord.keys is the item's keys, as before; the raw event's names are record.raw.keys().
    assert stream.keys == {"pk": "acct-1"} == stream.dynamodb.keys
    assert stream["dynamodb"]["NewImage"] == {"pk": {"S": "acct-1"}} == stream.dynamodb["NewImage"]
    assert stream.new_image == {"pk": "acct-1"}


def test_a_kafka_record_reads_as_its_event_carries_it_while_its_key_still_names_the_cluster():
    record = handed(EventType.KAFKA)
    assert record.raw["eventSourceArn"]  # ours: the default key names the cluster
    for added in ("eventSource", "eventSourceArn", "bootstrapServers"):
        assert added not in record
        assert record.get(added) is None
        with pytest.raises(KeyError):
            _ = record[added]
    assert record.raw_event == DELIVERED[EventType.KAFKA]
    other_cluster = copy.deepcopy(BATCHES[EventType.KAFKA])
    other_cluster["eventSourceArn"] += "-other"
    seen = []
    process_partial_response(other_cluster, seen.append, BatchProcessor(EventType.KAFKA))
    assert seen[0].raw_event == record.raw_event
    assert make_key(seen[0], IdempotencyConfig()) != make_key(record, IdempotencyConfig())


def test_key_selection_reads_the_raw_record_not_the_view():
    # The view leaves out what our parser added to a Kafka record; a key expression still selects it.
    record = handed(EventType.KAFKA)
    config = IdempotencyConfig(event_key_jmespath="[eventSourceArn, offset]")
    assert make_key(record, config) == make_key(record.raw, config)
    assert make_key(record, config) != make_key(dict(record.raw_event), config)
    keys = []

    @idempotent_function(data_keyword_argument="record", store=InMemoryPersistenceLayer(), config=config)
    def handler(record):
        keys.append(record["offset"])

    assert process_partial_response(copy.deepcopy(BATCHES[EventType.KAFKA]), handler, BatchProcessor(EventType.KAFKA))
    assert keys == [7]


# -- Kafka records named as Powertools names them -----------------------------------------------------------------


def test_kafka_value_key_and_headers_are_the_events_and_decoded_ones_are_decoded(face):
    raw = kafka_record("orders", 0, 3, {"order": 9}, key=b"customer-1", headers=[("trace", b"t-1"), ("TRACE", b"t-2")])
    seen = []
    face.process(kafka_event(raw), seen.append, face.processor(EventType.KAFKA, store=InMemoryPersistenceLayer()))
    record = seen[0]
    assert (record.value, record.key, record.headers) == (raw["value"], raw["key"], raw["headers"])
    assert json.loads(base64.b64decode(record.value)) == {"order": 9}  # Powertools' documented handler code
    assert (record.decoded_value, record.decoded_key) == (b'{"order": 9}', b"customer-1")
    assert record.decoded_headers["trace"] == b"t-2"  # a repeated name: its last value, any case
    assert record.decoded_headers.get_all("Trace") == [b"t-1", b"t-2"]
    assert (record.json_value, record.text) == ({"order": 9}, '{"order": 9}')


def test_a_kafka_record_without_a_key_or_a_value_has_none_of_either_form():
    raw = {**kafka_record("orders", 0, 3), "value": None}
    seen = []
    process_partial_response(kafka_event(raw), seen.append, BatchProcessor(EventType.KAFKA))
    record = seen[0]
    assert (record.key, record.decoded_key, record.value, record.decoded_value) == (None, None, None, None)


# -- UnexpectedBatchTypeError -------------------------------------------------------------------------------------


def test_unexpected_batch_type_error_is_a_batch_processing_error_as_in_powertools():
    assert issubclass(UnexpectedBatchTypeError, BatchProcessingError)
    assert issubclass(UnexpectedBatchTypeError, IdempotencyError)
    assert issubclass(UnexpectedBatchTypeError, ValueError)
    assert BatchEventError is UnexpectedBatchTypeError


UNUSABLE = [
    (EventType.SQS, {"detail": {}}, "Unexpected batch event type"),
    (EventType.SQS, {"Records": []}, "Unexpected batch event type"),
    (EventType.KINESIS, {"Records": []}, "Unexpected batch event type"),
    (EventType.DYNAMODB_STREAMS, {"Records": []}, "Unexpected batch event type"),
    (EventType.KAFKA, {"eventSource": "aws:kafka", "records": {}}, "Invalid Kafka event structure"),
    (EventType.KAFKA, {"eventSource": "aws:kafka", "records": {"orders-0": []}}, "Invalid Kafka event structure"),
    (EventType.KAFKA, {"eventSource": "aws:kafka"}, "Invalid Kafka event structure"),
    (EventType.SQS, {"Records": [{"body": "{}"}]}, "record 0 of the batch is not a sqs record"),
]


@pytest.mark.parametrize(("event_type", "event", "words"), UNUSABLE)
def test_an_event_without_usable_records_raises_unexpected_batch_type_error(face, event_type, event, words):
    runs = []
    with pytest.raises(BatchProcessingError, match=words) as caught:
        face.process(event, runs.append, face.processor(event_type, store=InMemoryPersistenceLayer()))
    assert type(caught.value) is UnexpectedBatchTypeError
    assert (caught.value.errors, caught.value.response) == ([], None)  # nothing to return: the batch comes back
    assert runs == []


# -- positional data and Powertools' words ------------------------------------------------------------------------


def test_positional_data_raises_what_powertools_raises_and_runs_nothing(face):
    calls = []

    def charge(order):
        calls.append(order)

    decorated = idempotent_function(data_keyword_argument="order", store=InMemoryPersistenceLayer())(
        face.define(charge)
    )
    for expected in (RuntimeError, TypeError, DataArgumentError, IdempotencyError):
        with pytest.raises(expected, match=r"^Unable to extract 'order' from keyword arguments: .*charge"):
            face.call(decorated, {"id": 1})
    assert calls == []


def test_errors_users_match_on_start_with_powertools_words():
    with pytest.raises(BatchProcessingError, match=r"^All records failed processing\. "):
        process_partial_response(sqs_event(sqs_record("m-1", 1)), fail, BatchProcessor(EventType.SQS))
    with pytest.raises(IdempotencyModelTypeError, match=r"^Model type is not inherited from pydantic BaseModel"):
        PydanticSerializer(dict)
    with pytest.raises(IdempotencyModelTypeError, match=r"^Model type is not inherited of dataclass type"):
        DataclassSerializer(dict)
    with pytest.raises(IdempotencyNoSerializationModelError, match=r"^No serialization model was supplied"):

        @idempotent_function(
            data_keyword_argument="order", store=InMemoryPersistenceLayer(), output_serializer=PydanticSerializer
        )
        def unannotated(order):
            return order

    with pytest.raises(ValueError, match=r"^key_attr \[id\] and sort_key_attr \[id\] cannot be the same!$"):
        DynamoDBPersistenceLayer(table_name="t", key_attr="id", sort_key_attr="id")


def fail(record):
    raise ValueError(record["messageId"])
