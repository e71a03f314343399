"""DynamoDB requests per record through the guard, counted against DynamoDB Local."""

from __future__ import annotations

import pytest

from consumer import AlreadyProcessed, IdempotencyConfig, IdempotencyGuard

RECORD = {"messageId": "m-1", "body": "{}"}


def test_first_time_record_costs_two_requests(counted):
    store, sent = counted
    with IdempotencyGuard(RECORD, store=store) as guard:
        guard.result = "ok"
    assert sent == ["PutItem", "UpdateItem"]


def test_duplicate_costs_one_request(counted):
    store, sent = counted
    with IdempotencyGuard(RECORD, store=store) as guard:
        guard.result = "ok"
    sent.clear()
    with pytest.raises(AlreadyProcessed), IdempotencyGuard(RECORD, store=store):
        pass
    assert sent == ["PutItem"]


def test_local_cache_hit_costs_no_request(counted):
    store, sent = counted
    config = IdempotencyConfig(use_local_cache=True)
    with IdempotencyGuard(RECORD, store=store, config=config) as guard:
        guard.result = "ok"
    sent.clear()
    for _ in range(3):
        with pytest.raises(AlreadyProcessed), IdempotencyGuard(RECORD, store=store, config=config):
            pass
    assert sent == []


def test_failed_body_costs_two_requests(counted):
    store, sent = counted
    with pytest.raises(ZeroDivisionError), IdempotencyGuard(RECORD, store=store):
        _ = 1 / 0
    assert sent == ["PutItem", "DeleteItem"]
