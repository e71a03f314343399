"""Findings of an adversarial review, each a failing test first: the three endings a record may have, broken.

Every record ends committed after its body ran once, reported in ``batchItemFailures`` (or raised), or replayed
from a committed record. Each test names the ending it defends.
"""

from __future__ import annotations

import datetime as dt
import gc
import re
import threading
import warnings

import pytest
from events import sqs_event, sqs_record
from fakes import FakeClock, FakeContext
from jmespath import functions
from stores import StoreFactory

from consumer import (
    AlreadyProcessed,
    BatchProcessor,
    DecodeLimitError,
    EventType,
    IdempotencyAlreadyInProgressError,
    IdempotencyConfig,
    IdempotencyConfigError,
    IdempotencyGuard,
    PowertoolsCutover,
    idempotent_function,
    process_partial_response,
)
from persistence import InMemoryPersistenceLayer, SQLitePersistenceLayer


@pytest.fixture
def any_store(race_factory: StoreFactory) -> object:
    """A store of each kind (in memory, a SQLite file, DynamoDB Local, a valkey-server)."""
    return race_factory()


# -- a whole-number window given as a float: its duplicates never replay ----------------------------------------


@pytest.mark.parametrize(
    "option", ["expires_after_seconds", "lock_timeout_seconds", "lock_grace_ms"], ids=lambda name: name
)
def test_a_time_option_given_as_a_whole_float_replays_its_duplicates(option, any_store):
    # timedelta.total_seconds() is a float: IdempotencyConfig(expires_after_seconds=timedelta(hours=1).total_seconds())
    # was accepted, the first delivery committed a float expiry, and every duplicate then failed to read it back
    # ("stored item ... is not a record this library wrote: expires_at is not a whole number") instead of replaying.
    value = {"expires_after_seconds": dt.timedelta(hours=1).total_seconds(), "lock_timeout_seconds": 60.0}.get(
        option, 1000.0
    )
    config = IdempotencyConfig(**{option: value})
    assert type(getattr(config, option)) is int  # a whole number is kept as one
    ran = []
    with IdempotencyGuard({"messageId": "m-float"}, store=any_store, config=config) as guard:
        ran.append(1)
        guard.result = {"charged": 30}
    with (
        pytest.raises(AlreadyProcessed) as done,
        IdempotencyGuard({"messageId": "m-float"}, store=any_store, config=config),
    ):
        ran.append(2)
    assert (ran, done.value.response) == ([1], {"charged": 30})


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("expires_after_seconds", 1.5),
        ("lock_timeout_seconds", 0.5),
        ("lock_grace_ms", 2.5),
        ("local_cache_max_age_seconds", 0.25),
        ("local_cache_max_items", 2.5),
        ("max_decoded_bytes", 1024.5),
        ("expires_after_seconds", True),
    ],
)
def test_a_count_or_duration_that_is_not_a_whole_number_is_refused_when_the_config_is_built(option, value):
    with pytest.raises(IdempotencyConfigError, match=f"^{option} must be a whole number"):
        IdempotencyConfig(**{option: value})


# -- an @idempotent_function record handler drops the processor's key expression ---------------------------------


def test_a_processors_key_expression_an_idempotent_function_handler_would_drop_is_refused(tmp_path):
    # The processor is configured to key orders on their order_id; the record handler is an @idempotent_function,
    # which runs in its own guard with its own config (keyed on the messageId by default). The processor's key
    # expression was dropped without a word: two messages of one order both charged it.
    charged = []

    @idempotent_function(data_keyword_argument="record", store=SQLitePersistenceLayer(tmp_path / "f.sqlite3"))
    def charge(record):
        charged.append(record.json_body["order_id"])
        return "charged"

    by_order = IdempotencyConfig(event_key_jmespath="powertools_json(body).order_id")
    processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer(), config=by_order)
    event = {"Records": [{"messageId": m, "body": '{"order_id": "o-1"}'} for m in ("m-1", "m-2")]}
    with pytest.raises(TypeError, match="put event_key_jmespath on the function's config") as refused:
        process_partial_response(event, charge, processor)
    assert charged == []  # nothing ran: the whole batch comes back
    assert "'powertools_json(body).order_id'" in str(refused.value)


@pytest.mark.parametrize(
    ("option", "value"),
    [("key_header", "Idempotency-Key"), ("payload_validation_jmespath", "powertools_json(body).amount")],
)
def test_a_processors_key_header_or_payload_validation_an_idempotent_function_would_drop_is_refused(
    tmp_path, option, value
):
    # The processor's event key is its default (unset), the option after it is set: refused as the key is. Dropped, a
    # header-keyed retry of one order would run again, and a changed payload would replay the first one's result.
    charged = []

    @idempotent_function(
        data_keyword_argument="record",
        store=SQLitePersistenceLayer(tmp_path / "f.sqlite3"),
        name=f"charge-{tmp_path.name}",  # one per case: a failed case's function may still be alive
    )
    def charge(record):
        charged.append(record.message_id)
        return "charged"

    processor = BatchProcessor(
        EventType.SQS, store=InMemoryPersistenceLayer(), config=IdempotencyConfig(**{option: value})
    )
    event = {"Records": [{"messageId": "m-1", "body": '{"amount": 5}'}]}
    with pytest.raises(TypeError, match=f"put {option} on the function's config") as refused:
        process_partial_response(event, charge, processor)
    assert charged == []  # nothing ran: the whole batch comes back
    assert f"sets {option} {value!r}" in str(refused.value)
    assert (
        "records would otherwise be keyed by the function's config, and those the processor's would replay run "
        "again" in str(refused.value)
    )


def test_the_same_key_expression_on_both_configs_runs_once_per_order(tmp_path):
    charged = []
    by_order = IdempotencyConfig(event_key_jmespath="powertools_json(body).order_id")

    @idempotent_function(
        data_keyword_argument="record", store=SQLitePersistenceLayer(tmp_path / "f.sqlite3"), config=by_order
    )
    def charge(record):
        charged.append(record.json_body["order_id"])
        return "charged"

    processor = BatchProcessor(EventType.SQS, config=by_order)
    event = {"Records": [{"messageId": m, "body": '{"order_id": "o-1"}'} for m in ("m-1", "m-2")]}
    assert process_partial_response(event, charge, processor) == {"batchItemFailures": []}
    assert charged == ["o-1"]


# -- a window shorter than the lock: a live lock taken over once the window passed --------------------------------


def test_a_live_lock_is_not_taken_over_when_the_window_is_shorter_than_the_invocation(any_store):
    # expires_after_seconds=60 on a function with a 15-minute timeout: the IN_PROGRESS record was written with
    # expires_at = now + 60 s and a lock deadline 15 minutes on. A duplicate arriving 61 s into a slow body found the
    # record "expired" and took the live lock over: both bodies ran (and the first one's commit was refused).
    clock = FakeClock()
    config = IdempotencyConfig(expires_after_seconds=60)
    record = {"messageId": "m-slow"}
    ran = []
    with IdempotencyGuard(
        record, store=any_store, config=config, clock=clock, context=FakeContext(900_000, clock)
    ) as first:
        ran.append("first")
        clock.advance(61)  # the body is slow; the window has passed, its lock has 14 minutes to go
        with (
            pytest.raises(IdempotencyAlreadyInProgressError),
            IdempotencyGuard(record, store=any_store, config=config, clock=clock, context=FakeContext(900_000, clock)),
        ):
            ran.append("duplicate")
        first.result = "charged"
    assert ran == ["first"]
    assert first.committed
    with pytest.raises(AlreadyProcessed) as done, IdempotencyGuard(record, store=any_store, config=config, clock=clock):
        ran.append("replay")
    assert (ran, done.value.response) == (["first"], "charged")


# -- jmespath_options without the function a key expression calls: every record failed, one by one --------------


class _OrderNumbers(functions.Functions):
    """A migrating user's functions: Powertools' PowertoolsFunctions is not there to subclass, so powertools_json is
    not among them."""

    @functions.signature({"types": ["string"]})
    def _func_order_number(self, value: str) -> str:
        return value.strip().upper()


@pytest.mark.parametrize("option", ["event_key_jmespath", "payload_validation_jmespath"])
def test_a_key_expression_calling_a_function_its_jmespath_options_lack_is_refused_when_the_config_is_built(option):
    # Built fine, then every record of every batch failed with IdempotencyKeyError ("Unknown function"), though the
    # migration guide says a bad expression fails at import, as the cut-over's own check does.
    with pytest.raises(IdempotencyConfigError, match=rf"^{option} 'powertools_json\(body\)\.id' calls powertools_json"):
        IdempotencyConfig(
            **{option: "powertools_json(body).id"}, jmespath_options={"custom_functions": _OrderNumbers()}
        )
    with pytest.raises(IdempotencyConfigError, match="calls powertools_json"):  # options without custom_functions
        IdempotencyConfig(**{option: "powertools_json(body).id"}, jmespath_options={"dict_cls": dict})


def test_a_key_expression_calling_its_own_functions_and_jmespath_builtins_runs(tmp_path):
    config = IdempotencyConfig(
        event_key_jmespath="order_number(to_string(powertools_order))",
        jmespath_options={"custom_functions": _OrderNumbers()},
    )
    processor = BatchProcessor(EventType.SQS, store=SQLitePersistenceLayer(tmp_path / "s.sqlite3"), config=config)
    ran = []
    event = {"Records": [{"messageId": m, "body": "{}", "powertools_order": " o-1 "} for m in ("m-1", "m-2")]}
    assert process_partial_response(event, ran.append, processor) == {"batchItemFailures": []}
    assert len(ran) == 1  # one order, two messages: the second replays


# -- decode limits are per record, not per call --------------------------------------------------------------------


def test_a_projection_of_decoding_calls_is_bounded_per_record_not_per_call(tmp_path):
    import base64  # noqa: PLC0415
    import gzip  # noqa: PLC0415
    import json  # noqa: PLC0415

    limit = 4096
    part = base64.b64encode(gzip.compress(b"0" * limit)).decode()  # each inflates to exactly the limit
    config = IdempotencyConfig(
        event_key_jmespath="powertools_json(body)[*].powertools_base64_gzip(@)", max_decoded_bytes=limit
    )
    processor = BatchProcessor(
        EventType.SQS,
        store=SQLitePersistenceLayer(tmp_path / "s.sqlite3"),
        config=config,
        raise_on_entire_batch_failure=False,
    )
    event = {"Records": [{"messageId": "m-1", "body": json.dumps([part] * 10)}]}  # 10 x the limit from one record
    ran = []
    assert process_partial_response(event, ran.append, processor) == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    assert ran == []
    [item] = processor.items
    assert type(item.error) is DecodeLimitError
    assert (item.error.function, item.error.limit) == ("powertools_base64_gzip", limit)
    assert "failed on record 'm-1': powertools_base64_gzip() inflates at most 4096 bytes per record" in str(item.error)


# -- a context stand-in whose remaining time is a float ---------------------------------------------------------------


class _FloatContext:
    """A test's stand-in for the Lambda context, as hand-written ones often are: its remaining time a float."""

    aws_request_id = "r-float"

    def get_remaining_time_in_millis(self) -> float:
        return 30_000.0


def test_a_context_whose_remaining_time_is_a_float_locks_and_replays(any_store):
    # The lock deadline became a float: Redis refused its PEXPIRE (every record failed), DynamoDB kept
    # "1795688276123.0", which a duplicate meeting the live lock could not read back.
    clock = FakeClock()
    record = {"messageId": "m-ctx"}
    with IdempotencyGuard(record, store=any_store, clock=clock, context=_FloatContext()) as first:
        with (
            pytest.raises(IdempotencyAlreadyInProgressError),
            IdempotencyGuard(record, store=any_store, clock=clock, context=_FloatContext()),
        ):
            pass
        first.result = "done"
    with pytest.raises(AlreadyProcessed), IdempotencyGuard(record, store=any_store, clock=clock):
        pass


# -- a batch processed inside a record of a batch of the same processor --------------------------------------------


def test_a_batch_processed_in_a_record_of_the_same_processors_batch_does_not_wait_for_its_own_workers(tmp_path):
    # A record holding a batch of its own (a fan-out) processed by the module's one processor with max_workers=2:
    # every worker ran an outer record, and each waited for inner records that no free worker would ever take. The
    # invocation hung until Lambda's timeout, on every redelivery.
    store = SQLitePersistenceLayer(tmp_path / "s.sqlite3")
    processor = BatchProcessor(EventType.SQS, store=store, max_workers=2)
    ran = []

    def part(record):
        ran.append(record.message_id)

    def fan_out(record):
        inner = {"Records": [{"messageId": f"{record.message_id}-{i}", "body": "{}"} for i in range(3)]}
        return process_partial_response(inner, part, processor)

    event = {"Records": [{"messageId": f"o-{i}", "body": "{}"} for i in range(2)]}
    answers = []

    def invoke():
        answers.append(process_partial_response(event, fan_out, processor))
        answers.append(processor.summary.processed)  # the outer batch's: this thread's last

    worker = threading.Thread(target=invoke)
    worker.daemon = True  # before the fix it never ends
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "the nested batch waited for workers that were all waiting for it"
    assert answers == [{"batchItemFailures": []}, 2]
    assert sorted(ran) == [f"o-{o}-{i}" for o in range(2) for i in range(3)]


# -- an async response hook: every replay was its coroutine ---------------------------------------------------------


async def _async_hook(response, record):
    return {"hooked": response}


class _AsyncHook:
    def __repr__(self) -> str:
        return "<stamping hook>"

    async def __call__(self, response, _record):
        return {"hooked": response}


def test_an_async_response_hook_is_refused_when_the_config_is_built():
    # The guard calls the hook as hook(response, record): an async def hook made every replay a coroutine, never
    # awaited; `await charge(order=...)` of a duplicate returned that coroutine instead of the stored result.
    with pytest.raises(IdempotencyConfigError, match=r"^response_hook '_async_hook' is async def") as refused:
        IdempotencyConfig(response_hook=_async_hook)
    # It says why (every replay would be an unawaited coroutine) and what to do.
    assert str(refused.value).endswith(
        "it is called as hook(response, record) when a duplicate replays, in sync and async code alike, and what it "
        "returns is the replay (a coroutine, never awaited); make it a plain def"
    )
    # A hook object with an async __call__ has no name of its own: refused alike, named by what it is.
    hook = _AsyncHook()
    with pytest.raises(IdempotencyConfigError, match=rf"^response_hook {re.escape(repr(hook))} is async def"):
        IdempotencyConfig(response_hook=hook)
    with pytest.raises(IdempotencyConfigError, match=r"^response_hook must be a function"):
        IdempotencyConfig(response_hook="not a function")


def test_a_plain_response_hook_shapes_the_replay_of_an_async_function(tmp_path):
    import asyncio  # noqa: PLC0415

    config = IdempotencyConfig(event_key_jmespath="id", response_hook=lambda response, record: {"hooked": response})

    @idempotent_function(
        data_keyword_argument="order", store=SQLitePersistenceLayer(tmp_path / "s.sqlite3"), config=config
    )
    async def charge(order):
        return {"charged": order["id"]}

    async def twice():
        return [await charge(order={"id": 1}), await charge(order={"id": 1})]

    assert asyncio.run(twice()) == [{"charged": 1}, {"hooked": {"charged": 1}}]


def test_a_plain_response_hook_that_returns_a_coroutine_fails_the_duplicate_naming_it(tmp_path):
    # A plain def cannot be told from its definition to return a coroutine: the replay would have been that
    # coroutine, never awaited (a sync caller of a duplicate got it instead of the stored result). The duplicate
    # fails instead, naming the hook and the key; the body ran once, and no "never awaited" warning is left.
    async def stamp(response):
        return {"hooked": response}

    def hook(response, _record):
        return stamp(response)

    ran = []
    config = IdempotencyConfig(event_key_jmespath="id", response_hook=hook)

    @idempotent_function(
        data_keyword_argument="order", store=SQLitePersistenceLayer(tmp_path / "s.sqlite3"), config=config
    )
    def charge(order):
        ran.append(order["id"])
        return {"charged": order["id"]}

    assert charge(order={"id": 1}) == {"charged": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unawaited coroutine's RuntimeWarning would fail here
        with pytest.raises(
            IdempotencyConfigError, match=r"^response_hook '.*hook' returned coroutine, an awaitable"
        ) as failed:
            charge(order={"id": 1})
        gc.collect()
    assert failed.value.key is not None
    assert failed.value.key in str(failed.value)
    assert ran == [1]

    # In a batch, the duplicate is reported for a retry (not replayed as a coroutine, not run again).
    processor = BatchProcessor(
        EventType.SQS, store=InMemoryPersistenceLayer(), config=IdempotencyConfig(response_hook=hook)
    )
    bodies = []
    first, second = (
        sqs_event(sqs_record("m-1", {"n": 1})),
        sqs_event(sqs_record("m-1", {"n": 1}), sqs_record("m-2", {})),
    )
    assert process_partial_response(first, lambda r: bodies.append(r.message_id), processor) == {
        "batchItemFailures": []
    }
    response = process_partial_response(second, lambda r: bodies.append(r.message_id), processor)
    assert response == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    assert bodies == ["m-1", "m-2"]


# -- the cut-over's payload= as async def: no Powertools key, so every record ran ----------------------------------


async def _async_payload(record):
    return {"id": record["messageId"]}


def test_an_async_cutover_payload_is_refused_when_the_cutover_is_built():
    # Its coroutine was hashed as the payload: the key expression selected nothing, "Powertools kept no record of
    # it", and a record Powertools had completed ran again.
    until = dt.datetime(2099, 1, 1, tzinfo=dt.timezone.utc)
    with pytest.raises(IdempotencyConfigError, match=r"^payload must be a plain function"):
        PowertoolsCutover(
            table_name="pt", until=until, key_prefix="p", event_key_jmespath="id", payload=_async_payload,
            boto3_client=object(),
        )  # fmt: skip
    plain = PowertoolsCutover(
        table_name="pt", until=until, key_prefix="p", event_key_jmespath="id",
        payload=lambda record: {"id": record["messageId"]}, boto3_client=object(),
    )  # fmt: skip
    assert plain.powertools_key({"messageId": "m-1"}) is not None


def test_batches_nested_through_two_processors_do_not_wait_for_each_others_workers(tmp_path):
    # A's records process a batch with B, whose records process a batch with A again: A's workers wait for B's
    # runs, which waited for A's workers.
    store = SQLitePersistenceLayer(tmp_path / "s.sqlite3")
    a, b = (BatchProcessor(EventType.SQS, store=store, max_workers=2) for _ in range(2))
    ran = []

    def batch_of(record, depth):
        return {"Records": [{"messageId": f"{record.message_id}/{depth}-{i}", "body": "{}"} for i in range(2)]}

    def leaf(record):
        ran.append(record.message_id)

    def through_a(record):
        return process_partial_response(batch_of(record, 2), leaf, a)

    def through_b(record):
        return process_partial_response(batch_of(record, 1), through_a, b)

    event = {"Records": [{"messageId": f"o-{i}", "body": "{}"} for i in range(2)]}
    answers = []
    worker = threading.Thread(target=lambda: answers.append(process_partial_response(event, through_b, a)))
    worker.daemon = True  # before the fix it never ends
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "the nested batches waited for each other's workers"
    assert answers == [{"batchItemFailures": []}]
    assert len(ran) == 8
