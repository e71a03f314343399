"""The transactional contract (``persistence.testing.TransactionalContract``) on every store that has it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest

from persistence import DynamoDBPersistenceLayer, IdempotencyRecord, InMemoryPersistenceLayer, SQLitePersistenceLayer
from persistence.testing import TransactionalContract


class MemoryProbe:
    def __init__(self, store: InMemoryPersistenceLayer) -> None:
        self.store = store

    def write(self, tag: str) -> tuple[Any, Any]:
        return tag, None

    def refused(self) -> None:
        return None

    def written(self) -> list[str]:
        return sorted(write for _, write in self.store.writes)


class SQLiteProbe:
    def __init__(self, store: SQLitePersistenceLayer) -> None:
        self.path = store.path
        with sqlite3.connect(self.path) as conn:
            conn.execute("CREATE TABLE marks (tag TEXT NOT NULL)")  # no key: a mark written twice shows twice
        conn.close()

    def write(self, tag: str) -> tuple[Any, Any]:
        return "INSERT INTO marks (tag) VALUES (?)", (tag,)

    def refused(self) -> tuple[Any, Any]:
        return "INSERT INTO marks (tag) VALUES (NULL)", None

    def written(self) -> list[str]:
        conn = sqlite3.connect(self.path)
        try:
            return sorted(tag for (tag,) in conn.execute("SELECT tag FROM marks"))
        finally:
            conn.close()


class DynamoDBProbe:
    def __init__(self, store: DynamoDBPersistenceLayer, table: str) -> None:
        self.client, self.table = store.client, table

    def write(self, tag: str) -> tuple[Any, Any]:
        add = {"TableName": self.table, "Key": {"id": {"S": tag}}, "UpdateExpression": "ADD marks :one"}
        return {"Update": {**add, "ExpressionAttributeValues": {":one": {"N": "1"}}}}, None

    def refused(self) -> tuple[Any, Any]:
        check = {"TableName": self.table, "Key": {"id": {"S": "absent"}}, "ConditionExpression": "attribute_exists(id)"}
        return {"ConditionCheck": check}, None

    def written(self) -> list[str]:
        items = self.client.scan(TableName=self.table, ConsistentRead=True)["Items"]
        return sorted(i["id"]["S"] for i in items for _ in range(int(i["marks"]["N"])))


class TestTransactionalContract(TransactionalContract):
    @pytest.fixture(params=["memory", "sqlite", "dynamodb", "dynamodb-composite"])
    def backend(self, request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Any]:
        if request.param == "memory":
            store = InMemoryPersistenceLayer()
            yield store, MemoryProbe(store)
        elif request.param == "sqlite":
            sqlite_store = SQLitePersistenceLayer(str(tmp_path / "writes.sqlite3"))
            yield sqlite_store, SQLiteProbe(sqlite_store)
            sqlite_store.close()
        else:
            yield self._dynamodb(request)

    @staticmethod
    def _dynamodb(request: pytest.FixtureRequest) -> Any:
        server = request.getfixturevalue("ddb_server")
        options: dict[str, Any] = {}
        if request.param == "dynamodb-composite":
            options = {"sort_key_attr": "sk", "static_pk_value": "idempotency#orders"}
            options["table_name"] = server.create_table(key_attr="id", sort_key_attr="sk")
        else:
            options["table_name"] = server.create_table()
        dynamodb_store = DynamoDBPersistenceLayer(boto3_client=server.client(), **options)
        return dynamodb_store, DynamoDBProbe(dynamodb_store, server.create_table())

    @pytest.fixture
    def store(self, backend: Any) -> Any:
        return backend[0]

    @pytest.fixture
    def write_probe(self, backend: Any) -> Any:
        return backend[1]


def test_the_in_memory_store_keeps_each_write_as_the_body_queued_it():
    # A unit test reads what its handler committed: an item given alone, or with the params it was given.
    store = InMemoryPersistenceLayer()
    held = IdempotencyRecord.in_progress("k", expires_at=2**31, lock_deadline_ms=2**40)
    assert store.acquire(held, 0) is None
    writes: list[Any] = []
    store.queue_write("k", writes, "plain", None)
    store.queue_write("k", writes, "UPDATE accounts SET balance = balance - ?", (30,))
    store.complete_with(held.completed(None, 2**31), writes)
    assert store.writes == [("k", "plain"), ("k", ("UPDATE accounts SET balance = balance - ?", (30,)))]
