"""Text a store cannot encode (a lone surrogate): stored and read back, or refused naming the key.

``json.dumps(..., ensure_ascii=False)`` turns the valid JSON string ``"\\ud83d"`` into a Python str holding a
lone surrogate, which has no UTF-8 form. No store may let a bare ``UnicodeEncodeError`` escape.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from dynamodb_local import canned_answer
from records import NOW_MS, done, lock

from persistence import (
    MAX_ITEM_BYTES,
    DynamoDBPersistenceLayer,
    ItemTooLargeError,
    PersistenceLayerError,
    RecordStatus,
    record_size,
)
from persistence._attributes import check_size

LONE = "\ud83d"
RESPONSES = [json.dumps(LONE, ensure_ascii=False), json.dumps({"emoji": "a\udc00b"}, ensure_ascii=False), LONE]


def _stored_or_refused(store, key, write, check):
    """Run ``write``; it either succeeds (then run ``check``) or raises PersistenceLayerError naming ``key``."""
    try:
        write()
    except PersistenceLayerError as e:
        refused: PersistenceLayerError | None = e
    else:
        refused = None
    if refused is None:
        assert check() is not False
        return True
    assert refused.key == key
    assert repr(key) in str(refused)
    assert refused.__cause__ is not None
    return False


@pytest.mark.parametrize("response", RESPONSES, ids=ascii)
def test_response_with_a_lone_surrogate_is_stored_or_refused_naming_the_key(store, response):
    held = lock("k")
    assert store.acquire(held, NOW_MS) is None

    def replayed():
        assert store.get("k").response == response
        assert store.acquire(lock("k"), NOW_MS).response == response

    if not _stored_or_refused(store, "k", lambda: store.complete(done(held, response)), replayed):
        assert store.get("k") == held  # refused: the lock is still ours, nothing half-written


def test_acquire_with_a_lone_surrogate_in_the_payload_hash_is_stored_or_refused(store):
    held = dataclasses.replace(lock("k"), payload_hash=LONE)
    _stored_or_refused(store, "k", lambda: store.acquire(held, NOW_MS), lambda: store.get("k") == held)


def test_a_key_with_a_lone_surrogate_is_stored_or_refused(store):
    key = f"fn#{LONE}"
    held = lock(key)

    def stored():
        assert store.get(key) == held
        store.release(key, held.lease)
        assert store.get(key) is None

    if not _stored_or_refused(store, key, lambda: store.acquire(held, NOW_MS), stored):
        with pytest.raises(PersistenceLayerError) as caught:
            store.get(key)
        assert caught.value.key == key


def test_large_response_with_a_lone_surrogate_is_stored_or_refused(store):
    # Over 100 KB: check_size takes its slow path, which counts UTF-8 bytes.
    held = lock("k")
    store.acquire(held, NOW_MS)
    response = json.dumps("x" * 150_000 + LONE, ensure_ascii=False)
    _stored_or_refused(store, "k", lambda: store.complete(done(held, response)),
                       lambda: store.get("k").response == response)  # fmt: skip


def test_too_large_response_with_a_lone_surrogate_is_item_too_large(store):
    held = lock("k")
    store.acquire(held, NOW_MS)
    with pytest.raises(ItemTooLargeError) as caught:
        store.complete(done(held, LONE * (MAX_ITEM_BYTES // 2)))
    assert caught.value.key == "k"
    assert store.get("k").status is RecordStatus.IN_PROGRESS


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
