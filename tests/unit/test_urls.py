"""Store URLs name each backend, with clear errors for what they cannot name."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import pytest

from consumer.cli import main
from persistence import (
    DynamoDBPersistenceLayer,
    InMemoryPersistenceLayer,
    SQLitePersistenceLayer,
    store_from_url,
)
from persistence._redis_url import parse_url
from persistence.redis import RedisPersistenceLayer


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
        ("memcached://localhost", "the scheme must be sqlite, memory, dynamodb, redis, rediss, valkey or valkeys$"),
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


@pytest.mark.parametrize(
    ("url", "unknown"),
    [
        ("redis://app:s3cret@127.0.0.1:1/0?socket_timeot=2", "socket_timeot"),
        ("rediss://app:s3cret@127.0.0.1:1/0?cluster=true&read_from_replica=true", "read_from_replica"),
    ],
)
def test_a_redis_option_nobody_knows_is_refused_when_built_without_showing_the_password(url, unknown):
    # redis-py would take it and fail every connection with a TypeError, record after record.
    for build in (store_from_url, lambda u: RedisPersistenceLayer(url=u)):
        with pytest.raises(ValueError, match=f"unknown options \\['{unknown}'\\]") as caught:
            build(url)
        assert "s3cret" not in str(caught.value)
        assert "app:***@127.0.0.1:1" in str(caught.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis+sentinel://:hunter2@cache:6379/0", "redis+sentinel://:***@cache:6379/0"),  # a scheme we lack
        ("rediss//:hunter2@cache:6379", "rediss//:***@cache:6379"),  # a typo: not a URL at all
        ("redis://app:hun/ter2@cache:6379?bogus=1", "redis://app:***@cache:6379?bogus=1"),  # "/" in a password
        ("dynamodb://?password=hunter2", "dynamodb://?password=***"),
        ("redis://cache:6379/0?password=hunter2&socket_timeot=2", "redis://cache:6379/0?password=***&socket_timeot=2"),
        # A '?' or '#' in a password cuts the host there: the rest of it read as options, or a fragment (silently).
        ("rediss://:hunter2?x@cache:6379/0?bad=1", "rediss://:***@cache:6379/0?bad=1"),
        ("rediss://:hun?ter2@cache:6379/0", "rediss://:***@cache:6379/0"),
        ("redis://:hun#ter2@cache/0?cluster=maybe", "redis://:***@cache/0?cluster=maybe"),
        ("redis://:hun/t?er2@cache:1/0", "redis://:***@cache:1/0"),  # a '/' too: read as a port that is no number
        ("redis://:hun/ter2?x=3@cache:6379/0", "redis://:***@cache:6379/0"),  # would show 'x' as an option
        ("redis://:hun@ter2#x@cache:6379/0", "redis://:***@cache:6379/0"),  # an '@' too: host 'ter2', silently
    ],
)
def test_a_url_that_names_no_store_is_refused_without_showing_its_password(url, shown, capsys):
    with pytest.raises(ValueError, match=re.escape(repr(shown))) as caught:
        store_from_url(url)
    assert not {"hunter2", "hun", "ter2", "er2", "x", "t"} & set(re.split(r"\W+", str(caught.value)))
    assert main(["records", "list", "--store", url]) == 2  # the CLI's --store says the same, in one line
    assert capsys.readouterr().err == f"idempotent-consumer: {caught.value}\n"


def test_redis_connection_options_and_the_stores_own_flags_are_accepted():
    url = "rediss://127.0.0.1:1/2?ssl_cert_reqs=none&socket_timeout=2&cluster=false&allow_eviction=true"
    store = store_from_url(url)
    assert store.allow_eviction is True
    kwargs = store.client.connection_pool.connection_kwargs
    assert (kwargs["ssl_cert_reqs"], kwargs["socket_timeout"], kwargs["db"]) == ("none", 2.0, 2)
    assert "allow_eviction" not in kwargs
    store.close()


@pytest.mark.parametrize(("option", "value"), [("expiry_margin_seconds", 300.0), ("expiry_margin_seconds", True),
                                               ("key_prefix", None)])  # fmt: skip
def test_a_redis_store_setting_of_the_wrong_type_is_refused_when_built(option, value):
    # A float margin reached PEXPIRE after HSET: a lock left with no expiry, failing its record and every retry.
    with pytest.raises(TypeError, match=option):
        RedisPersistenceLayer(url="redis://127.0.0.1:1/0", **{option: value})


def test_threads_making_a_url_stores_first_call_at_once_share_one_client():
    for _ in range(20):
        store, barrier = RedisPersistenceLayer(url="redis://127.0.0.1:1/0"), Barrier(8)

        def first_call(store=store, barrier=barrier):
            barrier.wait()
            return store.client

        with ThreadPoolExecutor(8) as pool:
            clients = list(pool.map(lambda _: first_call(), range(8)))
        assert len({id(c) for c in clients}) == 1
        store.close()


def test_an_encoded_at_sign_in_an_option_value_and_an_encoded_key_prefix_are_taken_as_they_are():
    store = store_from_url("redis://cache:6379?client_name=worker%40host-1")
    assert store.client.connection_pool.connection_kwargs["client_name"] == "worker@host-1"
    store.close()
    store = store_from_url("redis://localhost/0?key%5Fprefix=app:")
    assert store.key_prefix == "app:"
    store.close()


# A password whose '/', '?' or '#' is not percent-encoded cuts the authority there: the rest of the password, its
# '@' and the intended host are read as a path, options or a fragment, and the URL names another host (the user
# name), with a password that is a piece of the real one, or none. Each '@' past the host is refused.
MISREAD = [
    # digits before the cut read as a port: host 'default', password 'tail@good.example:6379' sent to it
    ("redis://default:1234?password=tail@good.example:6379", "redis://default:***@good.example:6379"),
    ("redis://user:1234/5@good.example", "redis://user:***@good.example"),  # host 'user', no password
    ("redis://user:1234#5@good.example", "redis://user:***@good.example"),  # the rest a fragment
    ("rediss://user:1234?client_name=tail@good.example:6380", "rediss://user:***@good.example:6380"),
    ("valkey://user:1234/0@good.example?cluster=true", "valkey://user:***@good.example?cluster=true"),
    ("redis://user:1234/5@[::1]:6379", "redis://user:***@[::1]:6379"),  # an IPv6 host
    ("redis://user:12?34@[2001:db8::1]:6379/0", "redis://user:***@[2001:db8::1]:6379/0"),
    ("redis://user:1234?key_prefix=p@good.example", "redis://user:***@good.example"),  # store_from_url's option
    ("redis://user:hun/ter@good.example/0", "redis://user:***@good.example/0"),
    # No password at all, but read alike: an option value's '@' is written %40 (see the test above).
    ("redis://cache:6379?client_name=worker@host-1", "redis://cache:***@host-1"),
    ("redis://:hun[ter@good.example", "redis://:***@good.example"),  # no host parsed at all
]


@pytest.mark.parametrize(("url", "shown"), MISREAD)
def test_an_at_sign_past_the_host_is_refused_masked_before_anything_connects(url, shown, capsys):
    builds = [store_from_url] + ([] if "key_prefix" in url else [lambda u: RedisPersistenceLayer(url=u)])
    for build in builds:
        with pytest.raises(ValueError, match=re.escape(repr(shown))) as caught:
            build(url)
        assert not {"tail", "1234", "34", "5", "hun", "ter", "p", "worker"} & set(re.split(r"\W+", str(caught.value)))
        assert "percent-encode" in str(caught.value)
    assert main(["records", "list", "--store", url]) == 2
    assert "***" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("url", "host", "password"),
    [
        ("redis://user:p%40ss%2F1%3F2%233@good.example:6379/0", "good.example", "p@ss/1?2#3"),  # all encoded
        ("redis://user:p@ss@good.example:6379", "good.example", "p@ss"),  # in the authority: the last '@' ends it
        ("redis://user:1234@good.example", "good.example", "1234"),
        ("rediss://user:pw@[::1]:6380/0", "::1", "pw"),
        ("valkeys://:pw@[2001:db8::1]:6380/0?cluster=true&socket_timeout=2", "2001:db8::1", "pw"),
        ("redis://good.example:6379/0?password=p%40ss", "good.example", "p@ss"),
    ],
)
def test_a_password_the_host_accounts_for_reaches_that_host(url, host, password):
    from redis.connection import parse_url as redis_reads  # noqa: PLC0415 - what the client is built from

    kwargs = redis_reads(parse_url(url).plain)
    assert (kwargs["host"], kwargs["password"]) == (host, password)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("unix://user:hunter2@/tmp/redis.sock", "unix://user:***@/tmp/redis.sock"),  # redis-py's; no store's
        ("unix:///tmp/redis.sock?password=hunter2", "unix:///tmp/redis.sock?password=***"),
    ],
)
def test_a_unix_socket_url_is_refused_by_its_scheme_masked(url, shown):
    for build in (store_from_url, lambda u: RedisPersistenceLayer(url=u)):
        with pytest.raises(ValueError, match=re.escape(repr(shown))):
            build(url)


@pytest.mark.parametrize(
    ("url", "warned"),
    [
        ("redis://app:hunter2@cache.example:6379/0", True),
        ("valkey://cache.example:6379/0?password=hunter2&cluster=true", True),
        ("redis://app:hunter2@10.0.0.7", True),
        ("rediss://app:hunter2@cache.example:6379/0", False),  # TLS
        ("redis://app:hunter2@127.0.0.2:6379/0", False),  # loopback
        ("redis://app:hunter2@[::1]:6379/0", False),
        ("redis://app:hunter2@localhost:6379/0", False),
        ("redis://:hunter2@/0", False),  # no host: redis-py's localhost
        ("redis://cache.example:6379/0", False),  # no password
    ],
)
def test_a_password_sent_in_clear_to_another_host_is_warned_of_once_per_url(url, warned, caplog, monkeypatch):
    monkeypatch.setattr("persistence._redis_url._IN_CLEAR_WARNED", set())
    with caplog.at_level("WARNING", "idempotent_consumer"):
        for _ in range(3):
            RedisPersistenceLayer(url=url)
            store_from_url(url)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == warned
    if warned:
        assert "in clear: use rediss://" in lines[0]
        assert "hunter2" not in lines[0]
        assert "***" in lines[0]
