"""Clicks from a Kinesis stream, counted once each; users' clicks stay in order, users run in parallel.

Payload: each record's ``kinesis.data`` is a click, as base64 of JSON, and its ``kinesis.partitionKey`` the user
(``samples/events/kinesis_clickstream.json``)::

    {"click_id": "c-001", "page": "/home"}
"""

from __future__ import annotations

from typing import Any

from consumer import BatchProcessor, EventType, IdempotencyConfig, KinesisRecord, process_partial_response
from persistence import store_from_url
from samples.ledger import Ledger

SAMPLE = "kinesis_clickstream"
# Producers retry puts, so the same click can arrive twice with two sequence numbers: key on its click_id.
config = IdempotencyConfig(event_key_jmespath="powertools_json(powertools_base64(kinesis.data)).click_id")
processor = BatchProcessor(EventType.KINESIS, store=store_from_url(), config=config, max_workers=4)
analytics = Ledger()


def record_handler(record: KinesisRecord) -> str:
    """Count one click (the data is base64 JSON; a record that is not fails alone)."""
    click = record.json_data
    analytics.record(SAMPLE, record.sequence_number, f"{record.partition_key} clicked {click['page']}")
    page: str = click["page"]
    return page


def handler(event: dict[str, Any], context: Any) -> Any:
    """The Lambda handler (Kinesis trigger with ReportBatchItemFailures and bisect-on-error)."""
    return process_partial_response(event, record_handler, processor, context)
