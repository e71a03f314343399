"""The body's writes on DynamoDB: each checked when queued, all sent with the commit in one TransactWriteItems.

DynamoDB's limits are checked before anything is sent: 100 actions (99 of the body's and the record's own),
no action over the 400 KB item limit, 4 MB in all (the record's own 400 KB kept free), no second action on the
idempotency record. Two actions of the body on one item of another table are refused by DynamoDB itself (a
``ValidationException``): the key schema of another table is not known here.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from persistence._attributes import MAX_ITEM_BYTES, text_size
from persistence._errors import PersistenceLayerError, WriteConditionError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from persistence._record import IdempotencyRecord

Item = dict[str, Any]

#: Actions one ``TransactWriteItems`` takes; one of them is the record's own commit.
MAX_ACTIONS = 100
#: A transaction's total size; the body's writes may use it all but the record's own item limit.
MAX_TRANSACTION_BYTES = 4 * 1024 * 1024
_WRITES_BYTES = MAX_TRANSACTION_BYTES - MAX_ITEM_BYTES
_KINDS = {"Put": "Item", "Update": "Key", "Delete": "Key", "ConditionCheck": "Key"}
_CONDITION_FAILED = "ConditionalCheckFailed"


def _size(value: object) -> int:
    """Bytes ``value`` takes in a request, counted at least as DynamoDB counts them (names and types included)."""
    if isinstance(value, str):
        return text_size(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value)
    if isinstance(value, dict):
        return sum(text_size(str(name)) + _size(v) for name, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return sum(_size(v) for v in value) + 1
    return 8  # a bool or a number given as such: botocore refuses it, or DynamoDB counts it in fewer bytes


def _target(item: Item) -> tuple[str, str] | None:
    """The item an action names by its ``Key`` (table, key), or ``None`` for a ``Put`` (whose key is not known here)."""
    ((kind, action),) = item.items()
    return None if kind == "Put" else (action["TableName"], json.dumps(action["Key"], sort_keys=True))


def check_write(item: object, queued: list[tuple[Item, int]], own: tuple[str, Item]) -> int:
    """Check one more write of the body (the record's own table and key are ``own``); return its size.

    Raises:
        TypeError: ``item`` is not one ``TransactWriteItems`` entry.
        ValueError: It is the 100th action, over 400 KB, past 4 MB with those queued, on the record itself, or
            on an item a queued write names by the same key.
    """
    index, queued_bytes = len(queued), sum(size for _, size in queued)
    kinds = list(item) if isinstance(item, dict) else []
    action = item.get(kinds[0]) if isinstance(item, dict) and len(kinds) == 1 and kinds[0] in _KINDS else None
    if not isinstance(action, dict) or not isinstance(action.get("TableName"), str):
        msg = (
            f"write {index}: a DynamoDB write is one TransactWriteItems entry, {{'Put' | 'Update' | 'Delete' | "
            f"'ConditionCheck': {{'TableName': ..., ...}}}} with typed attribute values; got {type(item).__name__} "
            f"with keys {kinds!r}"
        )
        raise TypeError(msg)
    (kind,) = kinds
    if not isinstance(action.get(_KINDS[kind]), dict):
        msg = f"write {index}: a {kind} needs its {_KINDS[kind]} as a dict of typed attribute values"
        raise TypeError(msg)
    if index + 1 >= MAX_ACTIONS:
        msg = (
            f"write {index}: at most {MAX_ACTIONS - 1} writes commit with a record "
            f"(DynamoDB takes {MAX_ACTIONS} actions, one is the record's)"
        )
        raise ValueError(msg)
    size = _size(action)
    if size > MAX_ITEM_BYTES:
        msg = f"write {index} takes {size} bytes, over DynamoDB's {MAX_ITEM_BYTES}-byte item limit"
        raise ValueError(msg)
    if queued_bytes + size > _WRITES_BYTES:
        msg = (
            f"write {index}: the writes take {queued_bytes + size} bytes, over the {_WRITES_BYTES} a transaction "
            f"leaves them ({MAX_TRANSACTION_BYTES} in all, the record's own item kept free)"
        )
        raise ValueError(msg)
    table, key = own
    target = action[_KINDS[kind]]
    if action["TableName"] == table and all(target.get(name) == value for name, value in key.items()):
        msg = (
            f"write {index} is a {kind} of the idempotency record itself: the commit writes it "
            "(DynamoDB takes one action per item)"
        )
        raise ValueError(msg)
    mine = _target({kind: action})
    twin = next((i for i, (other, _) in enumerate(queued) if mine is not None and _target(other) == mine), None)
    if mine is not None and twin is not None:
        msg = f"write {index} names the item write {twin} names ({mine[0]} {mine[1]}): one action per item"
        raise ValueError(msg)
    return size


def request_token(record: IdempotencyRecord) -> str:
    """The commit's ``ClientRequestToken``: one key and lease, one transaction, however often it is sent."""
    return hashlib.sha256(f"{record.key}\n{record.lease}".encode("utf-8", "surrogatepass")).hexdigest()[:36]


def transact(client: Any, record: IdempotencyRecord, items: Sequence[Item]) -> Item | None:
    """Send ``items`` (the body's writes, then the record's commit) as one idempotent transaction.

    Returns ``None`` when it was applied. When the commit's own condition failed: the record as it stands (empty if
    gone, or if the server returned no item); it may be our commit already (a retry after the token's 10 minutes).

    Raises:
        WriteConditionError: A write's own condition failed.
        PersistenceLayerError: Any other failure (throttling, a transaction conflict, a refused request).
    """
    from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415 - lazy, as the store's client

    try:
        client.transact_write_items(TransactItems=list(items), ClientRequestToken=request_token(record))
    except ClientError as e:
        reasons = e.response.get("CancellationReasons") or []
        if len(reasons) == len(items):
            *theirs, own = reasons
            if own.get("Code") == _CONDITION_FAILED:
                return dict(own.get("Item") or {})
            for index, reason in enumerate(theirs):
                if reason.get("Code") == _CONDITION_FAILED:
                    raise WriteConditionError(
                        key=record.key, index=index, reason=_CONDITION_FAILED, detail=reason.get("Message")
                    ) from e
        msg = f"DynamoDB transact_write_items failed for {record.key!r}: {e}"
        raise PersistenceLayerError(msg, key=record.key) from e
    except (BotoCoreError, UnicodeError) as e:
        msg = f"DynamoDB transact_write_items failed for {record.key!r}: {e}"
        raise PersistenceLayerError(msg, key=record.key) from e
    return None
