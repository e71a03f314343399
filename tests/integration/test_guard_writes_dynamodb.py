"""``guard.write`` on DynamoDB: the request count, the request a body without writes sends, a lost answer, limits."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ReadTimeoutError
from botocore.httpsession import URLLib3Session
from botocore.stub import ANY, Stubber
from ledgers import START, DynamoDBLedger
from records import NOW_MS, done, lock

from consumer import IdempotencyGuard, PersistenceLayerError
from persistence import MAX_ITEM_BYTES, DynamoDBPersistenceLayer, RecordStatus, _dynamodb_writes

RECORD = {"messageId": "m-1", "body": "{}"}


@pytest.fixture
def ledger(ddb_server):
    client = ddb_server.client()
    store = DynamoDBPersistenceLayer(table_name=ddb_server.create_table(), boto3_client=client)
    return DynamoDBLedger.create(ddb_server, store)


def sent_operations(client):
    sent: list[str] = []
    client.meta.events.register(
        "before-send.dynamodb.*",
        lambda request, **_: sent.append(request.headers["X-Amz-Target"].decode().split(".")[-1]),
    )
    return sent


def test_a_first_delivery_with_writes_is_two_requests(ledger):
    sent = sent_operations(ledger.store.client)
    with IdempotencyGuard(RECORD, store=ledger.store) as guard:
        ledger.debit(guard, 30)
    assert sent == ["PutItem", "TransactWriteItems"]
    assert ledger.balance() == START - 30


def test_a_body_without_writes_commits_with_the_same_request_as_before():
    client = boto3.client("dynamodb", region_name="us-east-1")
    store = DynamoDBPersistenceLayer(table_name="orders", boto3_client=client)
    with Stubber(client) as stub:
        stub.add_response("put_item", {})
        stub.add_response(
            "update_item",
            {},
            {
                "TableName": "orders",
                "Key": {"id": {"S": ANY}},
                "UpdateExpression": "SET #s = :done, #e = :exp, #r = :r REMOVE #d, #v",
                "ConditionExpression": "#l = :lease AND #s = :ip",
                "ExpressionAttributeNames": {
                    "#s": "status", "#e": "expiration", "#d": "in_progress_expiration", "#l": "lease",
                    "#r": "data", "#v": "validation",
                },
                "ExpressionAttributeValues": {
                    ":done": {"S": "COMPLETE"}, ":exp": {"N": ANY}, ":lease": {"S": ANY},
                    ":ip": {"S": "IN_PROGRESS"}, ":r": {"S": '"ok"'},
                },
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            },
        )  # fmt: skip
        with IdempotencyGuard(RECORD, store=store) as guard:
            guard.result = "ok"
        stub.assert_no_pending_responses()


def lose_the_first_answer(client):
    """Let the first TransactWriteItems reach the server, then tell the caller its answer timed out."""
    http, lost = URLLib3Session(), []

    def send(request, **_):
        if not lost:
            lost.append(http.send(request).status_code)  # the server has applied it
            raise ReadTimeoutError(endpoint_url=request.url)
        # the retry: botocore sends it itself

    client.meta.events.register("before-send.dynamodb.TransactWriteItems", send)
    return lost


def test_a_commit_whose_answer_was_lost_is_retried_and_applies_once(ledger):
    sent = sent_operations(ledger.store.client)
    lost = lose_the_first_answer(ledger.store.client)
    answered: list[int] = []
    ledger.store.client.meta.events.register(
        "after-call.dynamodb.TransactWriteItems", lambda http_response, **_: answered.append(http_response.status_code)
    )
    with IdempotencyGuard(RECORD, store=ledger.store) as guard:
        ledger.debit(guard, 30)
    assert lost == [200]
    assert answered == [200]  # the same token: the retry is answered as the first attempt was, not cancelled
    assert sent == ["PutItem", "TransactWriteItems", "TransactWriteItems"]
    assert (ledger.balance(), ledger.transfers()) == (START - 30, ["transfer#t-1"])
    assert ledger.store.get(guard.key).status is RecordStatus.COMPLETE


def test_a_commit_sent_again_past_its_token_finds_its_own_record_and_writes_nothing(ledger, monkeypatch):
    # After DynamoDB's 10 minutes a token is new again: the transaction is cancelled on the record's condition,
    # which finds the record COMPLETE under this lease: the commit applied, once.
    with IdempotencyGuard(RECORD, store=ledger.store) as guard:
        ledger.debit(guard, 30)
        writes = guard._writes
    record = ledger.store.get(guard.key)
    monkeypatch.setattr(_dynamodb_writes, "request_token", lambda _: "a-token-the-server-has-forgotten")
    ledger.store.complete_with(record, writes)
    assert (ledger.balance(), ledger.transfers()) == (START - 30, ["transfer#t-1"])


def test_a_commit_that_cannot_reach_the_server_keeps_the_lock_and_writes_nothing(ledger, ddb_server):
    from botocore.config import Config  # noqa: PLC0415

    client = ddb_server.client(Config(retries={"max_attempts": 1}))
    store = DynamoDBPersistenceLayer(table_name=ledger.store.table_name, boto3_client=client)
    client.meta.events.register(
        "before-send.dynamodb.TransactWriteItems",
        lambda request, **_: (_ for _ in ()).throw(ReadTimeoutError(endpoint_url=request.url)),
    )
    with pytest.raises(PersistenceLayerError, match="transact_write_items"), IdempotencyGuard(RECORD, store=store) as g:
        ledger.debit(g, 30)
    assert store.get(g.key).status is RecordStatus.IN_PROGRESS  # the redelivery runs after the lock's deadline
    assert (ledger.balance(), ledger.transfers()) == (START, [])


def put(table, key, **values):
    return {"Put": {"TableName": table, "Item": {"account": {"S": key}, **values}}}


def test_limits_are_checked_when_a_write_is_queued(ledger):
    table, store = ledger.table, ledger.store
    with IdempotencyGuard(RECORD, store=store) as guard:
        for i in range(99):
            guard.write(put(table, f"k{i}"))
        with pytest.raises(ValueError, match="write 99: at most 99 writes"):
            guard.write(put(table, "one-too-many"))
        guard._writes.clear()
        with pytest.raises(ValueError, match="over DynamoDB's 409600-byte item limit"):
            guard.write(put(table, "big", blob={"S": "x" * MAX_ITEM_BYTES}))
        for i in range(9):
            guard.write(put(table, f"b{i}", blob={"S": "x" * 390_000}))
        with pytest.raises(ValueError, match=r"write 9: the writes take .* over the 3784704"):
            guard.write(put(table, "b9", blob={"S": "x" * 390_000}))
        guard._writes.clear()
        own = {"TableName": store.table_name, "Key": {"id": {"S": guard.key}}, "ConditionExpression": "a = b"}
        with pytest.raises(ValueError, match="ConditionCheck of the idempotency record itself"):
            guard.write({"ConditionCheck": own})
        debit = {"TableName": table, "Key": {"account": {"S": "a"}}, "UpdateExpression": "SET b = :b"}
        guard.write({"Update": {**debit, "ExpressionAttributeValues": {":b": {"N": "1"}}}})
        with pytest.raises(ValueError, match="write 1 names the item write 0 names"):
            guard.write(
                {"ConditionCheck": {"TableName": table, "Key": {"account": {"S": "a"}}, "ConditionExpression": "x"}}
            )
        guard._writes.clear()
        with pytest.raises(TypeError, match="one TransactWriteItems entry"):
            guard.write({"Put": {"Item": {}}, "Delete": {}})
        with pytest.raises(TypeError, match="a Delete needs its Key"):
            guard.write({"Delete": {"TableName": table}})
        with pytest.raises(TypeError, match="takes no params"):
            guard.write(put(table, "k"), {"x": 1})
        guard.write(put(table, "kept"))
    assert ledger.transfers() == []
    assert "Item" in store.client.get_item(TableName=table, Key={"account": {"S": "kept"}})


def test_a_commit_sent_again_by_the_store_carries_the_same_token_and_is_answered_as_applied(ledger):
    # botocore's own retries reuse one request, token included; a commit sent again (a new call, as after a lost
    # answer that exhausted them) is answered as applied too, because its token is made of the key and the lease.
    # Without it the resend is cancelled on the record's condition and found to be ours: applied once either way.
    store, answered = ledger.store, []
    store.client.meta.events.register(
        "after-call.dynamodb.TransactWriteItems", lambda http_response, **_: answered.append(http_response.status_code)
    )
    held = lock("k")
    assert store.acquire(held, NOW_MS) is None
    writes: list = []
    for item in ledger.debit_items("t-1", 30):
        store.queue_write(held.key, writes, item, None)
    store.complete_with(done(held), writes)
    store.complete_with(done(held), writes)
    assert answered == [200, 200]
    assert (ledger.balance(), ledger.transfers()) == (START - 30, ["transfer#t-1"])
