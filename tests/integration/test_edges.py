"""The API's edges on every backend: nested guards, coroutines and generators, unstorable results.

Each test pins a path where a record used to be lost (reported done, body unfinished) or run twice.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime as dt
import decimal
import functools
import logging

import pytest
from events import failures, sqs_event, sqs_record
from fakes import FakeClock

from consumer import (
    AlreadyProcessed,
    BatchProcessor,
    EventType,
    IdempotencyConfig,
    IdempotencyGuard,
    InvalidResultError,
    NestedReplayError,
    idempotent,
    idempotent_function,
    process_partial_response,
)
from persistence import RecordStatus

STEP = IdempotencyConfig(event_key_jmespath="step", key_prefix="steps")


class Order:
    """A record handler that charges through a guard of its own, then ships; shipping fails once."""

    def __init__(self, store) -> None:
        self.store, self.charged, self.shipped, self.ship_failures = store, 0, 0, 1

    def __call__(self, record) -> str:
        with IdempotencyGuard({"step": f"charge-{record.message_id}"}, store=self.store, config=STEP) as g:
            self.charged += 1
            g.result = "charged"
        if self.ship_failures:
            self.ship_failures -= 1
            raise ConnectionError("carrier down")
        self.shipped += 1
        return "shipped"


# -- 1. only a guard's own __enter__ is a replay ------------------------------------------------------


def test_nested_guard_replay_fails_the_outer_record_instead_of_reporting_it_done(store):
    handler = Order(store)
    processor = BatchProcessor(EventType.SQS, store=store, raise_on_entire_batch_failure=False)
    event = sqs_event(sqs_record("m-1", {"order": 1}))
    assert failures(process_partial_response(event, handler, processor)) == ["m-1"]
    # Redelivery: the charge step replays and escapes the body before shipping ran.
    assert failures(process_partial_response(event, handler, processor)) == ["m-1"]
    assert (handler.charged, handler.shipped) == (1, 0)
    assert processor.summary.failed == 1
    assert processor.summary.replayed == 0
    outer = IdempotencyGuard(event["Records"][0], store=store)
    with outer:  # the outer lock was released, not committed: the record can still run
        outer.result = "ran"


def test_escaping_nested_replay_is_a_nested_replay_error_chained_to_the_inner_outcome(store):
    with IdempotencyGuard({"step": "a"}, store=store, config=STEP) as g:
        g.result = 1
    with (
        pytest.raises(NestedReplayError) as raised,
        IdempotencyGuard({"messageId": "outer"}, store=store),
        IdempotencyGuard({"step": "a"}, store=store, config=STEP),
    ):
        pytest.fail("the inner body must not run")
    assert not isinstance(raised.value, AlreadyProcessed)
    assert isinstance(raised.value.__cause__, AlreadyProcessed)
    assert raised.value.__cause__.response == 1
    assert raised.value.existing_record.status is RecordStatus.COMPLETE
    with IdempotencyGuard({"messageId": "outer"}, store=store) as outer:  # released, runs again
        outer.result = "ran"


def test_idempotent_handler_does_not_answer_with_a_nested_steps_stored_response(store):
    with IdempotencyGuard({"step": "reserve"}, store=store, config=STEP) as g:
        g.result = {"reserved": True}

    @idempotent(store=store)
    def handler(event, context):
        with IdempotencyGuard({"step": "reserve"}, store=store, config=STEP):
            pass
        return {"booked": True}

    with pytest.raises(NestedReplayError):
        handler({"id": "e-1", "detail-type": "Booked"}, None)


def test_idempotent_function_does_not_return_a_nested_steps_stored_response(store):
    with IdempotencyGuard({"step": "reserve"}, store=store, config=STEP) as g:
        g.result = "inner"

    @idempotent_function(data_keyword_argument="order", store=store)
    def book(order):
        with IdempotencyGuard({"step": "reserve"}, store=store, config=STEP):
            pass
        return "outer"

    with pytest.raises(NestedReplayError):
        book(order={"id": 1})
    assert [r.key for r in store.scan() if not r.key.startswith("steps#")] == []  # outer lock released


def test_a_nested_replay_caught_in_the_body_lets_the_outer_record_finish(store):
    handler = Order(store)
    processor = BatchProcessor(EventType.SQS, store=store, raise_on_entire_batch_failure=False)
    event = sqs_event(sqs_record("m-1", {"order": 1}))
    process_partial_response(event, handler, processor)  # charged, then shipping failed

    def resumable(record):
        try:
            with IdempotencyGuard({"step": f"charge-{record.message_id}"}, store=store, config=STEP) as g:
                handler.charged += 1
                g.result = "charged"
        except AlreadyProcessed:
            pass
        handler.shipped += 1

    assert failures(process_partial_response(event, resumable, processor)) == []
    assert (handler.charged, handler.shipped) == (1, 1)


# -- 2. coroutines and generators are never results -----------------------------------------------------


async def _charge_async(record):
    return {"charged": record.message_id}


def test_async_record_handler_is_refused_by_the_sync_processor_before_any_record_runs(store):
    processor = BatchProcessor(EventType.SQS, store=store)

    async def handler(record):
        return 1

    with pytest.raises(TypeError, match=r"is async.*Use AsyncBatchProcessor"):
        process_partial_response(sqs_event(sqs_record("m-1", 1)), handler, processor)
    assert list(store.scan()) == []


@pytest.mark.parametrize(
    "handler",
    [
        pytest.param(lambda record: _charge_async(record), id="returns-coroutine"),  # noqa: PLW0108 - a plain def
        pytest.param(lambda record: (x for x in [record.message_id]), id="returns-generator"),
        pytest.param(lambda record: asyncio.sleep(0), id="returns-awaitable"),
    ],
)
def test_a_returned_coroutine_or_generator_fails_its_record_and_is_never_committed(store, handler):
    processor = BatchProcessor(EventType.SQS, store=store, raise_on_entire_batch_failure=False)
    response = process_partial_response(sqs_event(sqs_record("m-1", 1)), handler, processor)
    assert failures(response) == ["m-1"]
    assert list(store.scan()) == []  # released: a fixed handler can run it later


def test_guard_result_set_to_a_coroutine_releases_and_raises(store):
    coroutine = _charge_async(None)
    with pytest.raises(InvalidResultError, match="coroutine"), IdempotencyGuard({"messageId": "m-1"}, store=store) as g:
        g.result = coroutine
    assert coroutine.cr_frame is None  # closed, so it cannot warn "never awaited" later
    assert list(store.scan()) == []


@pytest.mark.parametrize("decorator", ["idempotent", "idempotent_function"])
@pytest.mark.parametrize("kind", ["generator", "async-generator"])
def test_decorating_a_generator_function_is_refused(store, decorator, kind):
    if kind == "generator":

        def function(event, context=None):
            yield 1
    else:

        async def function(event, context=None):
            yield 1

    decorate = (
        idempotent(store=store)
        if decorator == "idempotent"
        else idempotent_function(data_keyword_argument="event", store=store)
    )
    with pytest.raises(TypeError, match=r"is an? (async )?generator function"):
        decorate(function)


# -- 3. a result that cannot be stored is committed without it -------------------------------------------


def _nested(depth):
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


class ExplodingModel:
    def model_dump(self, **_):
        raise ArithmeticError("model_dump exploded")


@pytest.mark.parametrize(
    "result",
    [
        pytest.param(_nested(100_000), id="deep-nesting"),
        pytest.param(ExplodingModel(), id="model-dump-raises"),
        pytest.param(object(), id="plain-object"),
    ],
)
def test_an_unstorable_result_is_committed_without_it_and_never_runs_again(store, result, caplog):
    runs = []
    clock = FakeClock()
    with IdempotencyGuard({"messageId": "m-1"}, store=store, clock=clock) as guard:
        runs.append(1)
        guard.result = result
    with (
        caplog.at_level(logging.WARNING, "idempotent_consumer"),
        pytest.raises(AlreadyProcessed) as done,
        IdempotencyGuard({"messageId": "m-1"}, store=store, clock=clock),
    ):
        runs.append(2)
    assert "cannot be stored" in caplog.text
    assert runs == [1]
    assert done.value.response_stored is False
    assert done.value.response is None


@pytest.mark.parametrize(
    "result",
    [
        pytest.param(decimal.Decimal("Infinity"), id="decimal-infinity"),
        pytest.param(decimal.Decimal("sNaN"), id="decimal-snan"),
        pytest.param({"text": "\ud83d"}, id="lone-surrogate"),
        pytest.param({"text": "\ud83d" + "x" * 150_000}, id="lone-surrogate-large"),
    ],
)
def test_results_that_used_to_leave_the_lock_in_progress_are_committed(store, result):
    with IdempotencyGuard({"messageId": "m-1"}, store=store) as guard:
        guard.result = result
    record = store.get(guard.key)
    assert record.status is RecordStatus.COMPLETE
    with pytest.raises(AlreadyProcessed) as done, IdempotencyGuard({"messageId": "m-1"}, store=store):
        pytest.fail("a committed record must not run again")
    if done.value.response_stored:
        assert repr(done.value.response) == repr(result)


# -- 11. a replay returns what the body returned, type and all ------------------------------------------


EXACT = {
    "amount": decimal.Decimal("30.50"),
    "pair": (1, "a"),
    "by_id": {1: "a", 2: "b"},
    "blob": b"\x00\xff",
    "at": dt.datetime(2026, 11, 23, 9, 30, tzinfo=dt.timezone.utc),
    "tags": {"x", "y"},
    "ratio": float("inf"),
}


def test_a_replay_through_the_store_returns_the_exact_types_the_body_returned(store):
    with IdempotencyGuard({"messageId": "m-1"}, store=store) as guard:
        guard.result = EXACT
    with pytest.raises(AlreadyProcessed) as done, IdempotencyGuard({"messageId": "m-1"}, store=store):
        pytest.fail("a committed record must not run again")
    replayed = done.value.response
    assert replayed == EXACT
    assert {k: type(v) for k, v in replayed.items()} == {k: type(v) for k, v in EXACT.items()}
    assert replayed["amount"].as_tuple() == EXACT["amount"].as_tuple()  # 30.50 keeps its exponent


# -- found by trying to break the promise: lazy results, shared names ------------------------------------


async def _notify(order_id):
    return order_id


@pytest.mark.parametrize(
    "make_result",
    [
        pytest.param(lambda: map(str, [1]), id="map"),
        pytest.param(lambda: filter(None, [1]), id="filter"),
        pytest.param(lambda: zip([1], [2], strict=True), id="zip"),
        pytest.param(lambda: [_notify("o-1")], id="coroutine-in-a-list"),
        pytest.param(lambda: {"receipt": _notify("o-1")}, id="coroutine-in-a-dict"),
        pytest.param(concurrent.futures.Future, id="executor-future"),
    ],
)
def test_a_result_that_is_or_holds_work_not_yet_done_fails_and_is_never_committed(store, make_result):
    processor = BatchProcessor(EventType.SQS, store=store, raise_on_entire_batch_failure=False)
    response = process_partial_response(sqs_event(sqs_record("m-1", 1)), lambda r: make_result(), processor)
    assert failures(response) == ["m-1"]
    assert isinstance(processor.items[0].error, InvalidResultError)
    assert list(store.scan()) == []


def test_two_live_functions_with_one_name_are_refused_instead_of_sharing_records(store):
    def make_step(channel):
        @idempotent_function(data_keyword_argument="order", store=store)
        def notify(order):
            return f"{channel} sent"

        return notify

    send_email = make_step("email")
    with pytest.raises(TypeError, match="name="):
        make_step("sms")
    assert send_email(order={"id": 1}) == "email sent"


def test_functions_told_apart_by_name_keep_their_own_records(store):
    ran = []

    def make_step(channel):
        @idempotent_function(data_keyword_argument="order", store=store, name=f"notify-{channel}")
        def notify(order):
            ran.append(channel)
            return f"{channel} sent"

        return notify

    send_email, send_sms = make_step("email"), make_step("sms")
    assert (send_email(order={"id": 1}), send_sms(order={"id": 1})) == ("email sent", "sms sent")
    assert (send_email(order={"id": 1}), send_sms(order={"id": 1})) == ("email sent", "sms sent")
    assert ran == ["email", "sms"]


def test_a_function_redecorated_each_invocation_keeps_its_records(store):
    ran = []

    def handler(order):
        @idempotent_function(data_keyword_argument="order", store=store)
        def charge(order):
            ran.append(order["id"])
            return "charged"

        return charge(order=order)

    assert [handler({"id": 1}), handler({"id": 1})] == ["charged", "charged"]
    assert ran == [1]


def _labelled(order, label):
    return f"{label}:{order}"


@pytest.mark.parametrize(
    "function",
    [
        pytest.param(lambda order: f"lambda:{order}", id="lambda"),
        pytest.param(functools.partial(_labelled, label="partial"), id="partial"),
    ],
)
def test_a_function_without_a_name_of_its_own_needs_one(store, function):
    with pytest.raises(TypeError, match="name="):
        idempotent_function(data_keyword_argument="order", store=store)(function)
    name = f"echo-{type(function).__name__}"  # one name per function: two live ones may not share it
    named = idempotent_function(data_keyword_argument="order", store=store, name=name)(function)
    assert named(order="x") == function(order="x")
