"""Fixtures shared by every test: the DynamoDB Local server and a store of each backend."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import dynamodb_local
import pytest
from faces import FACES
from redis_server import ValkeyCluster, ValkeyServer, start_cluster, start_standalone
from stores import StoreFactory, close_built_stores

from consumer import _context
from persistence import DynamoDBPersistenceLayer

# The helpers tests import assert as tests do: say what differed when they fail.
pytest.register_assert_rewrite("replays")

# No test may reach real AWS, whatever the developer's environment holds.
for _name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
    os.environ.pop(_name, None)
os.environ.update(AWS_DEFAULT_REGION="us-east-1", AWS_ACCESS_KEY_ID="local", AWS_SECRET_ACCESS_KEY="local")
os.environ.pop("AWS_LAMBDA_FUNCTION_NAME", None)
os.environ.pop("IDEMPOTENCY_DISABLED", None)
os.environ.pop("IDEMPOTENCY_METRICS", None)  # metrics go to stdout only where a test asks for them
os.environ.pop("IDEMPOTENCY_METRICS_NAMESPACE", None)


@pytest.fixture(scope="session")
def ddb_server() -> Iterator[dynamodb_local.DynamoDBLocal]:
    server = dynamodb_local.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[ValkeyServer]:
    """A standalone valkey-server on a free loopback port, for the whole session (no persistence)."""
    server = start_standalone()
    yield server
    server.cleanup()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[ValkeyCluster]:
    """A three-primary valkey cluster on loopback, for the whole session (about 2 s to form)."""
    cluster = start_cluster()
    yield cluster
    cluster.stop()


CUSTOM_NAMES = {
    "key_attr": "pk",
    "expiry_attr": "ttl",
    "in_progress_expiry_attr": "lock_until",
    "status_attr": "state",
    "data_attr": "result",
    "validation_key_attr": "hash",
    "lease_attr": "token",
}
BACKENDS = ["memory", "sqlite", "dynamodb", "dynamodb-composite", "dynamodb-custom-names", "redis", "redis-cluster"]


def _factory(backend: str, request: pytest.FixtureRequest, tmp_path) -> StoreFactory:
    if backend == "memory":
        return StoreFactory("memory", {"id": request.node.nodeid})
    if backend == "sqlite":
        return StoreFactory("sqlite", {"path": str(tmp_path / "idempotency.sqlite3")})
    if backend in ("redis", "redis-cluster"):
        redis = request.getfixturevalue("redis_server" if backend == "redis" else "redis_cluster")
        url = redis.url + ("?cluster=true" if backend == "redis-cluster" else "")
        return StoreFactory("redis", {"url": url, "key_prefix": f"t{uuid.uuid4().hex[:12]}:"})
    server: dynamodb_local.DynamoDBLocal = request.getfixturevalue("ddb_server")
    options: dict[str, Any] = {}
    if backend == "dynamodb-composite":
        options = {"sort_key_attr": "sk", "static_pk_value": "idempotency#orders"}
        options["table_name"] = server.create_table(key_attr="id", sort_key_attr="sk")
    elif backend == "dynamodb-custom-names":
        options = dict(CUSTOM_NAMES)
        options["table_name"] = server.create_table(key_attr="pk")
    else:
        options["table_name"] = server.create_table()
    return StoreFactory("dynamodb", options, server.endpoint_url)


@pytest.fixture(params=BACKENDS)
def store_factory(request: pytest.FixtureRequest, tmp_path) -> Iterator[StoreFactory]:
    """A factory for each backend, DynamoDB also on a composite-key table and with custom names."""
    yield _factory(request.param, request, tmp_path)
    close_built_stores()


@pytest.fixture(params=["memory", "sqlite", "dynamodb", "redis"])
def race_factory(request: pytest.FixtureRequest, tmp_path) -> Iterator[StoreFactory]:
    """A factory for each kind of backend (for the slower concurrency tests)."""
    yield _factory(request.param, request, tmp_path)
    close_built_stores()


@pytest.fixture
def store(store_factory: StoreFactory) -> Any:
    return store_factory()


@pytest.fixture
def counted(ddb_server) -> tuple[Any, list[str]]:
    """A DynamoDB store on a fresh table, and the list of operations it sends (from a botocore hook)."""
    client = ddb_server.client()
    sent: list[str] = []

    def record(request, **_: Any) -> None:
        sent.append(request.headers["X-Amz-Target"].decode().split(".")[-1])

    client.meta.events.register("before-send.dynamodb.*", record)
    return DynamoDBPersistenceLayer(table_name=ddb_server.create_table(), boto3_client=client), sent


@pytest.fixture(params=FACES, ids=lambda face: face.name)
def face(request: pytest.FixtureRequest) -> Any:
    """The sync or the async API (``tests/faces.py``): a test that takes it proves both."""
    return request.param


@pytest.fixture(autouse=True)
def _no_guard_left_entered() -> Iterator[None]:
    """Each test starts and ends outside any guard: a test may leave one entered on purpose (a stale holder that
    never exits, an async exit that raised out of ``asyncio.run`` before its context came back), and the key it
    left would be ``current_idempotency_key()`` for the next test, or for the doctests run after the tests."""
    _context._guard.set(None)
    yield
    _context._guard.set(None)
