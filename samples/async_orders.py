"""Stock reservations from an SQS queue, with an ``async def`` record handler: records run concurrently.

Each order message reserves its items at the warehouse's HTTP API once, however often SQS delivers it.
The record handler awaits the downstream call (here ``asyncio.sleep`` stands for an ``httpx.AsyncClient``
or ``aiohttp`` request) and passes the idempotency key along, as an ``Idempotency-Key`` header would.
:class:`~consumer.AsyncBatchProcessor` runs up to ``max_concurrency`` records at once, each in its own
guard; a message delivered twice in one batch runs once and replays the second time. The store is reached
without blocking the loop (DynamoDB and SQLite in a thread pool).

The Lambda Python runtime calls a plain function, so the entry point is a sync ``handler``:
``async_process_partial_response`` called there runs the batch on a new event loop. Run it locally on the
embedded SQLite store, twice (the second delivery replays every record; the poison record is reported failed
both times)::

    idempotent-consumer invoke samples.async_orders:handler --event samples/events/async_orders.json --repeat 2

The store is the one ``IDEMPOTENCY_STORE_URL`` names (``--store`` sets it), as in every sample; the
reservations land in the samples' ledger (``$SAMPLES_LEDGER``).

Payload: each message's ``body`` is an order, as a JSON string (``samples/events/async_orders.json``)::

    {"order_id": "o-2001", "sku": "MUG-RED", "quantity": 2}
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import TYPE_CHECKING, Any

from consumer import (
    AsyncBatchProcessor,
    EventType,
    IdempotencyConfig,
    IdempotencyGuard,
    SQSRecord,
    async_process_partial_response,
)
from persistence import store_from_url
from samples.ledger import Ledger

if TYPE_CHECKING:
    from aws_lambda_typing.context import Context
    from aws_lambda_typing.events import SQSEvent

SAMPLE = "async_orders"
#: How long the stand-in warehouse API takes to answer.
DOWNSTREAM_LATENCY_S = 0.05
# The key is the SQS messageId (the default for SQS): a redelivered message keeps its id.
config = IdempotencyConfig()
processor = AsyncBatchProcessor(EventType.SQS, store=store_from_url(), config=config, max_concurrency=5)
warehouse = Ledger()


async def reserve(order: dict[str, Any], idempotency_key: str) -> str:
    """The warehouse API: reserve the order's items once, return the reservation id."""
    await asyncio.sleep(DOWNSTREAM_LATENCY_S)  # e.g. await client.post(url, json=order, headers={...: key})
    if order["quantity"] <= 0:  # the API answers 422
        msg = f"order {order['order_id']}: quantity must be positive, got {order['quantity']}"
        raise ValueError(msg)
    warehouse.record(SAMPLE, order["order_id"], f"{order['quantity']} x {order['sku']} (key {idempotency_key})")
    return "rsv_" + hashlib.sha256(idempotency_key.encode()).hexdigest()[:16]


async def record_handler(record: SQSRecord, guard: IdempotencyGuard) -> dict[str, Any]:
    """Reserve one order's items."""
    order = record.json_body
    assert guard.key is not None  # a record without a key fails before its body  # noqa: S101
    return {"order_id": order["order_id"], "reservation_id": await reserve(order, idempotency_key=guard.key)}


def handler(event: SQSEvent, context: Context) -> Any:
    """The Lambda handler (SQS trigger with ReportBatchItemFailures): one event loop per invocation."""
    return async_process_partial_response(event, record_handler, processor, context)
