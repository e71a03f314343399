"""What only the Redis store has to get right: values arrive as bytes that this library may not have written."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time

import pytest
import redis.asyncio
from events import failures, sqs_event, sqs_record
from fakes import FakeClock
from records import NOW_MS, done, lock
from redis.crc import key_slot
from redis_server import FaultProxy, _free_ports, _start, start_cluster

from consumer import BatchProcessor, EventType
from persistence import InMemoryPersistenceLayer, PersistenceLayerError, RecordStatus
from persistence.redis import _COMPLETE, EVICTION_CHECK_MS, MAX_TTL_MS, RedisPersistenceLayer
from persistence.urls import store_from_url


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


@pytest.fixture(scope="module")
def evicting_server():
    server = _start(["--maxmemory", "8mb", "--maxmemory-policy", "volatile-lru"])  # ElastiCache's default policy
    yield server
    server.cleanup()


def test_a_server_that_evicts_keys_is_refused_before_anything_is_written(evicting_server):
    # An evicted COMPLETE record would run its body again; an evicted lock, a duplicate alongside the holder.
    store = RedisPersistenceLayer(url=evicting_server.url, key_prefix="evicting:")
    with pytest.raises(PersistenceLayerError, match="evicts keys \\(maxmemory-policy volatile-lru\\)"):
        store.acquire(lock("k"), NOW_MS)
    with evicting_server.client() as c:
        assert c.keys("evicting:*") == []
    store.close()


def test_a_server_that_evicts_keys_is_used_when_allowed(evicting_server):
    store = RedisPersistenceLayer(url=evicting_server.url, key_prefix="allowed:", allow_eviction=True)
    assert store.acquire(lock("k"), NOW_MS) is None
    store.close()


def test_the_key_outlives_the_last_second_its_record_counts_in(redis_server):
    # expires_at is a second: the record counts until that second ends, so its key must live past it.
    store = RedisPersistenceLayer(client=redis_server.client(), key_prefix="ttl:", expiry_margin_seconds=0)
    now_ms = int(time.time() * 1000)
    held = lock("k", now_ms=now_ms, expires_in_s=2)
    store.acquire(held, now_ms)
    store.complete(done(held))
    left_ms = store.client.pttl("ttl:k")
    assert left_ms > (held.expires_at + 1) * 1000 - now_ms - 1000  # at most 1 s for the two calls above
    assert left_ms > (held.expires_at * 1000 + 999) - int(time.time() * 1000)
    store.client.close()


def test_a_far_expiry_is_written_whole_with_the_longest_key_expiry(redis_server):
    store = RedisPersistenceLayer(client=redis_server.client(), key_prefix="far:")
    held = lock("k", expires_in_s=10**16)
    assert store.acquire(held, NOW_MS) is None
    assert 0 < store.client.pttl("far:k") <= MAX_TTL_MS
    store.complete(done(held))
    assert store.get("k").status is RecordStatus.COMPLETE
    assert 0 < store.client.pttl("far:k") <= MAX_TTL_MS
    store.client.close()


def test_an_asyncio_client_is_refused_naming_the_client_to_use():
    with pytest.raises(ValueError, match="takes a blocking client"):
        RedisPersistenceLayer(client=redis.asyncio.Redis())


def test_a_server_that_evicts_keys_is_used_when_the_url_allows_it(evicting_server):
    store = store_from_url(f"{evicting_server.url}?allow_eviction=true&key_prefix=url-allowed:")
    assert store.acquire(lock("k"), NOW_MS) is None
    assert store.client.connection_pool.connection_kwargs.get("allow_eviction") is None  # ours, not redis-py's
    store.close()


def test_a_cluster_node_reached_without_the_cluster_flag_is_refused_naming_the_fix(redis_cluster):
    # A single-server client on a cluster node sees one node's keys: records list would silently miss the rest.
    store = store_from_url(f"{redis_cluster.url}?key_prefix=one-node:")
    for call in (lambda: store.acquire(lock("k"), NOW_MS), lambda: list(store.scan())):
        with pytest.raises(PersistenceLayerError, match=r"node of a cluster.*add \?cluster=true to the store URL"):
            call()
    store.close()


def test_a_key_under_the_prefix_that_is_not_utf8_is_a_persistence_error_in_scan(redis_server):
    store = RedisPersistenceLayer(url=redis_server.url, key_prefix="raw-key:")
    store.client.hset(b"raw-key:fn#\xff", mapping={"status": "COMPLETE", "expires_at": "9999999999"})
    with pytest.raises(PersistenceLayerError, match=r"'fn#\\\\xff' is not a record this library wrote") as caught:
        list(store.scan())
    assert caught.value.key == "fn#\\xff"
    assert isinstance(caught.value.__cause__, UnicodeDecodeError)
    store.client.delete(b"raw-key:fn#\xff")
    store.close()


@pytest.mark.parametrize("operation", ["get", "acquire"])
def test_a_client_that_decodes_replies_names_the_key_whose_bytes_are_not_utf8(redis_server, operation):
    client = redis_server.client(decode_responses=True)
    store = RedisPersistenceLayer(client=client, key_prefix="decoding:")
    client.hset("decoding:fn#bytes", mapping={"status": b"COMPLETE", "expires_at": b"9999999999", "lease": b"\xff"})
    calls = {"get": lambda: store.get("fn#bytes"), "acquire": lambda: store.acquire(lock("fn#bytes"), NOW_MS)}
    with pytest.raises(PersistenceLayerError, match="'fn#bytes' is not a record this library wrote") as caught:
        calls[operation]()
    assert caught.value.key == "fn#bytes"
    assert isinstance(caught.value.__cause__, UnicodeDecodeError)
    client.delete("decoding:fn#bytes")
    assert client.ping()  # the client still works after the reply it could not decode
    client.close()


@pytest.mark.parametrize("operation", ["get", "acquire", "scan"])
def test_a_hash_with_no_record_field_is_a_foreign_item_to_every_operation(redis_server, operation):
    store = RedisPersistenceLayer(client=redis_server.client(), key_prefix="no-fields:")
    store.client.hset("no-fields:fn#other", mapping={"owner": "another program"})
    calls = {"get": lambda: store.get("fn#other"), "acquire": lambda: store.acquire(lock("fn#other"), NOW_MS),
             "scan": lambda: list(store.scan())}  # fmt: skip
    with pytest.raises(PersistenceLayerError, match="'fn#other'") as caught:
        calls[operation]()
    assert caught.value.key == "fn#other"
    store.client.delete("no-fields:fn#other")
    store.client.close()


VALKEY_ONLY = """
import sys
sys.modules["redis"] = None  # as if only valkey-py were installed
import valkey
from persistence import PersistenceLayerError, RecordStatus
from persistence.redis import RedisPersistenceLayer
sys.path.insert(0, "tests")
from records import NOW_MS, done, lock

store = RedisPersistenceLayer(client=valkey.Valkey.from_url(sys.argv[1]), key_prefix="valkey-py:")
held = lock("k")
assert store.acquire(held, NOW_MS) is None
store.complete(done(held, '"once"'))
assert store.get("k").status is RecordStatus.COMPLETE
assert store.acquire(lock("k"), NOW_MS).response == '"once"'
down = RedisPersistenceLayer(client=valkey.Valkey(host="127.0.0.1", port=1), key_prefix="valkey-py:")
try:
    down.get("k")
except PersistenceLayerError as e:
    print(type(e.__cause__).__module__, e.key)
"""


def test_a_valkey_py_client_works_and_its_errors_are_persistence_errors_without_redis_py(redis_server, tmp_path):
    script = tmp_path / "valkey_only.py"
    script.write_text(VALKEY_ONLY)
    done_ = subprocess.run(
        [sys.executable, str(script), redis_server.url], capture_output=True, text=True, check=False, timeout=60
    )
    assert done_.returncode == 0, done_.stderr
    assert done_.stdout.split() == ["valkey.exceptions", "k"]


def test_a_cluster_with_one_evicting_primary_is_refused(redis_cluster):
    # Every primary holds records: the one that evicts is the one asked about last in the slot order.
    node = redis_cluster.node_for_slot(16383)
    with node.client() as c:
        c.config_set("maxmemory-policy", "allkeys-lru")
        c.config_set("maxmemory", "1gb")
        try:
            store = store_from_url(f"{redis_cluster.url}?cluster=true&key_prefix=one-evicts:")
            with pytest.raises(PersistenceLayerError, match="evicts keys \\(maxmemory-policy allkeys-lru\\)"):
                store.acquire(lock("k"), NOW_MS)
            store.close()
        finally:
            c.config_set("maxmemory", "0")
            c.config_set("maxmemory-policy", "noeviction")


@pytest.mark.parametrize("topology", ["standalone", "cluster"])
def test_a_server_that_starts_evicting_while_in_use_is_refused_from_the_next_check_on(request, topology):
    # The policy was asked on the first call only: a node switched to allkeys-lru later (a parameter group change
    # while the container stays warm) evicted COMPLETE records and live locks without a word. An acquire asks
    # again once EVICTION_CHECK_MS have passed by the guard's clock, every primary of a cluster.
    server = request.getfixturevalue(f"redis_{'server' if topology == 'standalone' else 'cluster'}")
    prefix = f"starts-evicting-{topology}:"
    store = store_from_url(f"{server.url}?key_prefix={prefix}" + ("&cluster=true" if topology == "cluster" else ""))
    clock, ran = FakeClock(), []
    processor = BatchProcessor(EventType.SQS, store=store, clock=clock, raise_on_entire_batch_failure=False)
    later = sqs_event(sqs_record("a", 1), sqs_record("b", 2))
    assert failures(processor.process(sqs_event(sqs_record("a", 1)), lambda r: ran.append(r.message_id))) == []

    keys = _keys_of(later, prefix)
    # On a cluster, a primary that holds none of these records: the one asked about is not only the key's own.
    switched = server if topology == "standalone" else next(
        node for node in server.nodes if all(server.node_for_slot(key_slot(key.encode())) is not node for key in keys)
    )  # fmt: skip
    with switched.client() as c:
        c.config_set("maxmemory", "1gb")
        c.config_set("maxmemory-policy", "allkeys-lru")
        try:
            clock.advance(EVICTION_CHECK_MS / 1000 - 1)  # the window: not asked again yet
            assert failures(processor.process(sqs_event(sqs_record("w", 3)), lambda r: ran.append(r.message_id))) == []
            clock.advance(1)
            response = processor.process(later, lambda r: ran.append(r.message_id))
            assert failures(response) == ["a", "b"]  # reported, neither run nor replayed
            for item in processor.items:
                assert isinstance(item.error, PersistenceLayerError)
                assert "evicts keys (maxmemory-policy allkeys-lru)" in str(item.error)
            assert ran == ["a", "w"]
            assert store.get(keys[1].removeprefix(prefix)) is None  # b's lock was never taken
        finally:
            c.config_set("maxmemory", "0")
            c.config_set("maxmemory-policy", "noeviction")
    clock.advance(1)  # the next acquire asks again (a refused check does not count as one), and the server passes
    assert failures(processor.process(later, lambda r: ran.append(r.message_id))) == []
    assert ran == ["a", "w", "b"]
    assert processor.summary.replayed == 1
    store.close()


def test_the_eviction_check_costs_one_info_per_primary_a_minute_by_the_guards_clock(redis_server):
    # What the re-check adds to the requests per record: nothing, but for one INFO on the first acquire
    # EVICTION_CHECK_MS after the last check; commits, releases and reads never ask.
    client = redis_server.client()
    store = RedisPersistenceLayer(client=client, key_prefix="check-cost:")
    asked, info = [], client.info
    client.info = lambda *a, **kw: asked.append(1) or info(*a, **kw)
    for n, at_ms in enumerate([0, 1, EVICTION_CHECK_MS - 1, EVICTION_CHECK_MS, 2 * EVICTION_CHECK_MS - 1]):
        held = lock(f"k{n}", now_ms=NOW_MS + at_ms)
        assert store.acquire(held, NOW_MS + at_ms) is None
        store.complete(done(held))
        store.get(held.key)
    assert len(asked) == 2  # the first call, and the acquire a minute after it
    assert store.acquire(lock("k9", now_ms=NOW_MS - 1), NOW_MS - 1) is None  # a clock set back asks again
    assert len(asked) == 3
    client.close()


def _keys_of(event, prefix: str) -> list[str]:
    """The stored keys of the records of ``event``, as a batch on any store names them."""
    processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    processor.process(event, lambda _: None)
    return [prefix + item.key for item in processor.items]


@pytest.mark.parametrize("case", ["not a cluster", "nobody listening"])
def test_a_cluster_client_that_cannot_start_fails_with_a_persistence_error(redis_server, case):
    # redis-py's RedisClusterException does not derive from RedisError: it escaped as a bare library error.
    url = redis_server.url if case == "not a cluster" else f"redis://127.0.0.1:{_free_ports(1)[0]}"
    store = store_from_url(f"{url}?cluster=true&key_prefix=no-cluster:")
    with pytest.raises(PersistenceLayerError, match="Redis store failed on 'k'") as caught:
        store.acquire(lock("k"), NOW_MS)
    assert caught.value.key == "k"
    assert caught.value.__cause__ is not None


@pytest.fixture
def user_without_info(redis_server):
    # A common least-privilege ACL: every command but the @dangerous ones, INFO among them.
    with redis_server.client() as c:
        c.acl_setuser("app", enabled=True, passwords=["+app-pass"], keys=["*"], commands=["+@all", "-@dangerous"])
        yield f"redis://app:app-pass@127.0.0.1:{redis_server.port}/0"
        c.acl_deluser("app")


def test_a_user_who_may_not_run_info_is_told_what_to_grant(user_without_info):
    store = store_from_url(f"{user_without_info}?key_prefix=acl:")
    with pytest.raises(PersistenceLayerError, match=r"may not run: grant it \(ACL \+info\)"):
        store.acquire(lock("k"), NOW_MS)
    store.close()


def test_a_user_who_may_not_run_info_works_once_eviction_is_accepted(user_without_info):
    store = store_from_url(f"{user_without_info}?key_prefix=acl-allowed:&allow_eviction=true")
    held = lock("k")
    assert store.acquire(held, NOW_MS) is None
    store.complete(done(held))
    assert store.get("k").status is RecordStatus.COMPLETE
    store.close()


def test_a_store_built_while_a_cluster_primary_is_down_serves_the_others():
    # With cluster-require-full-coverage no, the healthy slots keep working: a store built now must use them,
    # not fail every record because one primary cannot answer its INFO.
    cluster = start_cluster()
    try:
        for node in cluster.nodes:
            with node.client() as c:
                c.config_set("cluster-require-full-coverage", "no")
        store = store_from_url(f"{cluster.url}?cluster=true&key_prefix=partial:")
        dead = cluster.node_for_slot(16383)
        dead.kill()
        live = [key for key in (f"k{n}" for n in range(30)) if _owner(cluster, key) is not dead]
        assert live
        for key in live:
            held = lock(key)
            assert store.acquire(held, NOW_MS) is None
            store.complete(done(held))
        store.close()
    finally:
        cluster.stop()


def _owner(cluster, key: str):
    return cluster.node_for_slot(key_slot(f"partial:{key}".encode()))
