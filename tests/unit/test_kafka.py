"""Kafka batches (Amazon MSK and self-managed Apache Kafka) in the shapes Lambda delivers, through both faces:
records typed and decoded, failures named by topic-partition and offset, the partition as ordering key, bad
input refused as a whole; and producer-set keys read by header from Kafka, SQS and EventBridge records alike."""

from __future__ import annotations

import base64
import threading

import pytest
from events import MSK_ARN, kafka_event, kafka_failures, kafka_record, sqs_event, sqs_record
from fakes import FakeContext

from consumer import (
    BatchEventError,
    BatchProcessor,
    EventType,
    IdempotencyConfig,
    IdempotencyConfigError,
    IdempotencyGuard,
    IdempotencyKeyError,
    KafkaHeaders,
    KafkaRecord,
    Outcome,
    make_key,
)
from consumer._serde import OwnIdKey
from consumer.keys import key_selection
from consumer.sources import kafka_records
from persistence import InMemoryPersistenceLayer


def mixed_batch():
    """Two topics, three partitions; null keys, a binary value, a repeated header name."""
    return [
        kafka_record("orders", 0, 10, {"order": 1}, key=b"customer-1", headers=[("Idempotency-Key", b"k1")]),
        kafka_record("orders", 1, 7, b"\x00\xff\xfe binary", headers=[("trace", b"a"), ("TRACE", b"b")]),
        kafka_record("orders", 0, 11, {"order": 2}),
        kafka_record("payments", 0, 3, {"payment": 9}, key=b"\x01\x02"),
        kafka_record("orders", 1, 8, {"order": 3}),
    ]


@pytest.mark.parametrize("self_managed", [False, True], ids=["msk", "self-managed"])
def test_records_are_flattened_in_partition_order_and_decoded(face, self_managed):
    seen = []
    processor = face.processor(EventType.KAFKA, store=InMemoryPersistenceLayer())
    response = face.process(kafka_event(*mixed_batch(), self_managed=self_managed), seen.append, processor)
    assert response == {"batchItemFailures": []}
    assert [(r.topic, r.partition, r.offset) for r in seen] == [
        ("orders", 0, 10), ("orders", 0, 11), ("orders", 1, 7), ("orders", 1, 8), ("payments", 0, 3),
    ]  # fmt: skip
    first, binary = seen[0], seen[2]
    assert isinstance(first, KafkaRecord)
    assert (first.decoded_key, first.json_value, first.decoded_headers["idempotency-key"]) == (
        b"customer-1",
        {"order": 1},
        b"k1",
    )
    assert (first.timestamp, first.timestamp_type, first.topic_partition) == (1700000000010, "CREATE_TIME", "orders-0")
    assert binary.decoded_key is None
    assert binary.decoded_value == b"\x00\xff\xfe binary"
    assert binary.decoded_headers["trace"] == b"b"  # a repeated name: the last value
    assert binary.decoded_headers.get_all("Trace") == [b"a", b"b"]
    assert list(binary.decoded_headers) == ["trace"]
    assert len(binary.decoded_headers) == 1
    assert seen[4].decoded_key == b"\x01\x02"
    assert processor.summary.processed == 5


def test_headers_decode_signed_bytes_and_are_case_insensitive():
    headers = KafkaHeaders.from_raw([{"Content-Type": [-1, 65]}, {"x": []}])
    assert headers["content-type"] == b"\xffA"
    assert "CONTENT-TYPE" in headers
    assert "missing" not in headers
    assert headers.get("missing") is None
    assert headers["x"] == b""
    with pytest.raises(ValueError, match="byte integers"):
        KafkaHeaders.from_raw([{"bad": [300]}])


def test_a_failure_is_named_by_topic_partition_and_offset_exactly():
    def handler(record):
        if record.offset == 7:
            raise ValueError("poison")

    processor = BatchProcessor(EventType.KAFKA, store=InMemoryPersistenceLayer())
    response = processor.process(kafka_event(*mixed_batch()), handler)
    # The rest of partition orders-1 fails after it (offset 8); the other partitions are done.
    assert response == {
        "batchItemFailures": [
            {"itemIdentifier": {"partition": "orders-1", "offset": 7}},
            {"itemIdentifier": {"partition": "orders-1", "offset": 8}},
        ]
    }
    outcomes = {i.item_id: i.outcome for i in processor.items}
    assert outcomes["orders-1@7"] is Outcome.FAILED
    assert outcomes["orders-1@8"] is Outcome.SKIPPED
    assert outcomes["orders-0@11"] is Outcome.PROCESSED
    assert outcomes["payments-0@3"] is Outcome.PROCESSED


def test_stop_on_first_failure_fails_every_record_after_it(face):
    def handler(record):
        if record.offset == 11:
            raise ValueError("poison")

    processor = face.processor(EventType.KAFKA, store=InMemoryPersistenceLayer(), stop_on_first_failure=True)
    response = face.process(kafka_event(*mixed_batch()), handler, processor)
    assert kafka_failures(response) == [("orders-0", 11), ("orders-1", 7), ("orders-1", 8), ("payments-0", 3)]


def test_partitions_run_in_parallel_each_in_offset_order(face):
    records = [kafka_record("t", p, o, {"n": o}) for o in range(6) for p in range(3)]
    order, lock = [], threading.Lock()

    def handler(record):
        with lock:
            order.append((record.partition, record.offset))

    processor = face.processor(EventType.KAFKA, store=InMemoryPersistenceLayer(), max_workers=3)
    assert face.process(kafka_event(*records), handler, processor) == {"batchItemFailures": []}
    for partition in range(3):
        assert [o for p, o in order if p == partition] == list(range(6))


def test_deadline_margin_defers_records_as_failures():
    processor = BatchProcessor(
        EventType.KAFKA, store=InMemoryPersistenceLayer(), deadline_margin_ms=1000, raise_on_entire_batch_failure=False
    )
    response = processor.process(kafka_event(*mixed_batch()), lambda r: None, FakeContext(remaining_ms=500))
    assert len(kafka_failures(response)) == 5
    # The first record of each partition is deferred; the rest of its partition may not overtake it.
    assert (processor.summary.deferred, processor.summary.skipped) == (3, 2)


def test_default_key_is_topic_partition_and_offset_and_a_redelivery_replays(face):
    runs = []
    processor = face.processor(EventType.KAFKA, store=InMemoryPersistenceLayer())
    event = kafka_event(*mixed_batch())
    face.process(event, runs.append, processor)
    face.process(event, runs.append, processor)
    assert len(runs) == 5
    assert processor.summary.replayed == 5
    config = IdempotencyConfig(key_prefix="p")
    (record,) = kafka_records(kafka_event(kafka_record("orders", 0, 10, {"a": 1})))
    assert make_key(record, config) == make_key([MSK_ARN, "orders", 0, 10], config)  # not the brokers: they change
    # A producer's retry is another offset: another key by default.
    (retried,) = kafka_records(kafka_event(kafka_record("orders", 0, 11, {"a": 1})))
    assert make_key(retried, config) != make_key(record, config)


def test_the_default_key_tells_two_clusters_offsets_apart(face):
    # One function, two mappings (MSK and a self-managed cluster, or two MSK clusters): each has orders-0@42.
    runs = []
    processor = face.processor(EventType.KAFKA, store=InMemoryPersistenceLayer())
    on_msk = kafka_event(kafka_record("orders", 0, 42, {"order": "A-1"}))
    self_managed = kafka_event(kafka_record("orders", 0, 42, {"order": "B-7"}), self_managed=True)
    other_msk = kafka_event(kafka_record("orders", 0, 42, {"order": "C-3"}))
    other_msk["eventSourceArn"] = MSK_ARN.replace("cluster/", "cluster/other-")
    for event in (on_msk, self_managed, other_msk, on_msk):
        face.process(event, lambda record: runs.append(record.json_value["order"]), processor)
    assert runs == ["A-1", "B-7", "C-3"]  # each ran once; the redelivery of the first replayed
    assert processor.summary.replayed == 1
    (flat,) = kafka_records(self_managed)
    assert (flat["eventSource"], flat["bootstrapServers"]) == ("SelfManagedKafka", self_managed["bootstrapServers"])


def test_a_self_managed_mappings_brokers_key_alike_in_any_order():
    record = kafka_record("orders", 0, 42, {"order": "B-7"})
    listed = kafka_event(record, self_managed=True)
    reordered = {**listed, "bootstrapServers": "b-2.kafka:9092, b-1.kafka:9092"}
    other = {**listed, "bootstrapServers": "b-3.kafka:9092,b-1.kafka:9092"}
    key = [make_key(kafka_records(event)[0], IdempotencyConfig()) for event in (listed, reordered, other)]
    assert key[0] == key[1] != key[2]


def test_an_event_of_another_source_or_a_negative_position_fails_the_invocation():
    processor = BatchProcessor(EventType.KAFKA, store=InMemoryPersistenceLayer())
    runs = []
    not_kafka = kafka_event(kafka_record("orders", 0, 1, {}))
    not_kafka["eventSource"] = "aws:sqs"
    with pytest.raises(BatchEventError, match="eventSource is 'aws:sqs', not a Kafka one"):
        processor.process(not_kafka, runs.append)
    for field in ("partition", "offset"):
        bad = kafka_record("a", 1, 1, {})
        bad[field] = -1  # topic "a" partition -1 would be named as topic "a-" partition 1 is: "a--1"
        with pytest.raises(BatchEventError, match=f"{field} is not a non-negative integer, got -1"):
            processor.process(kafka_event(bad), runs.append)
    assert runs == []


def test_guard_passes_to_kafka_handlers_and_typed_record_keys_on_its_raw_event():
    keys = []
    processor = BatchProcessor(EventType.KAFKA, store=InMemoryPersistenceLayer())
    processor.process(kafka_event(kafka_record("t", 0, 1, {})), lambda r, guard: keys.append(guard.key))
    record = KafkaRecord.from_raw(kafka_records(kafka_event(kafka_record("t", 0, 1, {})))[0])
    assert keys == [make_key(record, IdempotencyConfig())]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"raw_value": "not base64!"}, r"record 1 of the batch .*orders-0@11: value is not valid base64"),
        ({"drop": "offset"}, r"record 1 of the batch is not a kafka record: missing 'offset'"),
        ({"set": {"key": 5}}, r"orders-0@11: key is not base64 text"),
        ({"set": {"headers": [{"h": "text"}]}}, r"orders-0@11: header 'h' is not an array of byte integers"),
        ({"set": {"offset": "11"}}, r"record 1 .*offset is not a non-negative integer"),
    ],
)
def test_bad_records_fail_the_invocation_naming_the_record(raw, message):
    bad = kafka_record("orders", 0, 11, {}, raw_value=raw.get("raw_value"))
    bad.pop(raw.get("drop", "nothing"), None)
    bad.update(raw.get("set", {}))
    runs = []
    processor = BatchProcessor(EventType.KAFKA, store=InMemoryPersistenceLayer())
    with pytest.raises(BatchEventError, match=message):
        processor.process(kafka_event(kafka_record("orders", 0, 10, {}), bad), runs.append)
    assert runs == []  # nothing ran: the whole batch comes back


@pytest.mark.parametrize(("bad", "kind"), [(None, "NoneType"), ("orders-0@2", "str"), (42, "int")])
def test_a_record_that_is_not_an_object_is_named_so(bad, kind):
    # It used to read "missing 'NoneType' object is not subscriptable".
    event = kafka_event(kafka_record("orders", 0, 1, {}))
    event["records"]["orders-0"].append(bad)
    with pytest.raises(
        BatchEventError, match=rf"^record 1 of the batch is not a kafka record: not an object, got {kind}$"
    ):
        BatchProcessor(EventType.KAFKA, store=InMemoryPersistenceLayer()).process(event, lambda r: None)


@pytest.mark.parametrize(
    "event",
    [{"eventSource": "aws:kafka", "records": [1]}, {"eventSource": "aws:kafka"}, {"records": {"t-0": {"x": 1}}}],
)
def test_an_event_without_a_records_object_of_lists_is_refused(event):
    with pytest.raises(BatchEventError, match="Kafka"):
        BatchProcessor(EventType.KAFKA, store=InMemoryPersistenceLayer()).process(event, lambda r: None)


def test_a_kafka_event_given_to_another_source_says_which_type_to_use():
    with pytest.raises(BatchEventError, match=r"EventType\.KAFKA"):
        BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer()).process(kafka_event(), lambda r: None)


def test_a_tombstone_has_no_value():
    record = KafkaRecord.from_raw({**kafka_record("t", 0, 1), "value": None})
    assert record.value is None
    assert record.decoded_value is None
    assert record.text == ""
    with pytest.raises(ValueError, match="tombstone"):
        _ = record.json_value


def test_a_header_without_a_value_reads_as_absent_and_fails_nothing():
    # Kafka allows a header whose value is null. It used to fail the whole batch (BatchEventError), every
    # partition, on every delivery; a key header without a value keys the record by its own id, as a missing one.
    odd = kafka_record("orders", 0, 9, {}, headers=[("Idempotency-Key", b"k-9")])
    odd["headers"].append({"traceparent": None})
    keyless = kafka_record("orders", 1, 5, {}, headers=[("Idempotency-Key", b"k-5")])
    keyless["headers"].append({"idempotency-key": None})  # after a value: null does not replace it
    bare = kafka_record("orders", 2, 1, {})
    bare["headers"] = [{"Idempotency-Key": None}]
    seen = []
    processor = BatchProcessor(EventType.KAFKA, store=InMemoryPersistenceLayer(), config=HEADER_OR_OWN_ID)
    assert processor.process(kafka_event(odd, keyless, bare), seen.append) == {"batchItemFailures": []}
    assert "traceparent" not in seen[0].decoded_headers
    assert seen[1].decoded_headers["Idempotency-Key"] == b"k-5"
    assert make_key(keyless, HEADER) == make_key(
        kafka_record("t", 0, 1, {}, headers=[("Idempotency-Key", b"k-5")]), HEADER
    )
    own_id, _ = key_selection(bare, IdempotencyConfig())
    assert key_selection(bare, HEADER_OR_OWN_ID) == (OwnIdKey(id=own_id), True)  # keyed by its own id, tagged as such
    with pytest.raises(IdempotencyKeyError, match="Kafka record orders-2@1 has no producer key 'Idempotency-Key'"):
        make_key(bare, HEADER)  # by default, a header without a value is a missing key, as a missing header is


# Producer-set keys: one header name, every source.

HEADER = IdempotencyConfig(key_header="Idempotency-Key", key_prefix="p")
#: Without the header, a record is keyed by its own id (by default it fails, as any missing selection does).
HEADER_OR_OWN_ID = IdempotencyConfig(key_header="Idempotency-Key", key_prefix="p", raise_on_no_idempotency_key=False)


def test_key_header_reads_a_kafka_header_case_insensitively_last_value_wins():
    a = kafka_record("t", 0, 1, {}, headers=[("idempotency-KEY", b"k-1")])
    b = kafka_record("t", 3, 99, {"other": 1}, headers=[("Idempotency-Key", b"old"), ("IDEMPOTENCY-KEY", b"k-1")])
    assert make_key(a, HEADER) == make_key(b, HEADER) == make_key("k-1", IdempotencyConfig(key_prefix="p"))


def test_key_header_reads_an_sqs_message_attribute_and_an_eventbridge_detail_field():
    message = sqs_record("m-1", {})
    message["messageAttributes"] = {"IDEMPOTENCY-KEY": {"stringValue": "k-1", "dataType": "String"}}
    event = {"id": "e-1", "detail-type": "Booked", "source": "s", "detail": {"idempotency-key": "k-1"}}
    expected = make_key("k-1", IdempotencyConfig(key_prefix="p"))
    assert make_key(message, HEADER) == make_key(event, HEADER) == expected


def sqs_with_attribute(message_id, **attribute):
    message = sqs_record(message_id, {})
    message["messageAttributes"] = {"Idempotency-Key": attribute}
    return message


def test_an_sqs_binary_attribute_keys_as_its_bytes_never_as_its_base64_text():
    # A binary key's base64 text, sent by another producer as a String attribute, is another key: it used to be
    # the same one, so one message replayed the other's result and its own body never ran.
    raw = bytes.fromhex("12345678")
    encoded = base64.b64encode(raw).decode()
    binary = sqs_with_attribute("m-1", binaryValue=encoded, dataType="Binary")
    text = sqs_with_attribute("m-2", stringValue=encoded, dataType="String")
    kafka = kafka_record("t", 0, 1, {}, headers=[("Idempotency-Key", raw)])
    assert make_key(binary, HEADER) != make_key(text, HEADER)
    assert make_key(binary, HEADER) == make_key(kafka, HEADER)  # bytes key alike, whichever source carries them
    utf8 = sqs_with_attribute("m-3", binaryValue=base64.b64encode(b"k-1").decode(), dataType="Binary")
    assert make_key(utf8, HEADER) == make_key(sqs_with_attribute("m-4", stringValue="k-1"), HEADER)


def test_an_sqs_binary_attribute_that_is_not_base64_fails_its_record_naming_it():
    processor = BatchProcessor(
        EventType.SQS, store=InMemoryPersistenceLayer(), config=HEADER, raise_on_entire_batch_failure=False
    )
    bad = sqs_with_attribute("m-1", binaryValue="not base64!", dataType="Binary")
    response = processor.process(sqs_event(bad, sqs_with_attribute("m-2", stringValue="k-2")), lambda record: None)
    assert response == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    assert "binaryValue is not base64" in str(processor.items[0].error)
    assert "not base64!" not in str(processor.items[0].error)


def test_producer_duplicates_across_offsets_run_once(face):
    runs = []
    records = [kafka_record("t", 0, o, {"o": o}, headers=[("Idempotency-Key", b"same")]) for o in (1, 2)]
    processor = face.processor(EventType.KAFKA, store=InMemoryPersistenceLayer(), config=HEADER)
    assert face.process(kafka_event(*records), runs.append, processor) == {"batchItemFailures": []}
    assert len(runs) == 1
    assert processor.summary.replayed == 1


@pytest.mark.parametrize(
    ("event_type", "event"),
    [
        (EventType.SQS, sqs_event(sqs_record("m-1", {}))),
        (EventType.KAFKA, kafka_event(kafka_record("t", 0, 1, {}))),
        (EventType.KAFKA, kafka_event(kafka_record("t", 0, 1, {}, headers=[("Idempotency-Key", b"")]))),
    ],
    ids=["sqs without the attribute", "kafka without headers", "kafka with an empty header"],
)
def test_a_record_without_the_producers_key_is_keyed_by_its_own_id_when_a_key_is_not_required(face, event_type, event):
    # Never unguarded: a redelivery of a record whose producer set no key replays, as without key_header.
    ran = []
    processor = face.processor(event_type, store=InMemoryPersistenceLayer(), config=HEADER_OR_OWN_ID)
    for _ in range(2):
        assert face.process(event, ran.append, processor) == {"batchItemFailures": []}
    assert len(ran) == 1
    assert (processor.summary.replayed, processor.summary.unguarded) == (1, 0)


def test_a_record_without_the_header_fails_by_default():
    ran = []
    strict = IdempotencyConfig(key_header="Idempotency-Key")
    with pytest.raises(IdempotencyKeyError, match="Kafka record t-0@1 has no producer key 'Idempotency-Key'"):
        make_key(kafka_record("t", 0, 1, {}), strict)
    processor = BatchProcessor(
        EventType.KAFKA, store=InMemoryPersistenceLayer(), config=strict, raise_on_entire_batch_failure=False
    )
    response = processor.process(kafka_event(kafka_record("t", 0, 1, {})), ran.append)
    assert kafka_failures(response) == [("t-0", 1)]  # reported, never run unguarded
    assert ran == []


@pytest.mark.parametrize("event_type", [EventType.KINESIS, EventType.DYNAMODB_STREAMS])
def test_header_function_composes_with_a_fallback_and_sources_without_headers_refuse_key_header(face, event_type):
    config = IdempotencyConfig(event_key_jmespath="header(@, 'Idempotency-Key') || messageId", key_prefix="p")
    assert make_key(sqs_record("m-1", {}), config) == make_key("m-1", IdempotencyConfig(key_prefix="p"))
    with pytest.raises(ValueError, match=f"key_header: {event_type.value} records carry no headers"):
        face.processor(event_type, store=InMemoryPersistenceLayer(), config=HEADER)


def test_key_header_and_an_expression_are_not_both_given():
    with pytest.raises(IdempotencyConfigError, match="key_header"):
        IdempotencyConfig(key_header="Idempotency-Key", event_key_jmespath="messageId")
    for name in (" ", "", " Idempotency-Key", "Idempotency-Key\n"):  # spaces around a name would never match
        with pytest.raises(IdempotencyConfigError, match="header name"):
            IdempotencyConfig(key_header=name)


def test_a_binary_key_header_keys_its_record_by_its_bytes_and_a_redelivery_replays(face):
    # A producer's binary key (not UTF-8) used to fail its record on every delivery, holding its partition back.
    binary = b"\x9c\x01\xff\xfe"
    runs, seen = [], []
    first = kafka_record("t", 0, 1, {"n": 1}, headers=[("trace", b"\xff"), ("Idempotency-Key", binary)])
    retried = kafka_record("t", 1, 9, {"n": 1}, headers=[("IDEMPOTENCY-KEY", binary)])  # the producer's retry
    event = kafka_event(first, kafka_record("t", 0, 2, {"n": 2}, headers=[("Idempotency-Key", b"k-2")]), retried)

    def handler(record):
        runs.append(record.topic_partition)
        seen.append((record.decoded_headers.get("idempotency-key"), record.decoded_headers.get("trace")))

    processor = face.processor(EventType.KAFKA, store=InMemoryPersistenceLayer(), config=HEADER)
    for _ in range(2):
        assert face.process(event, handler, processor) == {"batchItemFailures": []}
    assert runs == ["t-0", "t-0"]  # t-0@1 and t-0@2 ran once; t-1@9 and the redelivery replayed
    assert processor.summary.replayed == 3
    assert seen[0] == (binary, b"\xff")  # header values are the raw bytes: reading them never fails
    # Keyed in a form of its own: neither its hex digits nor its base64 as text, nor a payload spelling either out
    # (even with the serializer's reserved tag), nor the same bytes as a plain value key alike.
    binary_key = make_key(first, HEADER)
    plain = IdempotencyConfig(key_prefix="p")
    for lookalike in ("9c01fffe", "nAH//g==", {"hex": "9c01fffe"}, {"__ic__": "bytes", "v": "9c01fffe"}, binary):
        assert make_key(lookalike, plain) != binary_key, lookalike
    as_text = kafka_record("t", 0, 3, {}, headers=[("Idempotency-Key", b"9c01fffe")])
    assert make_key(as_text, HEADER) == make_key("9c01fffe", IdempotencyConfig(key_prefix="p"))
    assert make_key(as_text, HEADER) != make_key(first, HEADER)


def test_a_record_that_cannot_be_keyed_fails_alone_naming_its_place_and_why():
    # Unrelated headers are not read: a malformed one does not keep the key header from keying the record.
    unrelated = kafka_record("t", 0, 1, {}, headers=[("Idempotency-Key", b"k-1")])
    unrelated["headers"] += [{"trace": "not bytes"}, "not an object"]
    assert make_key(unrelated, HEADER) == make_key("k-1", IdempotencyConfig(key_prefix="p"))
    bad = kafka_record("t", 0, 1, {})
    bad["headers"] = [{"Idempotency-Key": "k-1"}]
    with pytest.raises(IdempotencyKeyError, match=r"on Kafka record t-0@1: header 'Idempotency-Key' is not an array"):
        make_key(bad, HEADER)
    # In a batch: a key selected from the value, which is not UTF-8 on one record. It is reported, and its error
    # names its place; the rest of its partition waits behind it, the other partitions go on.
    by_value = IdempotencyConfig(event_key_jmespath="json_parse(base64_decode(value)).id")
    event = kafka_event(
        kafka_record("t", 0, 1, b"\xff\xfe"), kafka_record("t", 0, 2, {"id": 2}), kafka_record("t", 1, 5, {"id": 5})
    )
    processor = BatchProcessor(
        EventType.KAFKA, store=InMemoryPersistenceLayer(), config=by_value, raise_on_entire_batch_failure=False
    )
    assert kafka_failures(processor.process(event, lambda record: None)) == [("t-0", 1), ("t-0", 2)]
    failed = processor.items[0]
    assert (failed.outcome, type(failed.error)) == (Outcome.FAILED, IdempotencyKeyError)
    assert "failed on Kafka record t-0@1: the decoded bytes are not UTF-8 text (at byte 0)" in str(failed.error)
    with pytest.raises(IdempotencyKeyError, match=r"Kafka record t-0@7 has no producer key 'Idempotency-Key'"):
        make_key(kafka_record("t", 0, 7, {}), IdempotencyConfig(key_header="Idempotency-Key"))


def test_guard_on_a_raw_kafka_record_uses_the_header():
    store = InMemoryPersistenceLayer()
    record = kafka_record("t", 0, 1, {}, headers=[("Idempotency-Key", base64.b16decode("6B31"))])
    with IdempotencyGuard(record, store=store, config=HEADER) as guard:
        guard.result = "done"
    assert guard.key == make_key("k1", IdempotencyConfig(key_prefix="p"))
