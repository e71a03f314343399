"""A Lambda handler module written with idempotent-consumer, run once as a whole process.

``python ours.py MESSAGE_ID``: imports what the handler needs, builds the store and the processor at module
level (as a function's code does on a cold start), and processes one SQS record: a first delivery, so the
store sends its two requests (PutItem, then UpdateItem). DynamoDB is found through the environment
(``AWS_ENDPOINT_URL_DYNAMODB``, the region and credentials); the table is ``COLD_START_TABLE``.
"""

import os
import sys

from consumer import BatchProcessor, EventType, IdempotencyConfig, process_partial_response
from persistence import DynamoDBPersistenceLayer

store = DynamoDBPersistenceLayer(table_name=os.environ["COLD_START_TABLE"])
processor = BatchProcessor(EventType.SQS, store=store, config=IdempotencyConfig(event_key_jmespath="messageId"))


def record_handler(record):
    return {"ok": record.message_id}


def handler(event, context):
    return process_partial_response(event, record_handler, processor, context)


class Context:
    """The parts of a Lambda context the libraries read."""

    function_name = "cold-start"
    aws_request_id = "00000000-0000-0000-0000-000000000000"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:cold-start"
    memory_limit_in_mb = 128

    def get_remaining_time_in_millis(self):
        return 300_000


if __name__ == "__main__":
    event = {"Records": [{"messageId": sys.argv[1], "body": '{"order_id": 1}', "eventSource": "aws:sqs",
                          "receiptHandle": "AQEB", "attributes": {}, "messageAttributes": {}}]}  # fmt: skip
    response = handler(event, Context())
    print("responded", flush=True)  # the parent's clock reads the response here; the interpreter's exit follows
    if response["batchItemFailures"]:
        sys.exit(f"the record failed: {response}")
