"""Docs: a store of your own, subclassing the persistence layer's base class and its private hooks."""

import os
import time

import boto3
from aws_lambda_powertools.utilities.idempotency import BasePersistenceLayer
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyItemAlreadyExistsError,
    IdempotencyItemNotFoundError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.base import DataRecord


class TablePersistenceLayer(BasePersistenceLayer):
    def __init__(self, table_name: str, key_attr: str = "id", expiry_attr: str = "expiration") -> None:
        self.table = boto3.session.Session().resource("dynamodb").Table(table_name)
        self.key_attr, self.expiry_attr = key_attr, expiry_attr
        super().__init__()

    def _get_record(self, idempotency_key) -> DataRecord:
        item = self.table.get_item(Key={self.key_attr: idempotency_key}, ConsistentRead=True).get("Item")
        if item is None:
            raise IdempotencyItemNotFoundError
        return DataRecord(
            idempotency_key=item[self.key_attr],
            status=item["status"],
            expiry_timestamp=item[self.expiry_attr],
            response_data=item.get("data", ""),
        )

    def _put_record(self, data_record: DataRecord) -> None:
        now = int(time.time())
        item = {self.key_attr: data_record.idempotency_key, self.expiry_attr: data_record.expiry_timestamp}
        item["status"] = data_record.status
        try:
            self.table.put_item(
                Item=item,
                ConditionExpression=f"attribute_not_exists({self.key_attr}) OR {self.expiry_attr} < :now",
                ExpressionAttributeValues={":now": now},
            )
        except self.table.meta.client.exceptions.ConditionalCheckFailedException as error:
            raise IdempotencyItemAlreadyExistsError from error

    def _update_record(self, data_record: DataRecord) -> None:
        self.table.update_item(
            Key={self.key_attr: data_record.idempotency_key},
            UpdateExpression="SET #d = :d, #e = :e, #s = :s",
            ExpressionAttributeNames={"#d": "data", "#e": self.expiry_attr, "#s": "status"},
            ExpressionAttributeValues={
                ":d": data_record.response_data,
                ":e": data_record.expiry_timestamp,
                ":s": data_record.status,
            },
        )

    def _delete_record(self, data_record: DataRecord) -> None:
        self.table.delete_item(Key={self.key_attr: data_record.idempotency_key})


persistence_layer = TablePersistenceLayer(table_name=os.getenv("IDEMPOTENCY_TABLE", ""))
