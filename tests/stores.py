"""A picklable store factory, so worker processes can build their own store."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import dynamodb_local

from persistence import DynamoDBPersistenceLayer, InMemoryPersistenceLayer, SQLitePersistenceLayer


@dataclass(frozen=True)
class StoreFactory:
    """Builds a store of one backend; picklable, so worker processes can build their own."""

    backend: str
    options: dict[str, Any] = field(default_factory=dict)
    endpoint_url: str | None = None

    def __call__(self) -> Any:
        if self.backend == "memory":
            return _shared_memory_store(self.options["id"])
        if self.backend == "sqlite":
            return SQLitePersistenceLayer(self.options["path"])
        if self.backend == "redis":
            from persistence.redis import RedisPersistenceLayer  # noqa: PLC0415 - the optional store

            store = RedisPersistenceLayer(url=self.options["url"], key_prefix=self.options["key_prefix"])
            _BUILT.append(store)
            return store
        assert self.endpoint_url is not None
        return DynamoDBPersistenceLayer(boto3_client=dynamodb_local.client_for(self.endpoint_url), **self.options)


_MEMORY_STORES: dict[str, InMemoryPersistenceLayer] = {}
_BUILT: list[Any] = []  # stores holding connections, closed after each test


def close_built_stores() -> None:
    """Close the connections of every store built so far in this process (a test's teardown)."""
    while _BUILT:
        _BUILT.pop().close()


def _shared_memory_store(store_id: str) -> InMemoryPersistenceLayer:
    return _MEMORY_STORES.setdefault(store_id, InMemoryPersistenceLayer())
