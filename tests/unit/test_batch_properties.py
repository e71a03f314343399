"""Hypothesis over random batches: nothing is lost (every record is committed or reported failed), and
records sharing an ordering key take effect in arrival order, whatever fails and however many workers, through
BatchProcessor and AsyncBatchProcessor alike (``FACES``: Hypothesis refuses the function-scoped ``face`` fixture),
in memory and on Redis, standalone and cluster."""

from __future__ import annotations

import threading
import uuid

import pytest
from events import kafka_event, kafka_record, kinesis_record, sqs_event, sqs_record
from faces import FACES
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer import EventType
from persistence import InMemoryPersistenceLayer
from persistence.redis import RedisPersistenceLayer

SOURCES = st.sampled_from(["sqs", "fifo", "kinesis", "kafka"])
TOPIC_PARTITIONS = {"A": ("orders", 0), "B": ("orders", 1), "C": ("payments", 0)}


@st.composite
def batches(draw):
    source = draw(SOURCES)
    size = draw(st.integers(1, 25))
    ids = draw(st.lists(st.integers(0, size - 1), min_size=size, max_size=size))  # repeats are redeliveries
    key_of = draw(st.lists(st.sampled_from("ABC"), min_size=size, max_size=size))
    keys = [key_of[n] for n in ids]  # a redelivered copy keeps its ordering key
    poison = draw(st.sets(st.integers(0, size - 1)))  # positions whose id is poison
    options = draw(
        st.fixed_dictionaries(
            {
                "max_workers": st.sampled_from([1, 3]),
                "stop_on_first_failure": st.booleans(),
                "skip_group_on_error": st.booleans(),
            }
        )
    )
    if source == "kafka":  # a record is never redelivered within one batch: every offset is its own
        records = [kafka_record(*TOPIC_PARTITIONS[key], i, {"n": i}) for i, key in enumerate(keys)]
        # The event groups records by topic-partition: arrival order is that flattened order.
        records = [r for group in kafka_event(*records)["records"].values() for r in group]
    elif source == "kinesis":
        records = [kinesis_record(i, key, {"n": n}) for i, (key, n) in enumerate(zip(keys, ids, strict=True))]
        for record, n in zip(records, ids, strict=True):  # a redelivered record keeps its id
            record["eventID"] = f"shard:{n}"
    else:
        group = source == "fifo"
        records = [
            sqs_record(f"m{n}", {"n": n}, group=key if group else None) for key, n in zip(keys, ids, strict=True)
        ]
    return source, records, poison, options


def identifier(record):
    """What batchItemFailures names (for Kafka: its partition and offset, as one string)."""
    if "topic" in record:
        return f"{record['topic']}-{record['partition']}@{record['offset']}"
    return record["kinesis"]["sequenceNumber"] if "kinesis" in record else record["messageId"]


def logical(record):
    """The record's own id: redelivered copies share it (and so their idempotency key)."""
    if "topic" in record:
        return identifier(record)
    return record["eventID"] if "kinesis" in record else record["messageId"]


@pytest.fixture(scope="module", params=["memory", "redis", "redis-cluster"])
def new_store(request):
    """Builds an empty store for each example: in memory, or on the session's Redis server or cluster (a key
    prefix of the example's own, on one client per module). Module-scoped: Hypothesis refuses function scope."""
    if request.param == "memory":
        yield InMemoryPersistenceLayer
        return
    server = request.getfixturevalue("redis_server" if request.param == "redis" else "redis_cluster")
    client = server.client()
    yield lambda: RedisPersistenceLayer(client, key_prefix=f"p{uuid.uuid4().hex[:12]}:")
    client.close()


@pytest.mark.parametrize("face", FACES, ids=lambda face: face.name)
@settings(max_examples=150, deadline=None)
@given(batch=batches())
def test_nothing_lost_and_per_key_order_kept(face, new_store, batch):
    source, records, poison, options = batch
    event_type = {"kinesis": EventType.KINESIS, "kafka": EventType.KAFKA}.get(source, EventType.SQS)
    effects, lock = [], threading.Lock()
    poison_ids = {logical(records[i]) for i in poison}

    def handler(record):
        raw = record.raw
        with lock:
            effects.append(logical(raw))
        if logical(raw) in poison_ids:
            raise ValueError("poison")

    processor = face.processor(event_type, store=new_store(), raise_on_entire_batch_failure=False, **options)
    event = {"sqs": sqs_event, "fifo": sqs_event, "kafka": kafka_event}.get(source, lambda *r: {"Records": list(r)})
    response = face.process(event(*records), handler, processor)
    failed = {failure_id(f["itemIdentifier"]) for f in response["batchItemFailures"]}

    # 1. Nothing lost: every record succeeded (ran and committed, or replayed a committed copy) or is reported.
    for item in processor.items:
        assert item.outcome.succeeded or item.item_id in failed
    assert {identifier(r) for r in records} <= {i.item_id for i in processor.items if i.outcome.succeeded} | failed
    # 2. A poison record is never reported successful.
    assert not poison_ids & {logical(i.raw) for i in processor.items if i.outcome.succeeded}
    # 3. Per ordering key, effects happen in arrival order, and nothing after a failure in that key runs.
    if source != "sqs":
        for key in "ABC":
            arrival = list(dict.fromkeys(logical(r) for r in records if ordering_key(r) == key))
            ran = [e for e in effects if e in arrival]
            assert ran == arrival[: len(ran)]
            failed_at = next((i for i, e in enumerate(ran) if e in poison_ids), None)
            assert failed_at is None or failed_at == len(ran) - 1


def failure_id(identifier):
    """An itemIdentifier as a string: Kafka names a record by an object."""
    return f"{identifier['partition']}@{identifier['offset']}" if isinstance(identifier, dict) else identifier


def ordering_key(record):
    if "topic" in record:
        return next(k for k, tp in TOPIC_PARTITIONS.items() if tp == (record["topic"], record["partition"]))
    return record["kinesis"]["partitionKey"] if "kinesis" in record else record["attributes"]["MessageGroupId"]
