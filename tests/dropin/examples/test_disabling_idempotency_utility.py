"""Docs, testing: POWERTOOLS_IDEMPOTENCY_DISABLED makes the handler run without its store."""

from dataclasses import dataclass

import app_test_disabling_idempotency_utility
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


def test_idempotent_lambda_handler(monkeypatch, lambda_context):
    monkeypatch.setenv("POWERTOOLS_IDEMPOTENCY_DISABLED", 1)
    assert app_test_disabling_idempotency_utility.lambda_handler({}, lambda_context)
