"""The floor: a bare boto3 client sending the same two requests for one SQS record, with no library.

``python bare.py MESSAGE_ID``: a conditional PutItem that takes the record IN_PROGRESS, then an UpdateItem
that commits it COMPLETE with the result, as a hand-written handler would. See ours.py.
"""

import json
import os
import sys
import time

import boto3

client = boto3.client("dynamodb")
TABLE = os.environ["COLD_START_TABLE"]


def handler(event, context):
    for record in event["Records"]:
        key = {"id": {"S": f"bare#{record['messageId']}"}}
        now = int(time.time())
        client.put_item(
            TableName=TABLE,
            Item={**key, "status": {"S": "INPROGRESS"}, "expiration": {"N": str(now + 3600)}},
            ConditionExpression="attribute_not_exists(id) OR expiration < :now",
            ExpressionAttributeValues={":now": {"N": str(now)}},
        )
        result = {"ok": record["messageId"]}
        client.update_item(
            TableName=TABLE,
            Key=key,
            UpdateExpression="SET #status = :complete, #data = :data",
            ExpressionAttributeNames={"#status": "status", "#data": "data"},
            ExpressionAttributeValues={":complete": {"S": "COMPLETE"}, ":data": {"S": json.dumps(result)}},
        )
    return {"batchItemFailures": []}


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
