"""What only the Redis store has to get right: values arrive as bytes that this library may not have written."""

from __future__ import annotations

import pytest
from records import NOW_MS, lock

from persistence import PersistenceLayerError
from persistence.redis import RedisPersistenceLayer


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
