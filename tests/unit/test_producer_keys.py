"""Producer-set keys against a producer who sends what another record is keyed by: a header-less record's own id,
or a header name that only folds to the configured one outside ASCII."""

from __future__ import annotations

import pytest
from events import kafka_record, sqs_event, sqs_record

from consumer import EventType, IdempotencyConfig, KafkaHeaders, idempotent_function, make_key
from consumer._serde import canonical_json
from consumer.keys import key_selection
from persistence import InMemoryPersistenceLayer

HEADER = IdempotencyConfig(key_header="Idempotency-Key", key_prefix="p", raise_on_no_idempotency_key=False)
KELVIN = "Idempotency-\u212aey"  # KELVIN SIGN: casefolds (and lowercases) to a "k"


def sqs_with_key(message_id: str, key: str, name: str = "Idempotency-Key") -> dict:
    message = sqs_record(message_id, {"id": message_id})
    message["messageAttributes"] = {name: {"stringValue": key, "dataType": "String"}}
    return message


@pytest.mark.parametrize("claimer_first", [True, False], ids=["claimer-first", "claimer-last"])
def test_a_producer_cannot_claim_a_header_less_records_key_by_sending_its_id(face, claimer_first):
    # A record without the header is keyed by its own id; one whose header spelled that id shared its key, so
    # whichever came second replayed the other's result and its own body never ran.
    plain, claimer = sqs_record("m-1", {"id": "m-1"}), sqs_with_key("m-2", "m-1")
    records = [claimer, plain] if claimer_first else [plain, claimer]
    ran = []
    processor = face.processor(EventType.SQS, store=InMemoryPersistenceLayer(), config=HEADER)
    assert face.process(sqs_event(*records), lambda r: ran.append(r.message_id), processor) == {"batchItemFailures": []}
    assert sorted(ran) == ["m-1", "m-2"]
    assert (processor.summary.processed, processor.summary.replayed) == (2, 0)
    # ... while the header-less record's redelivery still replays.
    assert face.process(sqs_event(plain), lambda r: ran.append(r.message_id), processor) == {"batchItemFailures": []}
    assert processor.summary.replayed == 1


def test_no_header_value_of_any_source_keys_as_a_header_less_records_own_id():
    records = [
        (sqs_record("m-1", {}), "m-1"),
        ({"id": "e-1", "detail-type": "Booked", "source": "s", "detail": {}}, "e-1"),
        (kafka_record("orders", 0, 7, {}), [None, "orders", 0, 7]),  # an EventBridge detail field may be a list
    ]
    for record, own_id in records:
        selection, by_own_id = key_selection(record, HEADER)
        assert by_own_id
        assert canonical_json(selection) == f'{{"__ic__":"own-id","v":{canonical_json(own_id)}}}'
        claimers = [{"id": "e-9", "detail-type": "Booked", "source": "s", "detail": {"Idempotency-Key": own_id}}]
        if isinstance(own_id, str):
            claimers += [
                sqs_with_key("m-9", own_id),
                kafka_record("t", 1, 1, headers=[("idempotency-key", own_id.encode())]),
            ]
        for claimer in claimers:
            assert key_selection(claimer, HEADER) == (own_id, False)
            assert make_key(claimer, HEADER) != make_key(record, HEADER)


def test_header_names_compare_in_ascii_only():
    # casefold() read a name with a KELVIN SIGN as Idempotency-Key: a filter upstream that drops that header by its
    # ASCII name would let it through, and the producer chose the key anyway.
    kafka = kafka_record("t", 0, 1, {}, headers=[(KELVIN, b"k-1")])
    message = sqs_with_key("m-1", "k-1", name=KELVIN)
    event = {"id": "e-1", "detail-type": "Booked", "source": "s", "detail": {KELVIN: "k-1"}}
    for record in (kafka, message, event):
        assert key_selection(record, HEADER)[1]  # no such header: keyed by the record's own id
    headers = KafkaHeaders([(KELVIN, b"k-1"), ("IDEMPOTENCY-KEY", b"k-2")])
    assert headers["idempotency-key"] == b"k-2"
    assert headers.get_all("Idempotency-Key") == [b"k-2"]
    assert KELVIN in headers
    assert headers.get_all(KELVIN) == [b"k-1"]
    # ASCII letters still match in any case, beside any other character kept as it is.
    assert key_selection(sqs_with_key("m-1", "k-1", name="idempotency-KEY"), HEADER) == ("k-1", False)
    accented = IdempotencyConfig(key_header="Clé-Ünique", key_prefix="p", raise_on_no_idempotency_key=False)
    assert key_selection(sqs_with_key("m-1", "k-1", name="CLé-Ünique"), accented) == ("k-1", False)
    assert key_selection(sqs_with_key("m-1", "k-1", name="clé-ünique"), accented)[1]  # Ü is not ASCII


@pytest.mark.parametrize(
    "records",
    [
        [{"order": 1}, {"order": 2}],  # a function's argument: no header, no id of its own
        [{"messageId": None, "order": 1}, {"messageId": None, "order": 2}],  # an own-id field naming nothing
    ],
    ids=["no-id-field", "empty-id-field"],
)
def test_records_with_neither_the_header_nor_an_own_id_have_no_key_and_each_runs(records):
    # Keyed by nothing, each runs unguarded (as any record whose selection is missing): none may share one key with
    # another (the second would replay the first's result), and none may fail for lacking an id it never had.
    assert [key_selection(record, HEADER) for record in records] == [(None, True)] * len(records)
    assert [make_key(record, HEADER) for record in records] == [None] * len(records)
    ran = []

    @idempotent_function(data_keyword_argument="order", store=InMemoryPersistenceLayer(), config=HEADER)
    def charge(order):
        ran.append(order["order"])
        return order["order"]

    assert [charge(order=record) for record in records] == [1, 2]
    assert ran == [1, 2]
