"""``guard.write`` on DynamoDB Local: a record whose body debits an account, its write committed with the record in
one transaction, against the same body writing first and the guard committing after (3 requests)."""

from __future__ import annotations

import time
from typing import Any

import libraries
from dynamodb_scenarios import Traffic

from consumer import BatchProcessor, EventType, process_partial_response
from consumer.local_context import LocalContext


def _debit(table: str, record: Any) -> dict[str, Any]:
    account = f"a{int(record.json_body['order_id']) % 10}"
    return {
        "TableName": table,
        "Key": {"account": {"S": account}},
        "UpdateExpression": "SET balance = balance - :n",
        "ConditionExpression": "balance >= :n",
        "ExpressionAttributeValues": {":n": {"N": "1"}},
    }


def writes(server: Any, records: int, runs: int) -> list[Any]:
    """Requests and milliseconds per record, each way; the best of ``runs`` batches of ``records`` new records."""
    from run import Row

    from persistence import DynamoDBPersistenceLayer

    client = server.client()
    traffic = Traffic(client)
    store = DynamoDBPersistenceLayer(table_name=server.create_table(), boto3_client=client)
    table = server.create_table(key_attr="account")
    for i in range(10):
        client.put_item(TableName=table, Item={"account": {"S": f"a{i}"}, "balance": {"N": str(10**9)}})

    def with_the_record(record: Any, guard: Any) -> None:
        guard.write({"Update": _debit(table, record)})

    def then_commit(record: Any) -> None:
        client.update_item(**_debit(table, record))

    processor = BatchProcessor(EventType.SQS, store=store)
    offset = [0]

    def per_record(handler: Any) -> tuple[float, float]:
        best, sent = float("inf"), 0.0
        for _ in range(runs):
            offset[0] += records
            event, before = libraries.sqs_event(records, offset=offset[0]), traffic.sent
            started = time.perf_counter()
            process_partial_response(event, handler, processor, LocalContext(timeout_ms=900_000))
            best = min(best, (time.perf_counter() - started) * 1000 / records)
            sent = (traffic.sent - before) / records
        return sent, best

    (tx_requests, tx_ms), (plain_requests, plain_ms) = per_record(with_the_record), per_record(then_commit)
    return [
        Row("DynamoDB requests/record, a write with the record (guard.write)", tx_requests, "-", "requests", None,
            "2", tx_requests == 2),
        Row("DynamoDB requests/record, the write, then the commit", plain_requests, "-", "requests", None, "3",
            plain_requests == 3),
        Row("DynamoDB Local ms/record, a write with the record (guard.write)", round(tx_ms, 2), "-", "ms", None, "-",
            True),
        Row("DynamoDB Local ms/record, the write, then the commit", round(plain_ms, 2), "-", "ms", None, "-", True),
    ]  # fmt: skip
