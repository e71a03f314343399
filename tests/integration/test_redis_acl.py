"""The least-privilege ACL user the README gives the Redis store: every command it grants is needed, and enough.

The grants are read from the README itself, so what it tells operators to run is what runs here, on a real
valkey-server: a standalone one of this module's own (its scripts are flushed, so ``EVAL`` is needed too), and
the session's three-primary cluster.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from records import NOW_MS, done, lock
from redis_server import start_standalone

from persistence import PersistenceLayerError
from persistence.redis import RedisPersistenceLayer

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
# The README's block: the user's grants on any server, then what a cluster adds.
STANDALONE, CLUSTER = re.findall(r"^ACL SETUSER idempotency (.+)$", README, re.MULTILINE)
GRANTED = [rule[1:] for rule in STANDALONE.split() if rule.startswith("+")]
CLUSTER_GRANTED = [rule[1:] for rule in CLUSTER.split()]
PASSWORD = "acl-test-password"


@pytest.fixture(scope="module")
def server():
    server = start_standalone()
    yield server
    server.cleanup()


def _set_user(client, user: str, rules: str, *, without: str | None = None) -> None:
    kept = [r for r in rules.replace(">PASSWORD", f">{PASSWORD}").split() if r != f"+{without}"]
    client.execute_command("ACL", "SETUSER", user, *kept)


def _every_operation(url: str, admins) -> None:
    """What the store and the CLI's ``records`` commands send: every transition, reads, a scan, a delete."""
    for admin in admins:
        admin.script_flush()  # a fresh or restarted server: the scripts run by EVAL first
    store = RedisPersistenceLayer(url=url)  # key_prefix "idempotency:", the README's ~idempotency:*
    try:
        keys = [f"acl-{uuid.uuid4().hex}" for _ in range(4)]  # spread over a cluster's primaries
        for key in keys:
            held = lock(key)
            assert store.acquire(held, NOW_MS) is None
            store.complete(done(held))
        assert store.acquire(lock(keys[0]), NOW_MS) is not None  # a duplicate: the record that blocks it
        released = lock(f"acl-{uuid.uuid4().hex}")
        assert store.acquire(released, NOW_MS) is None
        store.release(released)
        assert store.get(keys[0]) is not None
        assert set(keys) <= {record.key for record in store.scan()}
        assert all(store.delete(key) for key in keys)
    finally:
        store.close()


def _refused(admins, user: str) -> set[str]:
    return {entry["object"] for admin in admins for entry in admin.acl_log() if entry["username"] == user}


def test_the_readme_grants_are_enough_and_nothing_else_is_asked_for(server):
    user = f"idempotency-{uuid.uuid4().hex[:8]}"
    with server.client(decode_responses=True) as admin:
        admin.acl_log_reset()
        _set_user(admin, user, STANDALONE)
        _every_operation(f"redis://{user}:{PASSWORD}@127.0.0.1:{server.port}/0", [admin])
        assert _refused([admin], user) == set()


@pytest.mark.parametrize("command", GRANTED)
def test_each_command_the_readme_grants_is_needed(server, command):
    user = f"idempotency-{uuid.uuid4().hex[:8]}"
    with server.client(decode_responses=True) as admin:
        admin.acl_log_reset()
        _set_user(admin, user, STANDALONE, without=command)
        url = f"redis://{user}:{PASSWORD}@127.0.0.1:{server.port}/0"
        if command == "client|setinfo":  # redis-py names itself on connecting and goes on when refused
            _every_operation(url, [admin])
        else:
            with pytest.raises(PersistenceLayerError, match=re.escape(command.partition("|")[0])):
                _every_operation(url, [admin])
        assert _refused([admin], user) == {command}


@pytest.mark.parametrize("without", [None, *CLUSTER_GRANTED])
def test_a_cluster_needs_the_readme_grants_and_what_it_adds(redis_cluster, without):
    user = f"idempotency-{uuid.uuid4().hex[:8]}"
    admins = [node.client(decode_responses=True) for node in redis_cluster.nodes]
    try:
        for admin in admins:
            admin.acl_log_reset()
            _set_user(admin, user, STANDALONE)
            _set_user(admin, user, CLUSTER, without=without)
        url = f"redis://{user}:{PASSWORD}@127.0.0.1:{redis_cluster.nodes[0].port}/0?cluster=true"
        if without is None:
            _every_operation(url, admins)
            assert _refused(admins, user) == set()
        else:
            with pytest.raises(PersistenceLayerError):
                _every_operation(url, admins)
            assert _refused(admins, user) == {without}
    finally:
        for admin in admins:
            admin.acl_deluser(user)
            admin.close()
