"""Batch docs, testing: the partial response, and the processor's successes and failures inspected."""

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from batch_getting_started_with_test_app import lambda_handler, processor


@pytest.fixture
def lambda_context():
    @dataclass
    class LambdaContext:
        function_name: str = "test"
        memory_limit_in_mb: int = 128
        invoked_function_arn: str = "arn:aws:lambda:eu-west-1:123456789012:function:test"
        aws_request_id: str = "da658bd3-2d6f-4e7b-8ec2-937234644fdc"

    return LambdaContext()


@pytest.fixture
def sqs_event():
    with Path("events/sqs_event.json").open() as file:
        return json.load(file)


def test_app_batch_partial_response(sqs_event, lambda_context):
    failed = sqs_event["Records"][1]
    assert lambda_handler(sqs_event, lambda_context) == {"batchItemFailures": [{"itemIdentifier": failed["messageId"]}]}
    assert len(processor.fail_messages) == 1
    assert processor.success_messages[0] == sqs_event["Records"][0]
