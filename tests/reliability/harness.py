"""The side-effect ledger harness: batches with duplicates, a recording handler, and the two checks
every scenario ends with: each record's effect exactly once, and nothing lost."""

from __future__ import annotations

import asyncio
import collections
import random
from typing import Any

from events import sqs_record

from consumer import IdempotencyConfig, make_key
from persistence import RecordStatus
from samples.ledger import Ledger


def batch_with_duplicates(unique: int, duplicates: int, seed: int) -> list[dict[str, Any]]:
    """``unique`` SQS records plus ``duplicates`` redeliveries of random ones, shuffled."""
    rng = random.Random(seed)
    records = [sqs_record(f"msg-{i:05d}", {"order": i}) for i in range(unique)]
    records += [dict(rng.choice(records[:unique])) for _ in range(duplicates)]
    rng.shuffle(records)
    return records


def recording_handler(ledger: Ledger, scenario: str, worker: str = "main"):
    """A record handler whose side effect is one ledger row per run, keyed by the message id."""

    def handler(record: Any) -> str:
        ledger.record(scenario, record.message_id, worker)
        return worker

    return handler


def effects(ledger: Ledger, scenario: str) -> collections.Counter[str]:
    """How many times each message's side effect happened."""
    return collections.Counter(key for key, _ in ledger.entries(scenario))


def assert_exactly_once(ledger: Ledger, scenario: str, ids: set[str]) -> int:
    """Every id's effect happened exactly once; returns the number of double effects (0)."""
    counts = effects(ledger, scenario)
    doubles = {k: c for k, c in counts.items() if c > 1}
    missing = ids - set(counts)
    assert not doubles, f"double effects: {doubles}"
    assert not missing, f"never ran: {sorted(missing)[:10]}"
    assert set(counts) == ids
    return len(doubles)


def assert_nothing_lost(store: Any, keys_by_id: dict[str, str], reported_failed: set[str]) -> int:
    """Every record is COMPLETE or was reported failed; returns how many were neither (0)."""
    lost = []
    for message_id, key in keys_by_id.items():
        record = store.get(key)
        if (record is None or record.status is not RecordStatus.COMPLETE) and message_id not in reported_failed:
            lost.append(message_id)
    assert not lost, f"neither COMPLETE nor reported failed: {lost[:10]}"
    return len(lost)


def async_recording_handler(
    ledger: Ledger, scenario: str, worker: str, rng: random.Random, max_delay: float, *, first: Any = None
):
    """An ``async def`` record handler that awaits a random ``0..max_delay`` s on each side of its side effect
    (one ledger row, keyed by the message id) and returns ``worker``, so a replay shows whose run it replays.
    ``first``, if given, is called as the body starts (a barrier)."""

    async def handler(record: Any) -> str:
        if first is not None:
            first()
        await asyncio.sleep(rng.uniform(0, max_delay))
        ledger.record(scenario, record.message_id, worker)
        await asyncio.sleep(rng.uniform(0, max_delay))
        return worker

    return handler


def key_of(record: dict[str, Any], config: IdempotencyConfig) -> str:
    """The record's idempotency key under ``config``."""
    key = make_key(record, config)
    assert key is not None
    return key


def failed_ids(response: dict[str, Any]) -> set[str]:
    """The ids a partial batch response reports failed."""
    return {f["itemIdentifier"] for f in response["batchItemFailures"]}
