"""Docs: payload validation. A second event with the key of the first but another amount is refused."""

import os
from dataclasses import dataclass, field
from uuid import uuid4

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyValidationError
from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()
persistence_layer = DynamoDBPersistenceLayer(table_name=os.getenv("IDEMPOTENCY_TABLE", ""))
config = IdempotencyConfig(event_key_jmespath='["user_id", "product_id"]', payload_validation_jmespath="amount")


@dataclass
class Charge:
    user_id: str
    product_id: str
    charge_type: str
    amount: int
    payment_id: str = field(default_factory=lambda: str(uuid4()))


class PaymentFailedError(Exception):
    pass


@idempotent(config=config, persistence_store=persistence_layer)
def lambda_handler(event: dict, context: LambdaContext):
    try:
        charge = Charge(**event)
    except IdempotencyValidationError:
        logger.exception("payload tampering detected")
        return {"message": "try again later", "statusCode": 500}
    except Exception as error:
        raise PaymentFailedError(f"could not charge: {error}") from error
    return {"payment_id": charge.payment_id, "message": "success", "statusCode": 200}
