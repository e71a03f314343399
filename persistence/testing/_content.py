"""What a store keeps: responses and keys exactly, the item size limit, text it cannot encode, operator calls."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

import pytest

from persistence._attributes import MAX_ITEM_BYTES
from persistence._errors import ItemTooLargeError, PersistenceLayerError
from persistence._record import RecordStatus
from persistence.testing._records import NOW_MS, acquired, done, lock, stored

if TYPE_CHECKING:
    from collections.abc import Callable

    from persistence._base import PersistenceLayer

RESULTS = [0, "", [], False, None, {}, 0.5, "żółć ☃ 🚀", {"nested": {"list": [1, "two", None]}}, -(2**63)]
KEYS = ["fn#ключ-🔑", "fn#a key with spaces\tand a tab", "fn#" + "k" * 1021, 'fn#{"quoted": "json"}*?[]']
LONE = "\ud83d"  # a lone surrogate: valid in a Python str, with no UTF-8 form
LONE_RESPONSES = [json.dumps(LONE, ensure_ascii=False), json.dumps({"emoji": "a\udc00b"}, ensure_ascii=False), LONE]


class ContentContract:
    """Responses and keys round-trip exactly; records over the 400 KB limit are refused naming the key."""

    @pytest.mark.parametrize("result", RESULTS, ids=repr)
    def test_response_round_trips_exactly(self, store: PersistenceLayer, result: Any) -> None:
        held = acquired(store, "k")
        store.complete(done(held, json.dumps(result, ensure_ascii=False)))
        existing = store.acquire(lock("k"), NOW_MS)
        assert existing is not None
        assert existing.response is not None
        replayed = json.loads(existing.response)
        assert replayed == result
        assert type(replayed) is type(result)

    def test_payload_hash_round_trips(self, store: PersistenceLayer) -> None:
        held = acquired(store, "k")
        store.complete(dataclasses.replace(done(held), payload_hash="f00d"))
        assert stored(store, "k").payload_hash == "f00d"

    @pytest.mark.parametrize("key", KEYS, ids=["unicode", "spaces", "1 KB", "pattern characters"])
    def test_key_round_trips_and_is_its_own_record(self, store: PersistenceLayer, key: str) -> None:
        held = lock(key)
        assert store.acquire(held, NOW_MS) is None
        assert store.get(key) == held
        assert store.get(key[:-1]) is None
        store.complete(done(held, '"once"'))
        existing = store.acquire(lock(key), NOW_MS)
        assert existing is not None
        assert existing.response == '"once"'
        assert [r.key for r in store.scan()] == [key]
        assert store.delete(key) is True

    def test_record_over_400_kb_is_refused_naming_key_and_size(self, store: PersistenceLayer) -> None:
        held = acquired(store, "big")
        with pytest.raises(ItemTooLargeError) as caught:
            store.complete(done(held, json.dumps("x" * MAX_ITEM_BYTES)))
        assert caught.value.key == "big"
        assert caught.value.size > MAX_ITEM_BYTES
        assert "'big'" in str(caught.value)
        assert str(caught.value.size) in str(caught.value)
        assert stored(store, "big").status is RecordStatus.IN_PROGRESS

    def test_record_just_under_the_limit_is_stored(self, store: PersistenceLayer) -> None:
        held = acquired(store, "big")
        response = json.dumps("x" * (MAX_ITEM_BYTES - 500))
        store.complete(done(held, response))
        assert stored(store, "big").response == response


def _stored_or_refused(key: str, write: Callable[[], object], check: Callable[[], None]) -> bool:
    """Run ``write``: it succeeds (then ``check`` runs) or raises ``PersistenceLayerError`` naming ``key``."""
    refused: PersistenceLayerError | None = None
    try:
        write()
    except PersistenceLayerError as e:
        refused = e
    if refused is None:
        check()
        return True
    assert refused.key == key
    assert repr(key) in str(refused)
    assert refused.__cause__ is not None
    return False


class EncodingContract:
    r"""Text a store cannot encode (a lone surrogate) is stored and read back, or refused naming the key.

    ``json.dumps(..., ensure_ascii=False)`` turns the valid JSON string ``"\ud83d"`` into such text. No store may
    let a bare ``UnicodeEncodeError`` escape, nor half-write a record.
    """

    @pytest.mark.parametrize("response", LONE_RESPONSES, ids=ascii)
    def test_response_with_a_lone_surrogate_is_stored_or_refused(self, store: PersistenceLayer, response: str) -> None:
        held = acquired(store, "k")

        def replayed() -> None:
            assert stored(store, "k").response == response
            existing = store.acquire(lock("k"), NOW_MS)
            assert existing is not None
            assert existing.response == response

        if not _stored_or_refused("k", lambda: store.complete(done(held, response)), replayed):
            assert store.get("k") == held  # refused: the lock is still ours, nothing half-written

    def test_payload_hash_with_a_lone_surrogate_is_stored_or_refused(self, store: PersistenceLayer) -> None:
        held = dataclasses.replace(lock("k"), payload_hash=LONE)

        def kept() -> None:
            assert store.get("k") == held

        _stored_or_refused("k", lambda: store.acquire(held, NOW_MS), kept)

    def test_key_with_a_lone_surrogate_is_stored_or_refused(self, store: PersistenceLayer) -> None:
        key = f"fn#{LONE}"
        held = lock(key)

        def kept() -> None:
            assert store.get(key) == held
            store.release(held)
            assert store.get(key) is None

        if not _stored_or_refused(key, lambda: store.acquire(held, NOW_MS), kept):
            with pytest.raises(PersistenceLayerError) as caught:
                store.get(key)
            assert caught.value.key == key

    def test_large_response_with_a_lone_surrogate_is_stored_or_refused(self, store: PersistenceLayer) -> None:
        held = acquired(store, "k")
        response = json.dumps("x" * 150_000 + LONE, ensure_ascii=False)

        def kept() -> None:
            assert stored(store, "k").response == response

        _stored_or_refused("k", lambda: store.complete(done(held, response)), kept)

    def test_too_large_response_with_a_lone_surrogate_is_item_too_large(self, store: PersistenceLayer) -> None:
        held = acquired(store, "k")
        with pytest.raises(ItemTooLargeError) as caught:
            store.complete(done(held, LONE * (MAX_ITEM_BYTES // 2)))
        assert caught.value.key == "k"
        assert stored(store, "k").status is RecordStatus.IN_PROGRESS


class OperatorContract:
    """``get``, ``delete`` and ``scan``: what the ``records`` commands and an operator's reset use."""

    def test_get_of_a_missing_key_is_none(self, store: PersistenceLayer) -> None:
        assert store.get("nothing") is None

    def test_delete_lets_the_key_run_again(self, store: PersistenceLayer) -> None:
        held = acquired(store, "k")
        store.complete(done(held))
        assert store.delete("k") is True
        assert store.delete("k") is False
        assert store.acquire(lock("k"), NOW_MS) is None

    def test_scan_filters_by_status_and_limits(self, store: PersistenceLayer) -> None:
        for i in range(5):
            held = acquired(store, f"k{i}")
            if i % 2 == 0:
                store.complete(done(held))
        assert sorted(r.key for r in store.scan()) == [f"k{i}" for i in range(5)]
        assert sorted(r.key for r in store.scan(RecordStatus.COMPLETE)) == ["k0", "k2", "k4"]
        assert sorted(r.key for r in store.scan(RecordStatus.IN_PROGRESS)) == ["k1", "k3"]
        assert len(list(store.scan(limit=2))) == 2
        assert len(list(store.scan(RecordStatus.COMPLETE, limit=2))) == 2

    def test_scan_refuses_the_derived_expired_status(self, store: PersistenceLayer) -> None:
        with pytest.raises(ValueError, match="EXPIRED is derived"):
            list(store.scan(RecordStatus.EXPIRED))

    def test_scan_reads_past_one_page(self, store: PersistenceLayer) -> None:
        # Stores read in pages (DynamoDB: 1 MB per Scan page): 30 records of ~40 KB take several.
        for i in range(30):
            held = acquired(store, f"k{i:02d}")
            store.complete(done(held, json.dumps("x" * 40_000)))
        assert sorted(r.key for r in store.scan()) == [f"k{i:02d}" for i in range(30)]
        assert len(list(store.scan(limit=25))) == 25
