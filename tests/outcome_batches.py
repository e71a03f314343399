"""Two batches whose records end in every outcome the library logs, each record carrying a secret in its body.

``run_every_outcome()`` runs an SQS batch (processed, replayed, failed twice, unguarded, committed without its
response twice, in progress elsewhere, lock lost, deferred) and a Kinesis batch (failed, then skipped), with an
injected clock and a Lambda context, and returns the items by identifier. Tests attach their own log handlers
first; the Powertools test runs it in the benchmark's environment (``python -m outcome_batches``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from events import kinesis_record, sqs_event, sqs_record

from consumer import BatchProcessor, EventType, IdempotencyConfig, IdempotencyGuard, Item
from persistence import InMemoryPersistenceLayer

#: In every record's body (and in some results): it must never reach a log line or a metrics document.
SECRET = "card-4111111111111111-cvv-737"
REQUEST_ID = "7d2a6f0e-5b1c-4e8a-9f3d-every-outcome"
FUNCTION_NAME = "orders-consumer"
#: m-nokey runs unguarded (an outcome only ``raise_on_no_idempotency_key=False`` allows; by default it fails).
CONFIG = IdempotencyConfig(event_key_jmespath="powertools_json(body).order_id", raise_on_no_idempotency_key=False)

#: What each record's log record says its outcome is (records that succeed plainly have none).
EXPECTED = {
    "m-fail": "failed",
    "m-badjson": "failed",
    "m-nokey": "unguarded",
    "m-unstorable": "committed_without_response",
    "m-huge": "committed_without_response",
    "m-busy": "in_progress",
    "m-late": "lock_lost",
    "m-deferred": "deferred",
    "k-1": "failed",
    "k-2": "skipped",
}
PLAIN_SUCCESS = ("m-ok", "m-dup")


@dataclass
class FakeClock:
    """Epoch seconds that move only when told to (``fakes.FakeClock``, which needs pytest)."""

    now: float = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class FakeContext:
    """A Lambda context whose remaining time follows ``clock``."""

    remaining_ms: int = 30_000
    clock: FakeClock | None = None
    aws_request_id: str = REQUEST_ID
    function_name: str = FUNCTION_NAME

    def __post_init__(self) -> None:
        self._started = self.clock() if self.clock is not None else 0.0

    def get_remaining_time_in_millis(self) -> int:
        elapsed_ms = 0 if self.clock is None else int((self.clock() - self._started) * 1000)
        return self.remaining_ms - elapsed_ms


def _order(order_id: str | None) -> dict[str, Any]:
    order: dict[str, Any] = {"card": SECRET, "amount": 30}
    if order_id is not None:
        order["order_id"] = order_id
    return order


@dataclass
class EveryOutcome:
    """What the two batches returned, their records by identifier, and the clock they ran on."""

    responses: list[dict[str, Any]]
    items: dict[str, Item]
    clock: FakeClock


def run_every_outcome(**processor_options: Any) -> EveryOutcome:
    """Run both batches through ``BatchProcessor``s built with ``processor_options`` (``metrics``, ``on_outcome``)."""
    clock, store = FakeClock(), InMemoryPersistenceLayer()
    context = FakeContext(remaining_ms=30_000, clock=clock, aws_request_id=REQUEST_ID, function_name=FUNCTION_NAME)
    busy = sqs_record("m-busy", _order("o-busy"))
    holder = IdempotencyGuard(busy, store=store, config=CONFIG, clock=clock, context=FakeContext(300_000))
    holder.__enter__()  # another invocation's live lock

    def handler(record: Any) -> Any:
        order = record.json_body
        match order.get("order_id"):
            case "o-fail":
                raise ValueError("declined by the bank")
            case "o-unstorable":
                return {"card": SECRET, "connection": object()}  # not storable: committed without it
            case "o-huge":
                return SECRET * 20_000  # over 400 KB: committed without it
            case "o-late":
                clock.advance(40)  # past this lock's deadline (30 s left + 1 s grace): a redelivery takes it over
                with IdempotencyGuard(record.raw, store=store, config=CONFIG, clock=clock, context=FakeContext()) as g:
                    g.result = "the redelivery's result"
                return {"card": SECRET}  # refused: LockLostError
        return {"charged": order["amount"], "card": SECRET}

    sqs = sqs_event(
        sqs_record("m-ok", _order("o-ok")),
        sqs_record("m-dup", _order("o-ok")),
        sqs_record("m-fail", _order("o-fail")),
        sqs_record("m-badjson", f"card={SECRET}; not JSON", raw_body=True),
        sqs_record("m-nokey", _order(None)),
        sqs_record("m-unstorable", _order("o-unstorable")),
        sqs_record("m-huge", _order("o-huge")),
        busy,
        sqs_record("m-late", _order("o-late")),
        sqs_record("m-deferred", _order("o-deferred")),  # less than the margin is left by now
    )
    sqs_processor = BatchProcessor(EventType.SQS, store=store, config=CONFIG, clock=clock, **processor_options)
    responses = [sqs_processor.process(sqs, handler, context)]
    items = dict(zip([r["messageId"] for r in sqs["Records"]], sqs_processor.items, strict=True))

    def stream_handler(record: Any) -> Any:
        if record.json_data.get("fail"):
            raise RuntimeError("downstream refused the click")
        return "stored"

    kinesis = {
        "Records": [kinesis_record(1, "p", {"card": SECRET, "fail": True}), kinesis_record(2, "p", {"card": SECRET})]
    }
    stream_processor = BatchProcessor(
        EventType.KINESIS, store=store, clock=clock, raise_on_entire_batch_failure=False, **processor_options
    )
    stream_context = FakeContext(aws_request_id=REQUEST_ID, function_name=FUNCTION_NAME)
    responses.append(stream_processor.process(kinesis, stream_handler, stream_context))
    items |= dict(zip(["k-1", "k-2"], stream_processor.items, strict=True))
    return EveryOutcome(responses, items, clock)


def main() -> None:
    """Run both batches and print their responses as one JSON line (for a test in another environment)."""
    print(json.dumps(run_every_outcome().responses))  # noqa: T201 - read by the test that runs this


if __name__ == "__main__":
    main()
