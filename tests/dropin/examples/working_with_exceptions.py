"""Docs: exceptions. A store failure is caught by its Powertools name; an error after the call does not undo it."""

import os

import requests
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyPersistenceLayerError
from aws_lambda_powertools.utilities.typing import LambdaContext

persistence_layer = DynamoDBPersistenceLayer(table_name=os.getenv("IDEMPOTENCY_TABLE", ""))
config = IdempotencyConfig()


@idempotent_function(data_keyword_argument="data", config=config, persistence_store=persistence_layer)
def call_external_service(data: dict):
    response = requests.post("https://jsonplaceholder.typicode.com/comments/", json=data, timeout=5)
    return response.json()


def lambda_handler(event: dict, context: LambdaContext):
    try:
        call_external_service(data=event)
    except IdempotencyPersistenceLayerError as error:
        raise RuntimeError(f"cannot reach the persistence layer: {error}") from error
    raise SyntaxError("an error after the idempotent call")
