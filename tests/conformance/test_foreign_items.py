"""Items this library did not write (another library's status, a missing or non-numeric attribute).

They are written straight into the real table or file, past the store; reading them must raise
``PersistenceLayerError`` naming the key, never a bare ``ValueError`` / ``KeyError`` / ``TypeError``.
"""

from __future__ import annotations

import sqlite3

import pytest
from records import HOUR_S, NOW_MS, NOW_S, done, lock

from persistence import IdempotencyRecord, PersistenceLayerError, RecordStatus
from persistence._base import decode_record

MISSING = object()
# attribute -> value, as (DynamoDB attribute value, SQLite column value); MISSING leaves it out.
FOREIGN = {
    "expired-status": {"status": ({"S": "EXPIRED"}, "EXPIRED")},
    "pending-status": {"status": ({"S": "PENDING"}, "PENDING")},
    "powertools-status": {"status": ({"S": "INPROGRESS"}, "INPROGRESS")},
    "missing-status": {"status": (MISSING, MISSING)},
    "numeric-status": {"status": ({"N": "1"}, 1)},
    "missing-expiry": {"expires_at": (MISSING, MISSING)},
    "non-numeric-expiry": {"expires_at": ({"S": "soon"}, "soon")},
    "fractional-expiry": {"expires_at": ({"N": f"{NOW_S + HOUR_S}.5"}, NOW_S + HOUR_S + 0.5)},
    "non-numeric-lock-deadline": {"in_progress_expires_at": ({"S": "later"}, "later")},
    "lease-not-text": {"lease": ({"N": "7"}, b"7")},  # SQLite turns a number in a TEXT column into text
}
SQLITE_COLUMNS = ("key", "status", "expires_at", "in_progress_expires_at", "lease", "response", "payload_hash")


def write_foreign(store, key: str, case: str) -> None:
    """Write a COMPLETE-looking item for ``key`` with the fields of ``FOREIGN[case]`` replaced, past the store."""
    dynamo = {"status": {"S": "COMPLETE"}, "expires_at": {"N": str(NOW_S + HOUR_S)}, "lease": {"S": "theirs"},
              "response": {"S": "{}"}}  # fmt: skip
    row: dict[str, object] = {"key": key, "status": "COMPLETE", "expires_at": NOW_S + HOUR_S, "lease": "theirs",
                              "response": "{}"}  # fmt: skip
    for field, (dynamo_value, sqlite_value) in FOREIGN[case].items():
        dynamo[field], row[field] = dynamo_value, sqlite_value
    if hasattr(store, "key_prefix"):  # Redis: a hash of text values
        if case == "lease-not-text":
            pytest.skip("Redis stores every value as text: a number is a valid lease")
        fields = {name: str(value) for name, value in row.items() if name != "key" and value is not MISSING}
        store.client.hset(store.key_prefix + key, mapping=fields)
        return
    if hasattr(store, "table_name"):
        item = {getattr(store.names, field): value for field, value in dynamo.items() if value is not MISSING}
        item.update(store._key(key))  # the table's key attributes, as the store lays them out
        store.client.put_item(TableName=store.table_name, Item=item)
        return
    store.get("nothing")  # creates the file and its table
    columns = [c for c in SQLITE_COLUMNS if row.get(c) is not MISSING]
    with sqlite3.connect(store.path) as conn:
        try:
            conn.execute(f"INSERT INTO records ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",  # noqa: S608
                         [row.get(c) for c in columns])  # fmt: skip
        except sqlite3.IntegrityError as e:
            pytest.skip(f"the SQLite schema cannot hold this item: {e}")
    conn.close()


@pytest.fixture
def foreign_store(store):
    if not any(hasattr(store, name) for name in ("table_name", "path", "key_prefix")):
        pytest.skip("the in-memory store holds only records it was given")
    return store


def _assert_names(caught: pytest.ExceptionInfo[PersistenceLayerError], key: str) -> None:
    assert caught.value.key == key
    assert repr(key) in str(caught.value)
    assert "\n" not in str(caught.value)
    assert caught.value.__cause__ is not None
    assert caught.value.existing_record is None


@pytest.mark.parametrize("case", FOREIGN)
def test_get_of_a_foreign_item_is_a_persistence_error_naming_the_key(foreign_store, case):
    write_foreign(foreign_store, "fn#foreign", case)
    with pytest.raises(PersistenceLayerError) as caught:
        foreign_store.get("fn#foreign")
    _assert_names(caught, "fn#foreign")


@pytest.mark.parametrize("case", FOREIGN)
def test_scan_over_a_foreign_item_is_a_persistence_error_naming_the_key(foreign_store, case):
    held = lock("fn#ours")
    foreign_store.acquire(held, NOW_MS)
    foreign_store.complete(done(held))
    write_foreign(foreign_store, "fn#foreign", case)
    with pytest.raises(PersistenceLayerError) as caught:
        list(foreign_store.scan())
    _assert_names(caught, "fn#foreign")


@pytest.mark.parametrize("case", FOREIGN)
def test_acquire_blocked_by_a_foreign_item_is_a_persistence_error_naming_the_key(foreign_store, case):
    write_foreign(foreign_store, "fn#foreign", case)
    with pytest.raises(PersistenceLayerError) as caught:
        foreign_store.acquire(lock("fn#foreign"), NOW_MS)
    _assert_names(caught, "fn#foreign")


# -- the one decoder every backend reads an item with ------------------------------------------------------------

STORED = {"key": "k", "status": "COMPLETE", "expires_at": 1, "in_progress_expires_at": None, "lease": "l",
          "response": "{}", "payload_hash": None}  # fmt: skip


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("status", None, "status is missing"),
        ("status", 1, "status is not text: 1"),
        ("status", "PENDING", "status is 'PENDING', not IN_PROGRESS or COMPLETE"),
        ("expires_at", None, "expires_at is missing"),
        ("expires_at", "1.5", "expires_at is not a whole number: '1.5'"),
        ("expires_at", True, "expires_at is not a whole number: True"),
        ("in_progress_expires_at", "later", "in_progress_expires_at is not a whole number: 'later'"),
        ("lease", 7, "lease is not text: 7"),
        ("response", b"{}", "response is not text: a value of type bytes"),  # the application's data: not quoted
        ("payload_hash", 7, "payload_hash is not text: 7"),
    ],
)
def test_a_foreign_item_is_refused_naming_its_key_and_the_field_at_fault(field, value, why):
    with pytest.raises(PersistenceLayerError) as caught:
        decode_record(**{**STORED, field: value})
    assert (caught.value.key, str(caught.value)) == ("k", f"stored item 'k' is not a record this library wrote: {why}")


def test_a_foreign_key_that_is_no_text_is_named_by_its_repr():
    with pytest.raises(PersistenceLayerError) as caught:
        decode_record(**{**STORED, "key": 7})
    assert caught.value.key == "7"
    assert str(caught.value) == "stored item '7' is not a record this library wrote: the key is not text: 7"


def test_numbers_read_as_decimal_text_and_absent_fields_decode_as_a_record_written_without_them():
    # DynamoDB hands numbers over as their decimal text; a record without a lease has none a holder's can match.
    read = decode_record(**{**STORED, "expires_at": "-12", "in_progress_expires_at": "34", "lease": None,
                            "response": None, "payload_hash": "h"})  # fmt: skip
    assert read == IdempotencyRecord("k", RecordStatus.COMPLETE, -12, 34, "", None, "h")
    assert decode_record(**STORED) == IdempotencyRecord("k", RecordStatus.COMPLETE, 1, None, "l", "{}", None)
