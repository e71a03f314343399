"""Payments from an SQS queue: each order is charged once, however often its message is delivered.

The key is the order id inside the body (a producer that retries sends the same order in a new message,
with a new ``messageId``), and the amount must match the first delivery's. The idempotency key is passed
to the payment provider as well, as real payment APIs allow.

Payload: each message's ``body`` is an order, as a JSON string (``samples/events/sqs_orders.json``)::

    {"order_id": "o-1001", "amount": 30.0, "currency": "EUR"}
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from consumer import BatchProcessor, EventType, IdempotencyConfig, IdempotencyGuard, SQSRecord, process_partial_response
from persistence import store_from_url
from samples.ledger import Ledger

if TYPE_CHECKING:
    from aws_lambda_typing.context import Context
    from aws_lambda_typing.events import SQSEvent

SAMPLE = "sqs_orders"
config = IdempotencyConfig(
    event_key_jmespath="powertools_json(body).order_id",
    payload_validation_jmespath="powertools_json(body).[amount, currency]",
)
processor = BatchProcessor(EventType.SQS, store=store_from_url(), config=config)
payments = Ledger()


def charge(order: dict[str, Any], idempotency_key: str) -> str:
    """The payment provider: charge once, return the charge id."""
    if order["amount"] <= 0:
        msg = f"order {order['order_id']}: amount must be positive, got {order['amount']}"
        raise ValueError(msg)
    payments.record(SAMPLE, order["order_id"], f"{order['amount']:.2f} {order['currency']}")
    return "ch_" + hashlib.sha256(idempotency_key.encode()).hexdigest()[:16]


def record_handler(record: SQSRecord, guard: IdempotencyGuard) -> dict[str, Any]:
    """Charge one order."""
    order = record.json_body
    assert guard.key is not None  # a record without an order id fails before its body  # noqa: S101
    return {"order_id": order["order_id"], "charge_id": charge(order, idempotency_key=guard.key)}


def handler(event: SQSEvent, context: Context) -> Any:
    """The Lambda handler (SQS trigger with ReportBatchItemFailures)."""
    return process_partial_response(event, record_handler, processor, context)
