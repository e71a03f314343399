"""An EventBridge rule target: one event per invocation, keyed by the event's ``id``.

EventBridge retries a target on failure and may deliver an event twice; the confirmation email goes out
once, and a retry returns the first invocation's result.

Payload: the event's ``detail`` is a booking, its ``id`` the key (``samples/events/eventbridge_target.json``)::

    {"booking_id": "b-501", "email": "ana@example.com", "seat": "12A"}
"""

from __future__ import annotations

from typing import Any

from consumer import idempotent
from persistence import store_from_url
from samples.ledger import Ledger

SAMPLE = "eventbridge_target"
mailer = Ledger()


@idempotent(store=store_from_url())
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:  # noqa: ARG001 - Lambda's signature
    """Send the booking confirmation."""
    booking = event["detail"]
    if "email" not in booking:
        msg = f"event {event['id']}: booking {booking.get('booking_id')} has no email"
        raise ValueError(msg)
    mailer.record(SAMPLE, event["id"], f"confirmation for {booking['booking_id']} to {booking['email']}")
    return {"booking_id": booking["booking_id"], "confirmation": "sent"}
