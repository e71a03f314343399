"""Items this library did not write (another library's status, a missing or non-numeric attribute).

They are written straight into the real table or file, past the store; reading them must raise
``PersistenceLayerError`` naming the key, never a bare ``ValueError`` / ``KeyError`` / ``TypeError``.
"""

from __future__ import annotations

import sqlite3

import pytest
from records import HOUR_S, NOW_MS, NOW_S, done, lock

from persistence import PersistenceLayerError

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
