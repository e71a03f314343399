"""The DynamoDB requests each store call makes: counted with a botocore event hook against DynamoDB
Local, and the exact acquire request asserted with botocore's Stubber."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from records import NOW_MS, done, lock, taken_over

from persistence import DynamoDBPersistenceLayer, LockLostError, PersistenceLayerError


def test_first_time_record_is_two_requests(counted):
    store, sent = counted
    held = lock("k")
    assert store.acquire(held, NOW_MS) is None
    store.complete(done(held))
    assert sent == ["PutItem", "UpdateItem"]


def test_duplicate_is_one_request_returning_the_record(counted):
    store, sent = counted
    held = lock("k")
    store.acquire(held, NOW_MS)
    store.complete(done(held, '"result"'))
    sent.clear()
    assert store.acquire(lock("k"), NOW_MS).response == '"result"'
    assert sent == ["PutItem"]


def test_failed_body_is_two_requests_and_stale_release_one(counted):
    store, sent = counted
    held = lock("k")
    store.acquire(held, NOW_MS)
    store.release(held)
    assert sent == ["PutItem", "DeleteItem"]
    stale, _ = taken_over(store)
    sent.clear()
    with pytest.raises(LockLostError):
        store.release(stale)
    assert sent == ["DeleteItem"]


def test_operator_calls_are_one_request_each(counted):
    store, sent = counted
    held = lock("k")
    store.acquire(held, NOW_MS)
    sent.clear()
    assert store.get("k") == held
    assert store.delete("k") is True
    assert list(store.scan()) == []
    assert sent == ["GetItem", "DeleteItem", "Scan"]


def test_client_is_created_lazily():
    store = DynamoDBPersistenceLayer(table_name="t")
    assert store._client is None


def test_acquire_sends_one_conditional_put_with_all_old():
    store = DynamoDBPersistenceLayer(table_name="IdempotencyTable")
    held = lock("fn#abc")
    with Stubber(store.client) as stub:
        stub.add_response(
            "put_item",
            {},
            {
                "TableName": "IdempotencyTable",
                "Item": {
                    "id": {"S": "fn#abc"},
                    "status": {"S": "IN_PROGRESS"},
                    "expiration": {"N": str(held.expires_at)},
                    "in_progress_expiration": {"N": str(held.in_progress_expires_at)},
                    "lease": {"S": held.lease},
                },
                "ConditionExpression": "attribute_not_exists(#k) OR #e < :now_s OR (#s = :ip AND #d < :now_ms)",
                "ExpressionAttributeNames": {
                    "#k": "id",
                    "#e": "expiration",
                    "#s": "status",
                    "#d": "in_progress_expiration",
                },
                "ExpressionAttributeValues": {
                    ":now_s": {"N": str(NOW_MS // 1000)},
                    ":now_ms": {"N": str(NOW_MS)},
                    ":ip": {"S": "IN_PROGRESS"},
                },
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            },
        )
        assert store.acquire(held, NOW_MS) is None
        stub.assert_no_pending_responses()


def test_storage_failure_names_the_key_and_chains_the_cause():
    store = DynamoDBPersistenceLayer(table_name="IdempotencyTable")
    with Stubber(store.client) as stub:
        stub.add_client_error("put_item", "ProvisionedThroughputExceededException", "slow down", expected_params=None)
        with pytest.raises(PersistenceLayerError, match="fn#abc") as caught:
            store.acquire(lock("fn#abc"), NOW_MS)
    assert caught.value.key == "fn#abc"
    assert isinstance(caught.value.__cause__, ClientError)


def test_scan_follows_pages_past_one_megabyte(counted):
    store, sent = counted
    for i in range(30):
        held = lock(f"k{i:02d}")
        store.acquire(held, NOW_MS)
        store.complete(done(held, '"' + "x" * 40_000 + '"'))
    sent.clear()
    assert len(list(store.scan())) == 30
    assert sent == ["Scan", "Scan"]
