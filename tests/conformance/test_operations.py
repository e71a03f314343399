"""Responses, the item size limit, and the operator calls, on every backend."""

from __future__ import annotations

import dataclasses
import json

import pytest
from records import NOW_MS, done, lock

from persistence import MAX_ITEM_BYTES, ItemTooLargeError, RecordStatus

RESULTS = [0, "", [], False, None, {}, 0.5, "żółć ☃ 🚀", {"nested": {"list": [1, "two", None]}}, -(2**63)]


@pytest.mark.parametrize("result", RESULTS, ids=repr)
def test_response_round_trips_exactly(store, result):
    held = lock("k")
    store.acquire(held, NOW_MS)
    store.complete(done(held, json.dumps(result, ensure_ascii=False)))
    replayed = json.loads(store.acquire(lock("k"), NOW_MS).response)
    assert replayed == result
    assert type(replayed) is type(result)


def test_payload_hash_round_trips(store):
    held = lock("k")
    store.acquire(held, NOW_MS)
    store.complete(dataclasses.replace(done(held), payload_hash="f00d"))
    assert store.get("k").payload_hash == "f00d"


def test_unicode_key_round_trips(store):
    held = lock("fn#ключ-🔑")
    assert store.acquire(held, NOW_MS) is None
    assert store.get("fn#ключ-🔑") == held


def test_record_over_400_kb_is_refused_naming_key_and_size(store):
    held = lock("big")
    store.acquire(held, NOW_MS)
    with pytest.raises(ItemTooLargeError) as caught:
        store.complete(done(held, json.dumps("x" * MAX_ITEM_BYTES)))
    assert caught.value.key == "big"
    assert caught.value.size > MAX_ITEM_BYTES
    assert "'big'" in str(caught.value)
    assert str(caught.value.size) in str(caught.value)
    assert store.get("big").status is RecordStatus.IN_PROGRESS


def test_record_just_under_the_limit_is_stored(store):
    held = lock("big")
    store.acquire(held, NOW_MS)
    response = json.dumps("x" * (MAX_ITEM_BYTES - 500))
    store.complete(done(held, response))
    assert store.get("big").response == response


def test_get_of_a_missing_key_is_none(store):
    assert store.get("nothing") is None


def test_delete_lets_the_key_run_again(store):
    held = lock("k")
    store.acquire(held, NOW_MS)
    store.complete(done(held))
    assert store.delete("k") is True
    assert store.delete("k") is False
    assert store.acquire(lock("k"), NOW_MS) is None


def test_scan_filters_by_status_and_limits(store):
    for i in range(5):
        held = lock(f"k{i}")
        store.acquire(held, NOW_MS)
        if i % 2 == 0:
            store.complete(done(held))
    assert sorted(r.key for r in store.scan()) == [f"k{i}" for i in range(5)]
    assert sorted(r.key for r in store.scan(RecordStatus.COMPLETE)) == ["k0", "k2", "k4"]
    assert sorted(r.key for r in store.scan(RecordStatus.IN_PROGRESS)) == ["k1", "k3"]
    assert len(list(store.scan(limit=2))) == 2
    assert len(list(store.scan(RecordStatus.COMPLETE, limit=2))) == 2


def test_scan_refuses_the_derived_expired_status(store):
    with pytest.raises(ValueError, match="EXPIRED is derived"):
        list(store.scan(RecordStatus.EXPIRED))


def test_scan_reads_past_one_page(store):
    # DynamoDB returns at most 1 MB per Scan page: 30 records of ~40 KB need two pages.
    for i in range(30):
        held = lock(f"k{i:02d}")
        store.acquire(held, NOW_MS)
        store.complete(done(held, json.dumps("x" * 40_000)))
    assert sorted(r.key for r in store.scan()) == [f"k{i:02d}" for i in range(30)]
    assert len(list(store.scan(limit=25))) == 25
