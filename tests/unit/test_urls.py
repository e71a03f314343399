"""Store URLs name each backend, with clear errors for what they cannot name."""

from __future__ import annotations

import pytest

from persistence import (
    DynamoDBPersistenceLayer,
    InMemoryPersistenceLayer,
    SQLitePersistenceLayer,
    store_from_url,
)


def test_sqlite_relative_and_absolute_paths(tmp_path):
    assert store_from_url("sqlite:///data/x.sqlite3").path.as_posix() == "data/x.sqlite3"
    assert store_from_url(f"sqlite:///{tmp_path}/x.sqlite3").path == tmp_path / "x.sqlite3"


def test_default_is_the_embedded_sqlite_file_or_the_environment(monkeypatch):
    monkeypatch.delenv("IDEMPOTENCY_STORE_URL", raising=False)
    default = store_from_url()
    assert isinstance(default, SQLitePersistenceLayer)
    assert default.path.as_posix() == ".idempotency.sqlite3"
    monkeypatch.setenv("IDEMPOTENCY_STORE_URL", "memory://")
    assert isinstance(store_from_url(), InMemoryPersistenceLayer)


def test_dynamodb_url_options():
    store = store_from_url("dynamodb://Orders?endpoint_url=http://127.0.0.1:1&region=eu-west-1&sort_key_attr=sk")
    assert isinstance(store, DynamoDBPersistenceLayer)
    assert (store.table_name, store.sort_key_attr) == ("Orders", "sk")
    assert store.client.meta.endpoint_url == "http://127.0.0.1:1"
    assert store.client.meta.region_name == "eu-west-1"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("memcached://localhost", "the scheme must be sqlite, memory, dynamodb, redis, rediss or valkey"),
        ("sqlite://", "names no file"),
        ("dynamodb://", "names no table"),
        ("dynamodb://T?colour=red", "unknown options \\['colour'\\]"),
    ],
)
def test_bad_urls_are_clear_errors(url, message):
    with pytest.raises(ValueError, match=message):
        store_from_url(url)


def test_redis_urls_name_a_redis_store_with_its_prefix():
    from persistence.redis import RedisPersistenceLayer  # noqa: PLC0415 - the optional store

    store = store_from_url("valkey://127.0.0.1:1/2?key_prefix=orders:&cluster=true")
    assert isinstance(store, RedisPersistenceLayer)
    assert (store.url, store.key_prefix) == ("valkey://127.0.0.1:1/2?cluster=true", "orders:")
    assert store_from_url("rediss://cache:6380/0").key_prefix == "idempotency:"


def test_redis_url_options_reach_the_client_encoded_as_they_came():
    # A password holding & and = is percent-encoded in the URL; decoding it without encoding it again split it.
    store = store_from_url("redis://127.0.0.1:1/0?password=s3cr%26t%3D1&key_prefix=")
    assert store.key_prefix == ""  # an empty prefix is a prefix, not the default
    client = store.client
    assert client.connection_pool.connection_kwargs["password"] == "s3cr&t=1"
    client.close()


@pytest.mark.parametrize("option", ["cluster", "allow_eviction"])
def test_a_redis_flag_that_is_neither_true_nor_false_is_refused_when_the_store_is_built(option):
    with pytest.raises(ValueError, match=f"{option} must be true or false, not 'maybe'"):
        store_from_url(f"redis://127.0.0.1:1/0?{option}=maybe")
