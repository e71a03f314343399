"""A ledger (an account and its transfers) beside the idempotency records, for the tests of ``guard.write``.

One interface on each store that commits writes with the record: ``debit(guard, amount)`` queues the debit and the
transfer it records, ``balance()`` and ``transfers()`` read what the tables hold afterwards.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

START = 100


@dataclass
class DynamoDBLedger:
    """An accounts table (key ``account``) on DynamoDB Local: the account and each transfer are items."""

    store: Any
    table: str

    @classmethod
    def create(cls, server: Any, store: Any) -> DynamoDBLedger:
        table = server.create_table(key_attr="account")
        store.client.put_item(TableName=table, Item={"account": {"S": "a"}, "balance": {"N": str(START)}})
        return cls(store, table)

    def debit_items(self, transfer_id: str, amount: int) -> list[dict[str, Any]]:
        return [
            {
                "Update": {
                    "TableName": self.table,
                    "Key": {"account": {"S": "a"}},
                    "UpdateExpression": "SET balance = balance - :n",
                    "ConditionExpression": "balance >= :n",
                    "ExpressionAttributeValues": {":n": {"N": str(amount)}},
                }
            },
            {
                "Put": {
                    "TableName": self.table,
                    "Item": {"account": {"S": f"transfer#{transfer_id}"}, "amount": {"N": str(amount)}},
                    "ConditionExpression": "attribute_not_exists(account)",
                }
            },
        ]

    def debit(self, guard: Any, amount: int, transfer_id: str = "t-1") -> None:
        for item in self.debit_items(transfer_id, amount):
            guard.write(item)

    def balance(self) -> int:
        item = self.store.client.get_item(TableName=self.table, Key={"account": {"S": "a"}}, ConsistentRead=True)
        return int(item["Item"]["balance"]["N"])

    def transfers(self) -> list[str]:
        items = self.store.client.scan(TableName=self.table, ConsistentRead=True)["Items"]
        return sorted(i["account"]["S"] for i in items if i["account"]["S"].startswith("transfer#"))


@dataclass
class SQLiteLedger:
    """Tables ``accounts`` (``CHECK (balance >= 0)``) and ``transfers`` in the store's own file."""

    store: Any

    @classmethod
    def create(cls, store: Any) -> SQLiteLedger:
        with sqlite3.connect(store.path) as conn:
            conn.execute("CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER NOT NULL CHECK (balance >= 0))")
            conn.execute("CREATE TABLE transfers (id TEXT PRIMARY KEY, amount INTEGER NOT NULL)")
            conn.execute("INSERT INTO accounts VALUES ('a', ?)", (START,))
        conn.close()
        return cls(store)

    def debit(self, guard: Any, amount: int, transfer_id: str = "t-1") -> None:
        guard.write("UPDATE accounts SET balance = balance - ? WHERE id = 'a'", (amount,))
        guard.write("INSERT INTO transfers (id, amount) VALUES (:id, :amount)", {"id": transfer_id, "amount": amount})

    def _read(self, sql: str) -> list[Any]:
        conn = sqlite3.connect(self.store.path)
        try:
            return [row[0] for row in conn.execute(sql)]
        finally:
            conn.close()

    def balance(self) -> int:
        return int(self._read("SELECT balance FROM accounts WHERE id = 'a'")[0])

    def transfers(self) -> list[str]:
        return [f"transfer#{t}" for t in self._read("SELECT id FROM transfers ORDER BY id")]
