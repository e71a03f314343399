"""``make demo``: the SQS payments sample, delivered twice, on the embedded SQLite store.

Run it with ``python -m samples.demo`` from the repository root. It starts from an empty store and an
empty payments ledger under ``.demo/``, so every run tells the same story.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

DEMO_DIR = Path(".demo")
EVENT = Path(__file__).with_name("events") / "sqs_orders.json"


def _setup() -> None:
    shutil.rmtree(DEMO_DIR, ignore_errors=True)
    DEMO_DIR.mkdir()
    os.environ["IDEMPOTENCY_STORE_URL"] = f"sqlite:///{DEMO_DIR / 'idempotency.sqlite3'}"
    os.environ["SAMPLES_LEDGER"] = str(DEMO_DIR / "payments.sqlite3")


def _deliver(number: int, event: Any, sample: ModuleType, context_factory: Callable[[], Any]) -> None:
    print(f"\nDelivery {number}: SQS hands the consumer {len(event['Records'])} messages")
    response = sample.handler(event, context_factory())
    for item in sample.processor.items:
        order = item.record.json_body
        what = f"order {order['order_id']} ({order['amount']:.2f} {order['currency']})"
        outcome = item.outcome.value
        if outcome == "processed":
            print(f"  charged   {what} -> {item.result['charge_id']}")
        elif outcome == "replayed":
            print(f"  replayed  {what} -> {item.result['charge_id']} (the first charge's result; not charged again)")
        else:
            print(f"  FAILED    {what}: {item.error}")
    print(f"  response to Lambda: {json.dumps(response)}")


def main() -> None:
    """Tell the story."""
    _setup()
    logging.getLogger("idempotent_consumer").setLevel(logging.CRITICAL)  # the story below says what failed
    from consumer.local_context import LocalContext  # noqa: PLC0415 - after the store URL is set
    from samples import sqs_orders  # noqa: PLC0415

    event = json.loads(EVENT.read_text())
    source = EVENT.relative_to(EVENT.parents[2])
    print(f"{source}: 5 SQS messages carrying 4 orders; order o-1001 was sent twice by its producer,")
    print("and order o-1003 has a negative amount (a poison message).")
    _deliver(1, event, sqs_orders, LocalContext)
    print("\nNow the whole batch arrives again, as it would after a Lambda timeout or a lost response.")
    _deliver(2, event, sqs_orders, LocalContext)
    charges = sqs_orders.payments.entries(sqs_orders.SAMPLE)
    print(f"\nPayments ledger: {len(charges)} charges for {len({key for key, _ in charges})} orders.")
    for order_id, amount in charges:
        print(f"  {order_id}: {amount}")
    print("Every order was charged exactly once; the poison message stays in batchItemFailures until the")
    print("queue's redrive policy moves it to the dead-letter queue.")


if __name__ == "__main__":
    main()
