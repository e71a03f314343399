"""The valkey servers the Redis store is tested on are real: scripts, slots and processes behave as on a server."""

from __future__ import annotations

import socket
import uuid

import pytest
import redis
from redis_server import HOST, FaultProxy, ValkeyCluster, ValkeyServer, slot_ranges, start_standalone

# Increments the number stored at KEYS[1] by ARGV[1] and returns the new value: touches one key.
ADD = "return redis.call('INCRBY', KEYS[1], ARGV[1])"


@pytest.fixture(params=["standalone", "cluster"])
def server(request: pytest.FixtureRequest) -> ValkeyServer | ValkeyCluster:
    """The session's standalone server, then its cluster."""
    return request.getfixturevalue("redis_server" if request.param == "standalone" else "redis_cluster")


def _key(name: str) -> bytes:
    return f"server-test:{uuid.uuid4().hex}:{name}".encode()


def test_set_then_get_returns_the_bytes_stored(server):
    key, value = _key("plain"), "é 1\x00".encode()
    with server.client() as c:
        assert c.set(key, value) is True
        assert c.get(key) == value
        assert c.get(_key("never-set")) is None


def test_eval_runs_lua_on_the_server_against_one_key(server):
    key = _key("counter")
    with server.client() as c:
        assert c.eval(ADD, 1, key, 5) == 5
        assert c.eval(ADD, 1, key, 2) == 7
        assert c.get(key) == b"7"


def test_evalsha_runs_a_loaded_script_and_fails_with_noscript_once_scripts_are_flushed(server):
    key = _key("counter")
    with server.client() as c:
        sha = c.script_load(ADD)
        assert c.evalsha(sha, 1, key, 3) == 3
        c.script_flush()
        with pytest.raises(redis.exceptions.NoScriptError):
            c.evalsha(sha, 1, key, 3)
        assert c.get(key) == b"3"
        assert c.script_load(ADD) == sha  # the same text loads under the same SHA again
        assert c.evalsha(sha, 1, key, 1) == 4


def test_a_script_loaded_through_the_cluster_client_is_on_every_primary(redis_cluster):
    with redis_cluster.client() as c:
        c.script_flush()
        sha = c.script_load(ADD)
    for node in redis_cluster.nodes:
        with node.client() as direct:
            assert direct.script_exists(sha) == [True], node.port


def test_the_client_resends_a_script_whose_answer_was_lost_so_it_runs_twice(redis_server):
    key = _key("resent")
    with redis_server.client() as c:
        sha = c.script_load(ADD)
    proxy = FaultProxy(redis_server.port)
    proxy.arm((key,), "lost_reply")
    try:
        with redis.Redis(host=HOST, port=proxy.port) as c:  # redis-py's defaults: up to ten resends
            assert c.evalsha(sha, 1, key, 1) == 2  # one call, two runs: every script must be safe to run again
    finally:
        proxy.close()
    assert proxy.injected["lost_reply"] == 1


def _owners(cluster: ValkeyCluster) -> dict[int, int]:
    """Port of the primary that owns each slot, as the first node's CLUSTER NODES says."""
    with cluster.nodes[0].client() as c:
        lines = c.execute_command("CLUSTER", "NODES").decode().splitlines()
    owners: dict[int, int] = {}
    for line in lines:
        fields = line.split()
        port = int(fields[1].split("@")[0].rsplit(":", 1)[1])
        assert "master" in fields[2].split(","), line
        for spec in fields[8:]:
            first, _, last = spec.partition("-")
            owners.update(dict.fromkeys(range(int(first), int(last or first) + 1), port))
    return owners


def test_cluster_nodes_show_the_slots_split_in_three_among_the_primaries(redis_cluster):
    owners = _owners(redis_cluster)
    assert len(owners) == 16384
    ports = [node.port for node in redis_cluster.nodes]
    for port, (first, last) in zip(ports, slot_ranges(3), strict=True):
        assert {s for s, p in owners.items() if p == port} == set(range(first, last + 1))
    assert slot_ranges(3) == [(0, 5460), (5461, 10922), (10923, 16383)]


def _keys_on_every_primary(cluster: ValkeyCluster, prefix: str) -> dict[bytes, int]:
    """Keys under ``prefix`` and their slots (by CLUSTER KEYSLOT), until each primary owns two."""
    owners = _owners(cluster)
    keys: dict[bytes, int] = {}
    per_port = dict.fromkeys((node.port for node in cluster.nodes), 0)
    with cluster.nodes[0].client() as c:
        for i in range(200):
            key = f"{prefix}{i}".encode()
            slot = int(c.execute_command("CLUSTER", "KEYSLOT", key))
            keys[key] = slot
            per_port[owners[slot]] += 1
            if min(per_port.values()) >= 2:
                return keys
    pytest.fail(f"200 keys did not reach every primary twice: {per_port}")


def test_each_key_is_stored_on_the_primary_that_owns_its_slot(redis_cluster):
    prefix = f"server-test:{uuid.uuid4().hex}:"
    keys = _keys_on_every_primary(redis_cluster, prefix)
    with redis_cluster.client() as c:
        for key in keys:
            c.set(key, key)
    owners = _owners(redis_cluster)
    for key, slot in keys.items():
        owner = redis_cluster.node_for_slot(slot)
        assert owner.port == owners[slot]
        for node in redis_cluster.nodes:
            with node.client() as direct:
                if node is owner:
                    assert direct.get(key) == key
                else:
                    with pytest.raises(redis.exceptions.MovedError, match=f"^{slot} {HOST}:{owner.port}$"):
                        direct.get(key)


def _set_on_every_primary(cluster: ValkeyCluster) -> tuple[str, dict[bytes, int]]:
    """Set keys under a new prefix until each primary holds two; return the prefix and the keys' slots."""
    prefix = f"server-test:{uuid.uuid4().hex}:"
    keys = _keys_on_every_primary(cluster, prefix)
    with cluster.client() as c:
        for key in keys:
            c.set(key, b"1")
    return prefix, keys


def test_a_scan_on_each_primary_finds_only_its_own_keys_and_the_cluster_scan_finds_all(redis_cluster):
    prefix, keys = _set_on_every_primary(redis_cluster)
    with redis_cluster.client() as c:
        assert set(c.scan_iter(match=f"{prefix}*", count=2)) == set(keys)
    for node in redis_cluster.nodes:
        with node.client() as direct:
            found = set(direct.scan_iter(match=f"{prefix}*", count=2))
        assert found == {key for key, slot in keys.items() if redis_cluster.node_for_slot(slot) is node}
        assert found


def test_flush_empties_every_primary_of_the_cluster(redis_cluster):
    prefix, _ = _set_on_every_primary(redis_cluster)
    with redis_cluster.client() as c:
        redis_cluster.flush()
        assert list(c.scan_iter(match=f"{prefix}*")) == []


def test_stop_ends_the_process_and_frees_the_port():
    server = start_standalone()
    with server.client() as c:
        assert c.ping() is True
    server.cleanup()
    assert server.process.returncode == 0
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((HOST, server.port), timeout=5)
    assert not server.directory.exists()


def test_a_durable_server_killed_and_restarted_keeps_every_acknowledged_write():
    server = start_standalone(durable=True)
    try:
        with server.client() as c:
            for i in range(50):
                c.set(f"k{i}", i)
        server.kill()
        assert server.process.returncode == -9
        server = server.restart()
        with server.client() as c:
            assert [int(v) for v in c.mget([f"k{i}" for i in range(50)])] == list(range(50))
    finally:
        server.cleanup()


def test_a_server_without_persistence_restarts_empty():
    server = start_standalone()
    try:
        with server.client() as c:
            c.set("k", 1)
        server.kill()
        server = server.restart()
        with server.client() as c:
            assert c.get("k") is None
    finally:
        server.cleanup()
