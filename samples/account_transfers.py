"""Debits from an SQS queue, on DynamoDB: each transfer debits its account once, atomically with its record.

The debit (conditioned on the balance), the transfer's own item and the idempotency record's commit go to
DynamoDB in one transaction (``guard.write``): a crash between the body and the commit leaves none of them, and
a transfer the balance does not cover writes nothing and is reported in ``batchItemFailures``. The key is the
transfer id in the body: a producer's retry in a new message debits nothing twice.

Payload: each message's ``body`` is a transfer, as a JSON string (``samples/events/account_transfers.json``)::

    {"transfer_id": "tr-1", "account": "acc-1", "amount": 30}

The accounts live in the table named by ``ACCOUNTS_TABLE`` (partition key ``pk``): an account's item is
``{"pk": "acc-1", "balance": 100}``, a transfer's ``{"pk": "transfer#tr-1", "account": "acc-1", "amount": 30}``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from consumer import BatchProcessor, EventType, IdempotencyConfig, IdempotencyGuard, SQSRecord, process_partial_response
from persistence import store_from_url

if TYPE_CHECKING:
    from aws_lambda_typing.context import Context
    from aws_lambda_typing.events import SQSEvent

config = IdempotencyConfig(
    event_key_jmespath="powertools_json(body).transfer_id",
    payload_validation_jmespath="powertools_json(body).[account, amount]",
)
processor = BatchProcessor(EventType.SQS, store=store_from_url(), config=config)
ACCOUNTS_TABLE = os.environ.get("ACCOUNTS_TABLE", "Accounts")


def record_handler(record: SQSRecord, guard: IdempotencyGuard) -> dict[str, Any]:
    """Debit one transfer's account and record the transfer, with the idempotency record or not at all."""
    transfer = record.json_body
    amount = {"N": str(int(transfer["amount"]))}
    guard.write({
        "Update": {
            "TableName": ACCOUNTS_TABLE,
            "Key": {"pk": {"S": transfer["account"]}},
            "UpdateExpression": "SET balance = balance - :amount",
            "ConditionExpression": "balance >= :amount",  # refused: nothing is written, the record fails
            "ExpressionAttributeValues": {":amount": amount},
        }
    })  # fmt: skip
    item = {"pk": {"S": f"transfer#{transfer['transfer_id']}"}, "account": {"S": transfer["account"]}, "amount": amount}
    guard.write({"Put": {"TableName": ACCOUNTS_TABLE, "Item": item}})
    return {"transfer_id": transfer["transfer_id"], "debited": int(transfer["amount"])}


def handler(event: SQSEvent, context: Context) -> Any:
    """The Lambda handler (SQS trigger with ReportBatchItemFailures)."""
    return process_partial_response(event, record_handler, processor, context)
