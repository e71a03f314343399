"""Every sample, run by the real CLI in its own process against DynamoDB Local: first delivery,
redelivery in a new process, and the poison record reported; side effects counted in the sample's ledger."""

from __future__ import annotations

import base64
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from consumer import AsyncBatchProcessor, EventType
from persistence import InMemoryPersistenceLayer
from samples.ledger import Ledger

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "samples" / "events"
SAMPLE_MODULES = sorted(p.stem for p in (ROOT / "samples").glob("*.py") if p.stem not in {"__init__", "ledger", "demo"})


def seq(n: int) -> str:
    return f"4959{n:020d}"


# sample, its poison record ids, the side-effect keys expected exactly once each
CASES = {
    "sqs_orders": (["1e7f9a3b-8c2d-4f5e-b6a0-3d4c5e6f7a04"], ["o-1001", "o-1002", "o-1004"]),
    # async def handler, 5 at once; message 3f1c... (order o-2001) is delivered twice in the batch
    "async_orders": (["b5c6d7e8-9f0a-4b1c-a2d3-e4f5a6b7c803"], ["o-2001", "o-2002", "o-2004"]),
    "sqs_fifo": (["f-0004", "f-0005"], ["f-0001", "f-0002", "f-0003", "f-0006"]),
    "kinesis_clickstream": ([seq(5)], [seq(1), seq(2), seq(3), seq(6)]),  # seq 4 repeats click c-002
    "dynamodb_stream_audit": (["111000000000000000003"], ["111000000000000000001", "111000000000000000002",
                                                          "111000000000000000004"]),
    # Kafka names a failure by topic-partition and offset; offset 12 is the producer's retry of order o-3001
    "kafka_orders": ([{"partition": "orders-0", "offset": 13}], ["o-3001", "o-3002", "o-3004", "o-3005"]),
}  # fmt: skip


def invoke(sample: str, event: str, store_url: str, ledger: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SAMPLES_LEDGER": str(ledger), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "consumer.cli", "invoke", f"samples.{sample}:handler",
               "--event", str(EVENTS / f"{event}.json"), "--store", store_url, *extra]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120, check=False)


@pytest.fixture
def store_url(ddb_server):
    return f"dynamodb://{ddb_server.create_table()}?endpoint_url={ddb_server.endpoint_url}&region=us-east-1"


@pytest.mark.parametrize("sample", list(CASES))
def test_batch_sample_processes_once_and_reports_its_poison_record(sample, store_url, tmp_path):
    poison, effects = CASES[sample]
    ledger_path = tmp_path / "ledger.sqlite3"
    for delivery in ("first", "redelivery"):
        result = invoke(sample, sample, store_url, ledger_path)
        assert result.returncode == 0, result.stderr
        response = json.loads(result.stdout)
        assert [f["itemIdentifier"] for f in response["batchItemFailures"]] == poison, delivery
        # Sorted: the Kinesis sample runs partition keys in parallel; a double effect still shows twice.
        assert sorted(key for key, _ in Ledger(str(ledger_path)).entries(sample)) == sorted(effects), delivery


def test_async_sample_counts_processed_replayed_and_failed_after_its_sync_handler_returns(monkeypatch, tmp_path):
    # The summary is set inside the task asyncio.run creates; the sync handler's caller reads it all the same.
    from samples import async_orders  # noqa: PLC0415 - in this process, on an in-memory store

    processor = AsyncBatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer(), config=async_orders.config)
    monkeypatch.setattr(async_orders, "processor", processor)
    monkeypatch.setattr(async_orders, "warehouse", Ledger(str(tmp_path / "ledger.sqlite3")))
    async_orders.handler(json.loads((EVENTS / "async_orders.json").read_text()), None)
    assert len(async_orders.warehouse.entries("async_orders")) == 3  # the batch did run
    summary = processor.summary
    assert summary is not None
    assert (summary.processed, summary.replayed, summary.failed) == (3, 1, 1)


def test_eventbridge_target_sends_once_and_replays_the_response(store_url, tmp_path):
    ledger_path = tmp_path / "ledger.sqlite3"
    outputs = [invoke("eventbridge_target", "eventbridge_target", store_url, ledger_path) for _ in range(2)]
    assert [o.returncode for o in outputs] == [0, 0]
    assert outputs[0].stdout == outputs[1].stdout == '{"booking_id": "b-501", "confirmation": "sent"}\n'
    assert len(Ledger(str(ledger_path)).entries("eventbridge_target")) == 1


def test_eventbridge_poison_event_fails_the_invocation_and_leaves_no_lock(store_url, tmp_path, ddb_server):
    ledger_path = tmp_path / "ledger.sqlite3"
    result = invoke("eventbridge_target", "eventbridge_target_poison", store_url, ledger_path)
    assert result.returncode == 1
    assert "booking b-502 has no email" in result.stderr
    assert "Traceback" not in result.stderr
    table = store_url.split("//")[1].split("?")[0]
    assert ddb_server.client().scan(TableName=table)["Count"] == 0  # released: a retry can run it
    assert Ledger(str(ledger_path)).entries("eventbridge_target") == []


def test_make_demo_tells_the_story(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-m", "samples.demo"], capture_output=True, text=True, env=env,
                            cwd=tmp_path, timeout=120, check=True)  # fmt: skip
    out = result.stdout
    assert out.count("charged   order") == 3
    assert out.count("replayed  order o-1001") == 3  # the duplicate in delivery 1, both in delivery 2
    assert out.count("replayed  order") == 5
    assert out.count("FAILED    order o-1003") == 2
    assert "Payments ledger: 3 charges for 3 orders." in out
    assert result.stderr == ""


def _payloads(sample: str, event: dict) -> list[dict]:
    """The payload of each record of ``event``, where the sample's source carries it (a record without one left out)."""
    if sample == "eventbridge_target":
        return [event["detail"]]
    if sample == "kinesis_clickstream":  # a record whose data is not JSON: the poison record
        data = [base64.b64decode(r["kinesis"]["data"]) for r in event["Records"]]
        return [json.loads(d) for d in data if d.startswith(b"{")]
    if sample == "dynamodb_stream_audit":
        images = [r["dynamodb"].get("NewImage") or r["dynamodb"].get("OldImage") for r in event["Records"]]
        return [image for image in images if image is not None]  # a change without its image: the poison record
    if sample == "kafka_orders":
        return [json.loads(base64.b64decode(r["value"])) for rs in event["records"].values() for r in rs]
    return [json.loads(r["body"]) for r in event["Records"]]


@pytest.mark.parametrize("sample", SAMPLE_MODULES)
def test_each_sample_names_the_payload_it_expects_and_its_event_carries_it(sample):
    doc = importlib.import_module(f"samples.{sample}").__doc__
    found = re.search(
        r"\nPayload: (?P<where>.*?)\(``(?P<event>[^`]+)``\)::\n\n    (?P<example>\{.*?\})\n", doc, re.DOTALL
    )
    assert found, f"samples/{sample}.py: its docstring names no payload"
    assert found["event"] == f"samples/events/{sample}.json"
    example = set(json.loads(found["example"]))
    payloads = _payloads(sample, json.loads((ROOT / found["event"]).read_text()))
    assert payloads
    assert all(set(payload) <= example for payload in payloads), payloads  # no field the docstring does not name
    assert any(set(payload) == example for payload in payloads), payloads  # and the example is a real one


def test_account_transfers_debit_once_with_their_records_and_a_refused_debit_writes_nothing(
    store_url, tmp_path, ddb_server
):
    accounts = ddb_server.create_table(key_attr="pk")
    client = ddb_server.client()
    client.put_item(TableName=accounts, Item={"pk": {"S": "acc-1"}, "balance": {"N": "100"}})
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ACCOUNTS_TABLE": accounts}
    command = [sys.executable, "-m", "consumer.cli", "invoke", "samples.account_transfers:handler",
               "--event", str(EVENTS / "account_transfers.json"), "--store", store_url]  # fmt: skip
    for delivery in ("first", "redelivery"):
        result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120, check=False)
        assert result.returncode == 0, result.stderr
        failures = [f["itemIdentifier"] for f in json.loads(result.stdout)["batchItemFailures"]]
        assert failures == ["7a1c0e52-0003-4c1b-9d37-0e2d4f1a7c03"], delivery  # tr-3: 500 is not covered
        items = {i["pk"]["S"]: i for i in client.scan(TableName=accounts, ConsistentRead=True)["Items"]}
        assert sorted(items) == ["acc-1", "transfer#tr-1", "transfer#tr-2"], delivery
        assert items["acc-1"]["balance"] == {"N": "20"}, delivery
    table = store_url.split("//")[1].split("?")[0]
    statuses = sorted(i["status"]["S"] for i in client.scan(TableName=table, ConsistentRead=True)["Items"])
    assert statuses == ["COMPLETE", "COMPLETE"]  # tr-3's lock was released with its refusal
