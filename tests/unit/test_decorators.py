"""@idempotent for whole handlers and @idempotent_function for any function."""

from __future__ import annotations

import dataclasses

import pytest
from fakes import FakeClock, FakeContext

from consumer import IdempotencyConfig, current_lambda_context, idempotent, idempotent_function
from persistence import InMemoryPersistenceLayer

EVENT = {"id": "e-1", "detail-type": "OrderPlaced", "source": "shop", "detail": {"order": "o-1"}}


def test_idempotent_handler_runs_once_and_replays():
    store, calls = InMemoryPersistenceLayer(), []

    @idempotent(store=store, clock=FakeClock())
    def handler(event, context):
        calls.append(event["id"])
        return {"status": "booked", "count": 0}

    assert handler(EVENT, FakeContext()) == {"status": "booked", "count": 0}
    assert handler({**EVENT, "time": "later"}, FakeContext()) == {"status": "booked", "count": 0}
    assert calls == ["e-1"]
    assert handler.__name__ == "handler"


def test_idempotent_handler_registers_the_context_for_nested_functions():
    store, seen = InMemoryPersistenceLayer(), []
    context = FakeContext()

    @idempotent(store=store)
    def handler(event, ctx):
        seen.append(current_lambda_context())

    handler(EVENT, context)
    assert seen == [context]


def test_failed_handler_can_run_again():
    store, calls = InMemoryPersistenceLayer(), []

    @idempotent(store=store)
    def handler(event, context):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("downstream unavailable")
        return "ok"

    with pytest.raises(RuntimeError):
        handler(EVENT, None)
    assert handler(EVENT, None) == "ok"
    assert calls == [1, 1]


def test_idempotent_function_keys_on_its_keyword_argument():
    store, calls = InMemoryPersistenceLayer(), []

    @idempotent_function(data_keyword_argument="order", store=store, config=IdempotencyConfig(event_key_jmespath="id"))
    def charge(order, note=""):
        calls.append((order["id"], note))
        return order["amount"]

    assert charge(order={"id": 1, "amount": 10}, note="a") == 10
    assert charge(order={"id": 1, "amount": 99}, note="b") == 10
    assert charge(order={"id": 2, "amount": 20}) == 20
    assert calls == [(1, "a"), (2, "")]


def test_two_functions_on_the_same_data_do_not_share_records():
    store = InMemoryPersistenceLayer()

    @idempotent_function(data_keyword_argument="order", store=store)
    def charge(order):
        return "charged"

    @idempotent_function(data_keyword_argument="order", store=store)
    def ship(order):
        return "shipped"

    assert (charge(order={"id": 1}), ship(order={"id": 1})) == ("charged", "shipped")
    keys = sorted(r.key for r in store.scan())
    scope = "local.test_decorators.test_two_functions_on_the_same_data_do_not_share_records.<locals>"
    assert keys[0].startswith(f"{scope}.charge#")
    assert keys[1].startswith(f"{scope}.ship#")


def test_dataclass_argument_and_result():
    @dataclasses.dataclass
    class Order:
        id: int

    store = InMemoryPersistenceLayer()

    @idempotent_function(data_keyword_argument="order", store=store)
    def reserve(order):
        return Order(order.id * 10)

    assert reserve(order=Order(1)) == Order(10)
    assert reserve(order=Order(1)) == {"id": 10}  # replayed as JSON data


def test_positional_data_argument_is_a_clear_error():
    @idempotent_function(data_keyword_argument="order", store=InMemoryPersistenceLayer())
    def charge(order):
        return 1

    with pytest.raises(TypeError, match="idempotent on 'order': pass it as a keyword argument"):
        charge({"id": 1})


def test_disabled_decorators_always_run(monkeypatch):
    monkeypatch.setenv("IDEMPOTENCY_DISABLED", "true")
    store, calls = InMemoryPersistenceLayer(), []

    @idempotent(store=store)
    def handler(event, context):
        calls.append("handler")

    @idempotent_function(data_keyword_argument="x", store=store)
    def fn(x):
        calls.append("fn")

    handler(EVENT, None)
    handler(EVENT, None)
    fn(x=1)
    fn(x=1)
    assert calls == ["handler", "handler", "fn", "fn"]
    assert list(store.scan()) == []
