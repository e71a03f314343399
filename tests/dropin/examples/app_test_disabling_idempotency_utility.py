"""Docs, testing: the application under test (idempotency switched off by the test)."""

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    idempotent,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

persistence_layer = DynamoDBPersistenceLayer(table_name="IdempotencyTable")


@idempotent(persistence_store=persistence_layer)
def lambda_handler(event: dict, context: LambdaContext):
    print("expensive operation")  # noqa: T201 - as documented
    return {"payment_id": 12345, "message": "success", "statusCode": 200}
