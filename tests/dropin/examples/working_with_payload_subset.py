"""Docs: the key is a subset of a JSON body (an API Gateway event), selected with powertools_json."""

import json
import os
from dataclasses import dataclass, field
from uuid import uuid4

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

persistence_layer = DynamoDBPersistenceLayer(table_name=os.getenv("IDEMPOTENCY_TABLE", ""))
config = IdempotencyConfig(event_key_jmespath='powertools_json(body).["user_id", "product_id"]')


@dataclass
class Subscription:
    user_id: str
    product_id: str
    payment_id: str = field(default_factory=lambda: str(uuid4()))


class PaymentFailedError(Exception):
    pass


@idempotent(config=config, persistence_store=persistence_layer)
def lambda_handler(event: dict, context: LambdaContext):
    try:
        subscription = Subscription(**json.loads(event.get("body", "")))
    except Exception as error:
        raise PaymentFailedError(f"could not subscribe: {error}") from error
    return {"payment_id": subscription.payment_id, "message": "success", "statusCode": 200}
