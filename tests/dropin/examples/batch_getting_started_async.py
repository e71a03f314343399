"""Batch docs: async record handlers awaiting an HTTP call; the Lambda handler returns the response directly."""

import httpx
from aws_lambda_powertools.utilities.batch import (
    AsyncBatchProcessor,
    EventType,
    async_process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

processor = AsyncBatchProcessor(event_type=EventType.SQS)


async def async_record_handler(record: SQSRecord):
    async with httpx.AsyncClient() as client:
        response = await client.get("https://httpbin.org/get")
    return response.status_code


def lambda_handler(event, context: LambdaContext):
    return async_process_partial_response(
        event=event, record_handler=async_record_handler, processor=processor, context=context
    )
