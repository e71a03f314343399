"""Eight worker processes each process the same 500-record SQS batch (shuffled, with overlapping
duplicates), redelivering what failed until nothing does: every record's effect happens exactly once."""

from __future__ import annotations

import multiprocessing
import random
import time

import pytest
from harness import assert_exactly_once, assert_nothing_lost, batch_with_duplicates, recording_handler

from consumer import BatchProcessor, EventType, IdempotencyConfig, make_key
from samples.ledger import Ledger

WORKERS, UNIQUE, DUPLICATES = 8, 400, 100
CONFIG = IdempotencyConfig(lock_timeout_seconds=120)


def _worker(factory, records, ledger_path, worker, results) -> None:
    try:
        rng = random.Random(worker)
        pending = rng.sample(records, len(records))
        processor = BatchProcessor(EventType.SQS, store=factory(), config=CONFIG, raise_on_entire_batch_failure=False)
        handler = recording_handler(Ledger(ledger_path), "concurrent", f"w{worker}")
        deliveries, first_failed = 0, None
        for _ in range(200):  # SQS redelivers what was reported failed
            deliveries += len(pending)
            failed = {
                f["itemIdentifier"] for f in processor.process({"Records": pending}, handler)["batchItemFailures"]
            }
            first_failed = failed if first_failed is None else first_failed
            pending = [r for r in pending if r["messageId"] in failed]
            if not pending:
                break
            time.sleep(0.02)  # let the holders of those locks finish
        results.put((worker, deliveries, len(pending), sorted(first_failed or ())))
    except BaseException as e:
        results.put((worker, e))
        raise


@pytest.mark.slow
@pytest.mark.parametrize("race_factory", ["sqlite", "dynamodb", "redis"], indirect=True)
def test_eight_processes_one_batch_exactly_once(race_factory, tmp_path, report):
    records = batch_with_duplicates(UNIQUE, DUPLICATES, seed=7)
    ledger_path = str(tmp_path / "ledger.sqlite3")
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(race_factory, records, ledger_path, w, results)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    errors = [o[1] for o in outcomes if len(o) == 2]
    assert not errors, errors
    assert all(left == 0 for _, _, left, _ in outcomes), "records still failing after 200 redeliveries"
    ids = {r["messageId"] for r in records}
    doubles = assert_exactly_once(Ledger(ledger_path), "concurrent", ids)
    keys = {r["messageId"]: make_key(r, CONFIG) for r in records}
    lost = assert_nothing_lost(race_factory(), keys, set())
    deliveries = sum(d for _, d, _, _ in outcomes)
    conflicts = sum(len(f) for *_, f in outcomes)
    faults = f"{conflicts} lock conflicts"
    duplicates = deliveries - len(ids)
    report(
        records=len(ids), deliveries=deliveries, duplicates=duplicates, faults=faults, double_effects=doubles, lost=lost
    )
