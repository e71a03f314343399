"""The same handler module written with Powertools for AWS Lambda (Python), as its documentation writes it.

``python powertools.py MESSAGE_ID``: its ``BatchProcessor`` with an ``@idempotent_function`` record handler
on its DynamoDB layer; one SQS record, a first delivery (PutItem, then UpdateItem). See ours.py.
"""

import os
import sys

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)

persistence = DynamoDBPersistenceLayer(table_name=os.environ["COLD_START_TABLE"])
config = IdempotencyConfig(event_key_jmespath="messageId")
processor = BatchProcessor(event_type=EventType.SQS)


@idempotent_function(data_keyword_argument="record", config=config, persistence_store=persistence)
def record_handler(record):
    return {"ok": record.message_id}


def handler(event, context):
    config.register_lambda_context(context)
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)


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
