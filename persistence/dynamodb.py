"""The production store: a DynamoDB table, one conditional write per transition."""

from __future__ import annotations

import itertools
import os
import threading
from typing import TYPE_CHECKING, Any

from persistence._attributes import AttributeNames, check_size, text_size
from persistence._base import ConditionalStore, decode_record, require_stored_status
from persistence._errors import PersistenceLayerError
from persistence._record import MS_PER_SECOND, IdempotencyRecord, RecordStatus

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    import boto3
    from botocore.config import Config
    from mypy_boto3_dynamodb import DynamoDBClient

Item = dict[str, Any]
_CONDITION_FAILED = "ConditionalCheckFailedException"


class _ConditionFailedError(Exception):
    """A conditional write's condition failed; carries the item as it stands (ALL_OLD), empty if none."""

    def __init__(self, item: Item) -> None:
        super().__init__("conditional check failed")
        self.item = item


class DynamoDBPersistenceLayer(ConditionalStore):
    """Records in a DynamoDB table (partition key ``id`` by default, TTL on ``expiration``).

    The boto3 client is created on first use (so importing costs nothing) and shared by all threads.

    Examples:
        >>> from persistence import DynamoDBPersistenceLayer
        >>> store = DynamoDBPersistenceLayer(table_name="IdempotencyTable")
        >>> store.table_name
        'IdempotencyTable'
    """

    def __init__(
        self,
        table_name: str,
        *,
        key_attr: str = "id",
        expiry_attr: str = "expiration",
        in_progress_expiry_attr: str = "in_progress_expiration",
        status_attr: str = "status",
        data_attr: str = "data",
        validation_key_attr: str = "validation",
        lease_attr: str = "lease",
        sort_key_attr: str | None = None,
        static_pk_value: str | None = None,
        boto3_client: DynamoDBClient | None = None,
        boto3_session: boto3.session.Session | None = None,
        boto_config: Config | None = None,
    ) -> None:
        """Configure the store; nothing is sent until the first call.

        Args:
            table_name: The table's name.
            key_attr: Partition key attribute.
            expiry_attr: TTL attribute (epoch seconds).
            in_progress_expiry_attr: Lock deadline attribute (epoch milliseconds).
            status_attr: Status attribute.
            data_attr: Stored result attribute.
            validation_key_attr: Payload-validation hash attribute.
            lease_attr: Fencing token attribute.
            sort_key_attr: Set on a composite-key table: the idempotency key goes here and the partition
                key holds ``static_pk_value``.
            static_pk_value: Partition key value on a composite-key table; defaults to
                ``"idempotency#{AWS_LAMBDA_FUNCTION_NAME}"``.
            boto3_client: A DynamoDB client to use as is.
            boto3_session: A session to create the client from.
            boto_config: A botocore config for the client this store creates.
        """
        if sort_key_attr is not None and sort_key_attr == key_attr:
            # Powertools' words: code may match on them.
            raise ValueError(f"key_attr [{key_attr}] and sort_key_attr [{sort_key_attr}] cannot be the same!")
        self.table_name = table_name
        self.names = AttributeNames(
            key=sort_key_attr or key_attr,
            expires_at=expiry_attr,
            in_progress_expires_at=in_progress_expiry_attr,
            status=status_attr,
            response=data_attr,
            payload_hash=validation_key_attr,
            lease=lease_attr,
        )
        self.partition_key_attr = key_attr
        self.sort_key_attr = sort_key_attr
        default_pk = f"idempotency#{os.environ.get('AWS_LAMBDA_FUNCTION_NAME', '')}"
        self.static_pk_value = static_pk_value or default_pk
        self._client = boto3_client
        self._session = boto3_session
        self._config = boto_config
        self._client_lock = threading.Lock()

    @property
    def client(self) -> DynamoDBClient:
        """The boto3 DynamoDB client (created once, thread-safe)."""
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    self._client = self._create_client()
        return self._client

    @client.setter
    def client(self, client: DynamoDBClient) -> None:
        """Use ``client`` from now on (Powertools' tests point ``persistence_layer.client`` at DynamoDB Local)."""
        with self._client_lock:
            self._client = client

    def _create_client(self) -> DynamoDBClient:
        import boto3  # noqa: PLC0415 - imported on first use to keep cold starts short
        from botocore.config import Config  # noqa: PLC0415

        session = self._session or boto3.session.Session()
        config = self._config or Config(retries={"mode": "standard"})
        return session.client("dynamodb", config=config)

    # -- item mapping -------------------------------------------------------------------------------

    def _key(self, key: str) -> Item:
        if self.sort_key_attr is None:
            return {self.partition_key_attr: {"S": key}}
        return {self.partition_key_attr: {"S": self.static_pk_value}, self.sort_key_attr: {"S": key}}

    def _to_item(self, record: IdempotencyRecord) -> Item:
        n = self.names
        item: Item = {
            **self._key(record.key),
            n.status: {"S": record.status.value},
            n.expires_at: {"N": str(record.expires_at)},
            n.lease: {"S": record.lease},
        }
        optional = {
            n.in_progress_expires_at: ("N", record.in_progress_expires_at),
            n.response: ("S", record.response),
            n.payload_hash: ("S", record.payload_hash),
        }
        item.update({name: {kind: str(v)} for name, (kind, v) in optional.items() if v is not None})
        return item

    def _from_item(self, item: Item) -> IdempotencyRecord:
        n = self.names

        def plain(name: str, kind: str) -> object:
            # The value inside {kind: value}; None when absent; the attribute value as it is when it holds
            # another type, so that decode_record names what it found.
            value = item.get(name)
            return value.get(kind, value) if isinstance(value, dict) else value

        return decode_record(
            key=plain(n.key, "S"),
            status=plain(n.status, "S"),
            expires_at=plain(n.expires_at, "N"),
            in_progress_expires_at=plain(n.in_progress_expires_at, "N"),
            lease=plain(n.lease, "S"),
            response=plain(n.response, "S"),
            payload_hash=plain(n.payload_hash, "S"),
        )

    def _check_size(self, record: IdempotencyRecord) -> None:
        extra = (
            0 if self.sort_key_attr is None else text_size(self.partition_key_attr) + text_size(self.static_pk_value)
        )
        check_size(record, self.names, extra_bytes=extra)

    # -- requests -----------------------------------------------------------------------------------

    def _send(self, operation: str, key: str | None, **request: Any) -> Item:
        """Send one request; a store failure becomes ``PersistenceLayerError`` naming the key."""
        from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415 - lazy, see _create_client

        try:
            response: Item = getattr(self.client, operation)(TableName=self.table_name, **request)
        except ClientError as e:
            if "ConditionExpression" in request and e.response.get("Error", {}).get("Code") == _CONDITION_FAILED:
                raise _ConditionFailedError(e.response.get("Item") or {}) from e  # type: ignore[arg-type]
            raise PersistenceLayerError(f"DynamoDB {operation} failed for {key!r}: {e}", key=key) from e
        except (BotoCoreError, UnicodeError) as e:
            # Text goes out as ASCII JSON (a lone surrogate as its \\u escape, which DynamoDB Local stores and
            # returns as it is); an answer that is not UTF-8 makes botocore raise UnicodeDecodeError.
            raise PersistenceLayerError(f"DynamoDB {operation} failed for {key!r}: {e}", key=key) from e
        return response

    def _write(self, operation: str, key: str, **request: Any) -> Item | None:
        """Send one conditional write. Return ``None`` on success, the current item when the condition failed."""
        try:
            self._send(operation, key, ReturnValuesOnConditionCheckFailure="ALL_OLD", **request)
        except _ConditionFailedError as failed:
            return failed.item
        return None

    def _existing(self, item: Item) -> IdempotencyRecord | None:
        # DynamoDB returns the blocking item with the failure; an empty one means it is gone.
        return self._from_item(item) if item else None

    def _acquire(self, record: IdempotencyRecord, now_ms: int) -> IdempotencyRecord | None:
        """One PutItem."""
        self._check_size(record)
        n = self.names
        # PutItem(IN_PROGRESS, new lease)
        #   IF attribute_not_exists(key)                                   -- never seen
        #   OR expires_at < now_s                                          -- expired
        #   OR (status = IN_PROGRESS AND in_progress_expires_at < now_ms)  -- holder missed its deadline
        #   ELSE ConditionalCheckFailed + ALL_OLD  ─> the blocking record, same round trip
        blocking_item = self._write(
            "put_item",
            record.key,
            Item=self._to_item(record),
            ConditionExpression="attribute_not_exists(#k) OR #e < :now_s OR (#s = :ip AND #d < :now_ms)",
            ExpressionAttributeNames={"#k": n.key, "#e": n.expires_at, "#s": n.status, "#d": n.in_progress_expires_at},
            ExpressionAttributeValues={
                ":now_s": {"N": str(now_ms // MS_PER_SECOND)},
                ":now_ms": {"N": str(now_ms)},
                ":ip": {"S": RecordStatus.IN_PROGRESS.value},
            },
        )
        if blocking_item is None:
            return record
        if blocking_item:
            return self._from_item(blocking_item)
        # The condition failed but no item came back (a server without ReturnValuesOnConditionCheckFailure):
        # read it; if it vanished meanwhile, the key is free again.
        existing = self.get(record.key)
        return existing if existing is not None else self._acquire(record, now_ms)

    def _commit_update(self, record: IdempotencyRecord) -> Item:
        """The commit's UpdateItem, as ``update_item`` takes it and as one ``TransactWriteItems`` action."""
        n = self.names
        names = {"#s": n.status, "#e": n.expires_at, "#d": n.in_progress_expires_at, "#l": n.lease}
        values: Item = {
            ":done": {"S": RecordStatus.COMPLETE.value},
            ":exp": {"N": str(record.expires_at)},
            ":lease": {"S": record.lease},
            ":ip": {"S": RecordStatus.IN_PROGRESS.value},
        }
        sets, removes = ["#s = :done", "#e = :exp"], ["#d"]
        for alias, name, value in (("#r", n.response, record.response), ("#v", n.payload_hash, record.payload_hash)):
            names[alias] = name
            if value is None:
                removes.append(alias)
            else:
                sets.append(f"{alias} = :{alias[1:]}")
                values[f":{alias[1:]}"] = {"S": value}
        # UpdateItem SET COMPLETE, response, expiry  IF lease = :mine AND status = IN_PROGRESS
        #   ELSE ConditionalCheckFailed + ALL_OLD  ─> ours and COMPLETE already (a retry): done
        #                                          ─> otherwise LockLostError(existing_record)
        return {
            "Key": self._key(record.key),
            "UpdateExpression": f"SET {', '.join(sets)} REMOVE {', '.join(removes)}",
            "ConditionExpression": "#l = :lease AND #s = :ip",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }

    def queue_write(self, key: str, writes: list[Any], item: Any, params: Any) -> None:
        """See :meth:`persistence.TransactionalStore.queue_write`: ``item`` is one ``TransactWriteItems`` entry.

        ``{"Put": ...}``, ``{"Update": ...}``, ``{"Delete": ...}`` or ``{"ConditionCheck": ...}`` in the boto3
        client's shape (typed attribute values, its own ``TableName``: any table the client reaches).
        """
        if params is not None:
            msg = "a DynamoDB write takes no params: pass one TransactWriteItems entry (its values inside it)"
            raise TypeError(msg)
        from persistence._dynamodb_writes import check_write  # noqa: PLC0415 - only a body's writes pay its import

        writes.append((item, check_write(item, writes, (self.table_name, self._key(key)))))

    def complete_with(self, record: IdempotencyRecord, writes: Sequence[Any]) -> None:
        """See :meth:`persistence.TransactionalStore.complete_with`. One TransactWriteItems, the commit last.

        The request carries a ``ClientRequestToken`` made of the key and the lease: botocore's retry of a
        commit whose answer was lost is applied once.
        """
        self._commit(record, writes)

    def _complete(self, record: IdempotencyRecord, writes: Sequence[Any] | None) -> IdempotencyRecord | None:
        """One UpdateItem; with the body's writes, one TransactWriteItems (the commit last)."""
        self._check_size(record)
        update = self._commit_update(record)
        if writes is None:  # complete
            refused = self._write("update_item", record.key, **update)
            return record if refused is None else self._existing(refused)
        from persistence._dynamodb_writes import transact  # noqa: PLC0415 - imported by queue_write already

        own = {"TableName": self.table_name, **update, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
        refused = transact(self.client, record, [*(item for item, _ in writes), {"Update": own}])
        if refused is None:
            return record
        # ALL_OLD came back with the cancellation; without it (another server), read the record.
        return self._existing(refused) if refused else self.get(record.key)

    def _release(self, record: IdempotencyRecord) -> IdempotencyRecord | None:
        """One DeleteItem."""
        # DeleteItem  IF status = :as_read AND lease = :as_read
        #   ELSE ConditionalCheckFailed + ALL_OLD ─> empty: gone already (a retry, an operator's delete): released
        #                                         ─> otherwise LockLostError(existing_record): committed
        #                                            meanwhile (same lease, COMPLETE), taken over (another lease)
        refused = self._write(
            "delete_item",
            record.key,
            Key=self._key(record.key),
            ConditionExpression="#s = :status AND #l = :lease",
            ExpressionAttributeNames={"#s": self.names.status, "#l": self.names.lease},
            ExpressionAttributeValues={":status": {"S": record.status.value}, ":lease": {"S": record.lease}},
        )
        return None if refused is None else self._existing(refused)

    def get(self, key: str) -> IdempotencyRecord | None:
        """See :meth:`persistence.PersistenceLayer.get`. One consistent GetItem."""
        item = self._send("get_item", key, Key=self._key(key), ConsistentRead=True).get("Item")
        return None if item is None else self._from_item(item)

    def delete(self, key: str) -> bool:
        """See :meth:`persistence.PersistenceLayer.delete`. One DeleteItem."""
        return "Attributes" in self._send("delete_item", key, Key=self._key(key), ReturnValues="ALL_OLD")

    def scan(self, status: RecordStatus | None = None, limit: int | None = None) -> Iterator[IdempotencyRecord]:
        """See :meth:`persistence.PersistenceLayer.scan`. Paginates; a filter applies after each page."""
        require_stored_status(status)
        filters, names, values = [], {}, {}
        if status is not None:
            filters.append("#s = :s")
            names["#s"], values[":s"] = self.names.status, {"S": status.value}
        if self.sort_key_attr is not None:
            filters.append("#pk = :pk")
            names["#pk"], values[":pk"] = self.partition_key_attr, {"S": self.static_pk_value}
        request: Item = {}
        if filters:
            request = {"FilterExpression": " AND ".join(filters), "ExpressionAttributeNames": names,
                       "ExpressionAttributeValues": values}  # fmt: skip
        return itertools.islice(self._scan_pages(request), limit)

    def _scan_pages(self, request: Item) -> Iterator[IdempotencyRecord]:
        while True:
            page = self._send("scan", None, **request)
            yield from map(self._from_item, page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
