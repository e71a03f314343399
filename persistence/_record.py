"""The idempotency record and its status."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

from persistence._fields import ByFields

MS_PER_SECOND = 1000


class RecordStatus(str, enum.Enum):
    """Where a record is in its life.

    Only ``IN_PROGRESS`` and ``COMPLETE`` are ever stored. ``EXPIRED`` is derived from the record's
    timestamps by :meth:`IdempotencyRecord.effective_status` (and used as a filter by operators).
    """

    IN_PROGRESS = "IN_PROGRESS"
    COMPLETE = "COMPLETE"
    EXPIRED = "EXPIRED"


#: The stored statuses by plain names, for the per-record path: on Python 3.11 every read of an enum's member off its
#: class (``RecordStatus.COMPLETE``) goes through ``EnumType.__getattr__``'s hook, several times a global's cost.
IN_PROGRESS, COMPLETE = RecordStatus.IN_PROGRESS, RecordStatus.COMPLETE


def new_lease() -> str:
    """Return a fresh fencing token: 128 random bits, as hex (like a uuid4, without building one)."""
    return os.urandom(16).hex()


@dataclasses.dataclass(frozen=True, slots=True, repr=False, eq=False)  # shown, compared, hashed: ByFields
class IdempotencyRecord(ByFields):
    """One key's state in the store.

    Attributes:
        key: ``"{key_prefix}#{hash}"``.
        status: ``IN_PROGRESS`` or ``COMPLETE``.
        expires_at: Epoch seconds after which the record no longer counts (the TTL attribute).
        in_progress_expires_at: Epoch milliseconds: the lock deadline of an ``IN_PROGRESS`` record.
        lease: Fencing token of the holder that wrote the record; new on every acquire.
        response: JSON text of the result (``COMPLETE`` only); ``None`` when it was not stored.
        payload_hash: Hash of the payload-validation selection, if validation is configured.

    A response hook written for Powertools reads it by its ``DataRecord`` names too: ``idempotency_key``,
    ``expiry_timestamp``, ``in_progress_expiry_timestamp`` and ``get_expiration_datetime()`` (``status`` is ours:
    ``RecordStatus.COMPLETE``, not the text ``"COMPLETED"``). The record a hook is handed also has ``response_data``
    and ``response_json_as_dict()``, the response as plain JSON: ``response`` is our encoding of it, which only
    the consumer package decodes.
    """

    key: str
    status: RecordStatus
    expires_at: int
    in_progress_expires_at: int | None = None
    lease: str = ""
    response: str | None = None
    payload_hash: str | None = None

    @classmethod
    def in_progress(
        cls,
        key: str,
        *,
        expires_at: int,
        lock_deadline_ms: int,
        payload_hash: str | None = None,
    ) -> IdempotencyRecord:
        """Build the record an acquire writes, with a new lease.

        The record's ``expires_at`` is never earlier than its lock deadline: otherwise a short expiry
        window would let a second invocation take over a lock that is still live.

        Args:
            key: The idempotency key.
            expires_at: Epoch seconds when the record expires (``now + expires_after_seconds``).
            lock_deadline_ms: Epoch milliseconds when the lock may be taken over.
            payload_hash: Hash of the payload-validation selection, if any.
        """
        build = new_record if cls is IdempotencyRecord else cls  # a subclass: its own __init__
        return in_progress_record(key, expires_at, lock_deadline_ms, payload_hash, build)

    def is_expired(self, now_ms: int) -> bool:
        """Whether the expiry window has passed (``expires_at < now``, in seconds)."""
        return self.expires_at < now_ms // MS_PER_SECOND

    def is_lock_expired(self, now_ms: int) -> bool:
        """Whether this is an ``IN_PROGRESS`` record whose lock deadline has passed."""
        deadline = self.in_progress_expires_at
        return self.status is RecordStatus.IN_PROGRESS and deadline is not None and deadline < now_ms

    def can_be_acquired(self, now_ms: int) -> bool:
        """Whether an acquire at ``now_ms`` may overwrite this record (the acquire condition)."""
        return self.is_expired(now_ms) or self.is_lock_expired(now_ms)

    def completed(self, response: str | None, expires_at: int) -> IdempotencyRecord:
        """The ``COMPLETE`` record the holder of this one commits (same key, lease and payload hash)."""
        return new_record(self.key, COMPLETE, expires_at, None, self.lease, response, self.payload_hash)

    def effective_status(self, now_ms: int) -> RecordStatus:
        """The status with expiry applied: ``EXPIRED`` once ``expires_at`` has passed."""
        return RecordStatus.EXPIRED if self.is_expired(now_ms) else self.status

    # Powertools' DataRecord names, read-only, for response hooks written for it.

    @property
    def idempotency_key(self) -> str:
        """Powertools' name of :attr:`key`."""
        return self.key

    @property
    def expiry_timestamp(self) -> int:
        """Powertools' name of :attr:`expires_at`."""
        return self.expires_at

    @property
    def in_progress_expiry_timestamp(self) -> int | None:
        """Powertools' name of :attr:`in_progress_expires_at`."""
        return self.in_progress_expires_at

    def get_expiration_datetime(self) -> dt.datetime:
        """When the record expires, as Powertools gives it: a naive datetime in local time."""
        return dt.datetime.fromtimestamp(self.expires_at)  # noqa: DTZ006 - Powertools' value, naive as there


_new = object.__new__


class _Draft(ByFields):  # the record's base: one layout
    """A record being built: the record's slots, in its order, on a class that sets them as any class does.

    A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (its own ``__setattr__``
    refuses), which costs several times a plain attribute store. A draft is filled with plain stores, then becomes
    the record by class assignment: Python allows it between classes of one layout (the same base and slots, no
    ``__dict__``), and the object is then exactly what ``IdempotencyRecord(...)`` builds, and as frozen.
    """

    __slots__ = tuple(field.name for field in dataclasses.fields(IdempotencyRecord))
    key: str
    status: RecordStatus
    expires_at: int
    in_progress_expires_at: int | None
    lease: str
    response: str | None
    payload_hash: str | None


def new_record(  # noqa: PLR0917 - one argument per field, in the order of the fields
    key: str,
    status: RecordStatus,
    expires_at: int,
    in_progress_expires_at: int | None,
    lease: str,
    response: str | None,
    payload_hash: str | None,
) -> IdempotencyRecord:
    """``IdempotencyRecord(key, status, ...)``: the same record (equal, same hash), built at a fraction of the cost.

    Every record runs two of these (its ``IN_PROGRESS`` and its ``COMPLETE`` record): see :class:`_Draft`. Like
    ``__init__``, it checks no value.
    """
    record = _new(_Draft)
    record.key = key
    record.status = status
    record.expires_at = expires_at
    record.in_progress_expires_at = in_progress_expires_at
    record.lease = lease
    record.response = response
    record.payload_hash = payload_hash
    record.__class__ = IdempotencyRecord  # type: ignore[assignment]  # the draft's layout is the record's
    return record  # type: ignore[return-value]  # now an IdempotencyRecord


def in_progress_record(
    key: str,
    expires_at: int,
    lock_deadline_ms: int,
    payload_hash: str | None,
    build: Callable[..., IdempotencyRecord] = new_record,
) -> IdempotencyRecord:
    """:meth:`IdempotencyRecord.in_progress`, called by position (the guard's per-record call: a class method's call
    by keyword costs a few times more); ``build`` makes it (a subclass's ``in_progress``: the subclass)."""  # noqa: D205, D209 - one sentence
    deadline_s = -(-lock_deadline_ms // MS_PER_SECOND)  # ceiling division
    expires_at = expires_at if expires_at >= deadline_s else deadline_s  # noqa: FURB136 - max() costs several times it
    return build(key, IN_PROGRESS, expires_at, lock_deadline_ms, new_lease(), None, payload_hash)
