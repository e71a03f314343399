"""What only the Redis store has to get right: values arrive as bytes that this library may not have written."""

from __future__ import annotations

import hashlib

import pytest
from records import NOW_MS, done, lock
from redis_server import FaultProxy

from persistence import PersistenceLayerError, RecordStatus
from persistence.redis import _COMPLETE, RedisPersistenceLayer


@pytest.mark.parametrize("operation", ["get", "acquire", "scan"])
def test_an_item_whose_bytes_are_not_utf8_is_a_persistence_error_naming_the_key(redis_server, operation):
    store = RedisPersistenceLayer(url=redis_server.url, key_prefix="not-utf8:")
    store.client.hset(
        "not-utf8:fn#bytes", mapping={"status": b"COMPLETE", "expires_at": b"9999999999", "lease": b"\xff"}
    )
    calls = {"get": lambda: store.get("fn#bytes"), "acquire": lambda: store.acquire(lock("fn#bytes"), NOW_MS),
             "scan": lambda: list(store.scan())}  # fmt: skip
    with pytest.raises(PersistenceLayerError, match="'fn#bytes' is not a record this library wrote") as caught:
        calls[operation]()
    assert caught.value.key == "fn#bytes"
    assert isinstance(caught.value.__cause__, UnicodeDecodeError)
    store.client.delete("not-utf8:fn#bytes")
    store.close()


@pytest.mark.parametrize("kind", ["reset", "lost_reply"])
def test_a_store_built_from_a_url_retries_a_failed_commit_and_commits_once(redis_server, kind):
    # A Redis.from_url client retries nothing by default: the reset commit would fail a record whose body ran.
    proxy = FaultProxy(redis_server.port)
    store = RedisPersistenceLayer(url=f"redis://127.0.0.1:{proxy.port}", key_prefix=f"retried-{kind}:")
    try:
        held = lock("k")
        assert store.acquire(held, NOW_MS) is None
        proxy.arm((b"EVALSHA", hashlib.sha1(_COMPLETE.encode()).hexdigest().encode()), kind)  # noqa: S324 - its name
        store.complete(done(held, '"once"'))
        assert proxy.injected[kind] == 1
        stored = store.get("k")
        assert (stored.status, stored.response, stored.lease) == (RecordStatus.COMPLETE, '"once"', held.lease)
    finally:
        store.close()
        proxy.close()
