"""An audit trail from a DynamoDB stream: one audit entry per change, in order per item.

Payload: each record's ``dynamodb.Keys`` holds ``account_id``, and its ``NewImage`` (``OldImage`` for a
``REMOVE``) the account, in DynamoDB's JSON (``samples/events/dynamodb_stream_audit.json``)::

    {"account_id": {"S": "acct-1"}, "balance": {"N": "0"}, "owner": {"S": "Ana"}}
"""

from __future__ import annotations

from typing import Any

from consumer import BatchProcessor, DynamoDBStreamRecord, EventType, process_partial_response
from persistence import store_from_url
from samples.ledger import Ledger

SAMPLE = "dynamodb_stream_audit"
processor = BatchProcessor(EventType.DYNAMODB_STREAMS, store=store_from_url())
audit = Ledger()


def record_handler(record: DynamoDBStreamRecord) -> str:
    """Write one audit entry; a change without the image the audit needs fails alone."""
    image = record.old_image if record.event_name == "REMOVE" else record.new_image
    if image is None:
        msg = f"stream record {record.sequence_number}: {record.event_name} without its image"
        raise ValueError(msg)
    entry = f"{record.event_name} {record.keys['account_id']} balance={image.get('balance')}"
    audit.record(SAMPLE, record.sequence_number, entry)
    return entry


def handler(event: dict[str, Any], context: Any) -> Any:
    """The Lambda handler (DynamoDB Streams trigger with ReportBatchItemFailures)."""
    return process_partial_response(event, record_handler, processor, context)
