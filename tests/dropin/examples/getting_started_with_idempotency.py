"""Docs: getting started. A whole handler made idempotent; the key is the whole event."""

import os
from dataclasses import dataclass, field
from uuid import uuid4

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    idempotent,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

persistence_layer = DynamoDBPersistenceLayer(table_name=os.getenv("IDEMPOTENCY_TABLE", ""))


@dataclass
class Subscription:
    user_id: str
    product_id: str
    payment_id: str = field(default_factory=lambda: str(uuid4()))


class PaymentFailedError(Exception):
    pass


@idempotent(persistence_store=persistence_layer)
def lambda_handler(event: dict, context: LambdaContext):
    try:
        subscription = subscribe(event)
    except Exception as error:
        raise PaymentFailedError(f"could not subscribe: {error}") from error
    return {"payment_id": subscription.payment_id, "message": "success", "statusCode": 200}


def subscribe(event: dict) -> Subscription:
    return Subscription(**event)
