"""@idempotent for whole handlers and @idempotent_function for any function, on a plain ``def`` and on an
``async def`` alike (the ``face`` fixture: ``face.define`` makes the function, ``face.call`` calls it)."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from fakes import FakeClock, FakeContext

from consumer import (
    DataArgumentError,
    IdempotencyConfig,
    IdempotencyGuard,
    NestedReplayError,
    current_lambda_context,
    idempotent,
    idempotent_function,
)
from persistence import InMemoryPersistenceLayer

EVENT = {"id": "e-1", "detail-type": "OrderPlaced", "source": "shop", "detail": {"order": "o-1"}}


def test_idempotent_handler_runs_once_and_replays(face):
    store, calls = InMemoryPersistenceLayer(), []

    def handler(event, context):
        calls.append(event["id"])
        return {"status": "booked", "count": 0}

    decorated = idempotent(store=store, clock=FakeClock())(face.define(handler))
    assert face.call(decorated, EVENT, FakeContext()) == {"status": "booked", "count": 0}
    assert face.call(decorated, {**EVENT, "time": "later"}, FakeContext()) == {"status": "booked", "count": 0}
    assert calls == ["e-1"]
    assert decorated.__name__ == "handler"
    assert inspect.iscoroutinefunction(decorated) is (face.name == "async")


def test_idempotent_handler_registers_the_context_for_nested_functions(face):
    store, seen = InMemoryPersistenceLayer(), []
    context = FakeContext()

    def handler(event, ctx):  # on the async face: after a suspension inside the awaited body
        seen.append(current_lambda_context())

    face.call(idempotent(store=store)(face.define(handler)), EVENT, context)
    assert seen == [context]
    assert current_lambda_context() is None  # registered for the length of the call only


def test_a_handler_called_by_keyword_commits_once_and_replays(face):
    store, calls, context = InMemoryPersistenceLayer(), [], FakeContext()

    def handler(evt, ctx):  # passed on positionally, as Powertools does: the names are the handler's own
        calls.append((evt["id"], ctx))
        return len(calls)

    decorated = idempotent(store=store, clock=FakeClock())(face.define(handler))
    assert face.call(decorated, event=EVENT, context=context) == 1
    assert face.call(decorated, EVENT, context=context) == 1  # replayed
    assert face.call(decorated, context=None, event=EVENT) == 1
    assert calls == [("e-1", context)]
    assert len(list(store.scan())) == 1


def test_a_handler_called_without_its_context_fails_naming_it_and_runs_nothing(face):
    store, calls = InMemoryPersistenceLayer(), []

    def handler(event, context):
        calls.append(event)

    decorated = idempotent(store=store)(face.define(handler))
    with pytest.raises(TypeError, match=r"\.handler\(\) missing 1 required positional argument: 'context'"):
        face.call(decorated, EVENT)
    with pytest.raises(TypeError, match=r"\.handler\(\) got an unexpected keyword argument 'ctx'"):
        face.call(decorated, EVENT, ctx=None)
    assert calls == []
    assert list(store.scan()) == []


def test_a_method_under_idempotent_fails_naming_self_and_runs_nothing(face):
    # Called on an instance, the method gets (self, event, context): self would be taken for the event.
    store, calls = InMemoryPersistenceLayer(), []

    class Handlers:
        def handler(self, event, context):
            calls.append((event, context))

    Handlers.handler = idempotent(store=store)(face.define(Handlers.handler))
    with pytest.raises(TypeError, match=r"Handlers\.handler\(\) is called as handler\(event, context\).*self counts"):
        face.call(Handlers().handler, EVENT, None)
    assert calls == []
    assert list(store.scan()) == []


def test_failed_handler_can_run_again(face):
    store, calls = InMemoryPersistenceLayer(), []

    def handler(event, context):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("downstream unavailable")
        return "ok"

    decorated = idempotent(store=store)(face.define(handler))
    with pytest.raises(RuntimeError, match="downstream unavailable"):
        face.call(decorated, EVENT, None)
    assert list(store.scan()) == []  # the lock was released
    assert face.call(decorated, EVENT, None) == "ok"
    assert calls == [1, 1]


def test_idempotent_function_keys_on_its_keyword_argument(face):
    store, calls = InMemoryPersistenceLayer(), []

    def charge(order, note=""):
        calls.append((order["id"], note))
        return order["amount"]

    config = IdempotencyConfig(event_key_jmespath="id")
    decorated = idempotent_function(data_keyword_argument="order", store=store, config=config)(face.define(charge))
    assert face.call(decorated, order={"id": 1, "amount": 10}, note="a") == 10
    assert face.call(decorated, order={"id": 1, "amount": 99}, note="b") == 10
    assert face.call(decorated, order={"id": 2, "amount": 20}) == 20
    assert calls == [(1, "a"), (2, "")]
    assert inspect.iscoroutinefunction(decorated) is (face.name == "async")


def test_failed_function_releases_its_lock(face):
    store, calls = InMemoryPersistenceLayer(), []

    def charge(order):
        calls.append(order["id"])
        if len(calls) == 1:
            raise ConnectionError("card network down")
        return "charged"

    # One name per face: the other face's function, failed, may still be alive (its traceback, a cycle).
    name = f"charge-{face.name}"
    decorated = idempotent_function(data_keyword_argument="order", store=store, name=name)(face.define(charge))
    with pytest.raises(ConnectionError):
        face.call(decorated, order={"id": 1})
    assert list(store.scan()) == []
    assert face.call(decorated, order={"id": 1}) == "charged"
    assert face.call(decorated, order={"id": 1}) == "charged"
    assert calls == [1, 1]


def test_nested_function_replays_inside_a_handler_that_runs_again(face):
    store, charged = InMemoryPersistenceLayer(), []

    def charge(order):
        charged.append(order)
        return {"charged": order}

    inner = idempotent_function(data_keyword_argument="order", store=store)(face.define(charge))

    def handler(event, context):
        return inner(order=event["detail"]["order"])  # awaited by the async face

    outer = idempotent(store=store)(face.define_delegating(handler))
    assert face.call(outer, EVENT, None) == {"charged": "o-1"}
    assert face.call(outer, {**EVENT, "id": "e-2"}, None) == {"charged": "o-1"}  # a new event, the same order
    assert charged == ["o-1"]
    assert len(list(store.scan())) == 3  # e-1, e-2 and the one charge


def test_nested_guard_replay_escaping_the_body_fails_it_and_releases_the_lock(face):
    store, step = InMemoryPersistenceLayer(), {"id": "step-1"}
    with IdempotencyGuard(step, store=store) as done:
        done.result = "step done"

    def handler(event, context):
        with IdempotencyGuard(step, store=store):  # replays: AlreadyProcessed escapes the handler's body
            raise AssertionError("not reached: the step completed before")

    decorated = idempotent(store=store)(face.define(handler))
    with pytest.raises(NestedReplayError) as caught:
        face.call(decorated, EVENT, None)
    assert caught.value.existing_record.key == done.key
    assert [r.key for r in store.scan()] == [done.key]  # the handler's own lock was released


def test_two_functions_on_the_same_data_do_not_share_records(face):
    store = InMemoryPersistenceLayer()

    def charge(order):
        return "charged"

    def ship(order):
        return "shipped"

    charge = idempotent_function(data_keyword_argument="order", store=store)(face.define(charge))
    ship = idempotent_function(data_keyword_argument="order", store=store)(face.define(ship))
    assert (face.call(charge, order={"id": 1}), face.call(ship, order={"id": 1})) == ("charged", "shipped")
    keys = sorted(r.key for r in store.scan())
    scope = "local.test_decorators.test_two_functions_on_the_same_data_do_not_share_records.<locals>"
    assert keys[0].startswith(f"{scope}.charge#")
    assert keys[1].startswith(f"{scope}.ship#")


def test_dataclass_argument_and_result(face):
    @dataclasses.dataclass
    class Order:
        id: int

    store = InMemoryPersistenceLayer()

    def reserve(order):
        return Order(order.id * 10)

    reserve = idempotent_function(data_keyword_argument="order", store=store)(face.define(reserve))
    assert face.call(reserve, order=Order(1)) == Order(10)
    assert face.call(reserve, order=Order(1)) == {"id": 10}  # replayed as JSON data


def test_positional_data_argument_is_a_clear_error(face):
    store, calls = InMemoryPersistenceLayer(), []

    def charge(order):
        calls.append(order)

    # One name per face: the other face's function, refused, may still be alive (its traceback, a cycle).
    name = f"charge-{face.name}"
    decorated = idempotent_function(data_keyword_argument="order", store=store, name=name)(face.define(charge))
    with pytest.raises(DataArgumentError, match=f"{name} is idempotent on 'order'; pass it as a keyword argument"):
        face.call(decorated, {"id": 1})
    assert calls == []


def test_disabled_decorators_always_run(face, monkeypatch):
    monkeypatch.setenv("IDEMPOTENCY_DISABLED", "true")
    store, calls = InMemoryPersistenceLayer(), []

    def handler(event, context):
        calls.append("handler")

    def fn(x):
        calls.append("fn")

    handler = idempotent(store=store)(face.define(handler))
    fn = idempotent_function(data_keyword_argument="x", store=store)(face.define(fn))
    face.call(handler, EVENT, None)
    face.call(handler, EVENT, None)
    face.call(fn, x=1)
    face.call(fn, x=1)
    assert calls == ["handler", "handler", "fn", "fn"]
    assert list(store.scan()) == []
