"""Docs, testing: the store's client pointed at DynamoDB Local (the test's own server, not localhost:8000)."""

import os
from dataclasses import dataclass

import app_test_dynamodb_local
import boto3
import pytest


@pytest.fixture
def lambda_context():
    @dataclass
    class LambdaContext:
        function_name: str = "test"
        memory_limit_in_mb: int = 128
        invoked_function_arn: str = "arn:aws:lambda:eu-west-1:123456789012:function:test"
        aws_request_id: str = "da658bd3-2d6f-4e7b-8ec2-937234644fdc"

        def get_remaining_time_in_millis(self) -> int:
            return 5

    return LambdaContext()


def test_idempotent_lambda(lambda_context):
    client = boto3.client("dynamodb", endpoint_url=os.environ["DYNAMODB_LOCAL_URL"])
    app_test_dynamodb_local.persistence_layer.client = client
    # As documented: the app defines lambda_handler, the test calls handler.
    result = app_test_dynamodb_local.handler({"testkey": "testvalue"}, lambda_context)
    assert result["payment_id"] == 12345
