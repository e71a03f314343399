"""Account movements from an SQS FIFO queue: each account (message group) is applied in order.

After a failure only the rest of that account's messages are reported failed (``skip_group_on_error``);
other accounts go on. Balances are applied once each, whatever the redeliveries.

Payload: each message's ``body`` is a movement, as a JSON string, and its ``attributes.MessageGroupId`` the
account (``samples/events/sqs_fifo.json``)::

    {"kind": "credit", "amount": 100}
"""

from __future__ import annotations

from typing import Any

from consumer import BatchProcessor, EventType, SQSRecord, process_partial_response
from persistence import store_from_url
from samples.ledger import Ledger

SAMPLE = "sqs_fifo"
processor = BatchProcessor(EventType.SQS_FIFO, store=store_from_url(), skip_group_on_error=True)
accounts = Ledger()


def record_handler(record: SQSRecord) -> dict[str, Any]:
    """Apply one movement to its account."""
    movement = record.json_body
    if movement["kind"] not in ("credit", "debit"):
        msg = f"message {record.message_id}: unknown movement kind {movement['kind']!r}"
        raise ValueError(msg)
    accounts.record(SAMPLE, record.message_id, f"{record.message_group_id} {movement['kind']} {movement['amount']}")
    return {"account": record.message_group_id, "applied": movement["amount"]}


def handler(event: dict[str, Any], context: Any) -> Any:
    """The Lambda handler (FIFO SQS trigger with ReportBatchItemFailures)."""
    return process_partial_response(event, record_handler, processor, context)
