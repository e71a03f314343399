"""Text with no UTF-8 form (a lone surrogate), past what the shipped contract covers on every store: the size
count, and a DynamoDB answer that is not UTF-8."""

from __future__ import annotations

import dataclasses

import pytest
from dynamodb_local import canned_answer
from records import done, lock

from persistence import (
    MAX_ITEM_BYTES,
    DynamoDBPersistenceLayer,
    ItemTooLargeError,
    PersistenceLayerError,
    record_size,
)
from persistence._attributes import check_size

LONE = "\ud83d"


def test_check_size_counts_a_lone_surrogate_as_three_bytes():
    record = done(lock("k"), "x" * 150_000)
    with_surrogate = dataclasses.replace(record, response="x" * 149_999 + LONE)
    assert record_size(with_surrogate) == record_size(record) + 2
    check_size(with_surrogate)  # under the limit: no error of any kind
    over = dataclasses.replace(record, response=LONE * (MAX_ITEM_BYTES // 3))
    with pytest.raises(ItemTooLargeError) as caught:
        check_size(over)
    assert caught.value.size == record_size(over) > MAX_ITEM_BYTES


def test_dynamodb_answer_that_is_not_utf8_is_a_persistence_error_naming_the_key(ddb_server):
    # DynamoDB Local answers a lone surrogate as its JSON escape; a server answering with the surrogate's
    # raw (CESU-8) bytes instead makes botocore raise UnicodeDecodeError while parsing.
    client = ddb_server.client()
    body = b'{"Item": {"id": {"S": "k"}, "status": {"S": "COMPLETE"}, "data": {"S": "\xed\xa0\xbd"}}}'
    client.meta.events.register(
        "before-send.dynamodb.GetItem", lambda request, **_: canned_answer(request.url, 200, body)
    )
    store = DynamoDBPersistenceLayer(table_name=ddb_server.create_table(), boto3_client=client)
    with pytest.raises(PersistenceLayerError) as caught:
        store.get("k")
    assert caught.value.key == "k"
    assert isinstance(caught.value.__cause__, UnicodeDecodeError)
