"""Where idempotency records live: the record model, the store contract and its backends.

``persistence`` never imports ``consumer``; bring your own store by implementing
:class:`PersistenceLayer`.
"""

import sys
from typing import TYPE_CHECKING

from persistence._shadowing import imported_on_first_use, refuse_shadowed

# Imported on its own, not by consumer/__init__.py (which has checked this package), check that `consumer` is ours:
# a user's own consumer.py that imports persistence is refused here, by a message that names it.
if "consumer._shadowing" not in sys.modules:
    refuse_shadowed("consumer")

from persistence._async import (
    DEFAULT_STORE_THREADS,
    AsyncPersistenceLayer,
    InlineStore,
    ThreadedStore,
    as_async_store,
    is_async_store,
)
from persistence._attributes import MAX_ITEM_BYTES, AttributeNames, record_size
from persistence._base import PersistenceLayer, TransactionalStore
from persistence._errors import (
    IdempotencyError,
    ItemTooLargeError,
    LockLostError,
    PersistenceLayerError,
    WriteConditionError,
)
from persistence._record import IdempotencyRecord, RecordStatus, new_lease
from persistence.dynamodb import DynamoDBPersistenceLayer
from persistence.memory import InMemoryPersistenceLayer

if TYPE_CHECKING:
    from persistence.sqlite import SQLitePersistenceLayer
    from persistence.urls import DEFAULT_STORE_URL, STORE_URL_VARIABLE, store_from_url

#: Public names whose modules are imported when a name is first used, not with the package (PEP 562): a
#: function on DynamoDB never pays for the SQLite store and ``sqlite3`` in its cold start.
_IMPORTED_ON_FIRST_USE = {
    "SQLitePersistenceLayer": "persistence.sqlite",
    "DEFAULT_STORE_URL": "persistence.urls",
    "STORE_URL_VARIABLE": "persistence.urls",
    "store_from_url": "persistence.urls",
}

__getattr__, __dir__ = imported_on_first_use(globals(), _IMPORTED_ON_FIRST_USE)


__all__ = [
    "DEFAULT_STORE_THREADS",
    "DEFAULT_STORE_URL",
    "MAX_ITEM_BYTES",
    "STORE_URL_VARIABLE",
    "AsyncPersistenceLayer",
    "AttributeNames",
    "DynamoDBPersistenceLayer",
    "IdempotencyError",
    "IdempotencyRecord",
    "InMemoryPersistenceLayer",
    "InlineStore",
    "ItemTooLargeError",
    "LockLostError",
    "PersistenceLayer",
    "PersistenceLayerError",
    "RecordStatus",
    "SQLitePersistenceLayer",
    "ThreadedStore",
    "TransactionalStore",
    "WriteConditionError",
    "as_async_store",
    "is_async_store",
    "new_lease",
    "record_size",
    "store_from_url",
]
