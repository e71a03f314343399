"""Docs: the store's client made with a botocore config of your own."""

import os

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent,
)
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.config import Config

persistence_layer = DynamoDBPersistenceLayer(table_name=os.getenv("IDEMPOTENCY_TABLE", ""), boto_config=Config())
config = IdempotencyConfig(event_key_jmespath="body")


@idempotent(persistence_store=persistence_layer, config=config)
def lambda_handler(event: dict, context: LambdaContext) -> dict:
    return event
