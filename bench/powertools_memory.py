"""An in-memory persistence layer for Powertools, with the same conditional semantics as its DynamoDB
layer, so the overhead scenario compares both libraries on equal stores.
"""

from __future__ import annotations

import datetime as dt
import threading
import time

from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyItemAlreadyExistsError,
    IdempotencyItemNotFoundError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer, DataRecord


class PowertoolsMemoryLayer(BasePersistenceLayer):
    """Records in a dict; put fails like DynamoDB's conditional put, returning the old record."""

    def __init__(self) -> None:
        super().__init__()
        self.records: dict[str, DataRecord] = {}
        self.lock = threading.Lock()

    def _get_record(self, idempotency_key: str) -> DataRecord:
        try:
            return self.records[idempotency_key]
        except KeyError as e:
            raise IdempotencyItemNotFoundError from e

    def _put_record(self, data_record: DataRecord) -> None:
        now = dt.datetime.now().timestamp()  # noqa: DTZ005 - as Powertools' DynamoDB layer does
        with self.lock:
            old = self.records.get(data_record.idempotency_key)
            if old is not None:
                expired = old.expiry_timestamp is not None and old.expiry_timestamp < int(now)
                lock_expired = (
                    old.status == "INPROGRESS"
                    and old.in_progress_expiry_timestamp is not None
                    and old.in_progress_expiry_timestamp < int(now * 1000)
                )
                if not (expired or lock_expired):
                    raise IdempotencyItemAlreadyExistsError(old_data_record=old)
            self.records[data_record.idempotency_key] = data_record

    def _update_record(self, data_record: DataRecord) -> None:
        with self.lock:
            self.records[data_record.idempotency_key] = data_record

    def _delete_record(self, data_record: DataRecord) -> None:
        with self.lock:
            self.records.pop(data_record.idempotency_key, None)


class SlowPowertoolsMemoryLayer(PowertoolsMemoryLayer):
    """Every store call waits ``delay_s`` (blocking, as boto3 does), then answers like the in-memory layer."""

    def __init__(self, delay_s: float) -> None:
        super().__init__()
        self.delay_s = delay_s
        self.calls = 0

    def _wait(self) -> None:
        self.calls += 1
        time.sleep(self.delay_s)

    def _get_record(self, idempotency_key: str) -> DataRecord:
        self._wait()
        return super()._get_record(idempotency_key)

    def _put_record(self, data_record: DataRecord) -> None:
        self._wait()
        super()._put_record(data_record)

    def _update_record(self, data_record: DataRecord) -> None:
        self._wait()
        super()._update_record(data_record)

    def _delete_record(self, data_record: DataRecord) -> None:
        self._wait()
        super()._delete_record(data_record)
