"""Orders from a Kafka topic (Amazon MSK or self-managed Apache Kafka), each fulfilled once.

A producer that retries a send after a timeout writes the same order again, at a new offset: the record's own
place in the log (topic, partition, offset, the default key) cannot tell the two apart. This producer stamps each
order with an ``Idempotency-Key`` header, and the key is that header (matched whatever its case). Partitions run in
parallel; within a partition records run in offset order, and a failed record fails the rest of its partition, so
Lambda resumes the partition from it. A retry that landed in another partition of the same batch waits for the
first copy to end, then replays its result (or runs, if it failed): it does not fail its own partition.

Payload: each record's ``value`` is an order, as base64 of JSON, and its ``Idempotency-Key`` header the
producer's key, as Lambda gives headers: a list of byte values (``samples/events/kafka_orders.json``)::

    {"order_id": "o-3001", "items": ["book"]}
"""

from __future__ import annotations

from typing import Any

from consumer import BatchProcessor, EventType, IdempotencyConfig, KafkaRecord, process_partial_response
from persistence import store_from_url
from samples.ledger import Ledger

SAMPLE = "kafka_orders"
config = IdempotencyConfig(key_header="Idempotency-Key")  # a record without the header fails
processor = BatchProcessor(EventType.KAFKA, store=store_from_url(), config=config, max_workers=2)
fulfilment = Ledger()


def record_handler(record: KafkaRecord) -> dict[str, Any]:
    """Fulfil one order (the value is JSON; an order without items fails, and holds its partition back)."""
    order = record.json_value
    if not order.get("items"):
        msg = f"order {order['order_id']} has no items"
        raise ValueError(msg)
    where = f"{record.topic_partition}@{record.offset}"
    fulfilment.record(SAMPLE, order["order_id"], f"{len(order['items'])} items from {where}")
    return {"order_id": order["order_id"], "shipped": len(order["items"])}


def handler(event: dict[str, Any], context: Any) -> Any:
    """The Lambda handler (an MSK or self-managed Kafka trigger with ReportBatchItemFailures)."""
    return process_partial_response(event, record_handler, processor, context)
