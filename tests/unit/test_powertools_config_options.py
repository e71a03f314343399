"""Powertools' ``IdempotencyConfig(jmespath_options=, lambda_context=, response_hook=)``, taken as they are."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
import uuid

import pytest
from fakes import FakeClock, FakeContext
from jmespath import functions
from records import NOW_MS

from consumer import (
    IdempotencyConfig,
    IdempotencyConfigError,
    IdempotencyValidationError,
    current_lambda_context,
    idempotent,
    idempotent_function,
)
from consumer import _context as context_module
from persistence import InMemoryPersistenceLayer


@pytest.fixture(autouse=True)
def _no_registered_context():
    yield
    context_module.register_invocation_context(None)
    context_module._latest[0] = None


class Normalising(functions.Functions):
    """A user's JMESPath function: an order number as the till prints it or as the web shop does."""

    @functions.signature({"types": ["string"]})
    def _func_order_number(self, value: str) -> str:
        return value.strip().upper().removeprefix("ORD-")


NORMALISING = {"custom_functions": Normalising()}


# -- jmespath_options --------------------------------------------------------------------------------------------


def test_a_key_expression_calls_the_users_own_function():
    store, ran = InMemoryPersistenceLayer(), []
    config = IdempotencyConfig(event_key_jmespath="order_number(order)", jmespath_options=NORMALISING)
    book = idempotent(persistence_store=store, config=config)(lambda event, context: ran.append(event) or len(ran))
    assert book({"order": "ord-77"}, None) == 1
    assert book({"order": " 77 "}, None) == 1  # the same order, written another way: replayed
    assert book({"order": "78"}, None) == 2
    assert len(ran) == 2


def test_the_payload_validation_expression_calls_it_too():
    store = InMemoryPersistenceLayer()
    config = IdempotencyConfig(
        event_key_jmespath="id", payload_validation_jmespath="order_number(order)", jmespath_options=NORMALISING
    )
    book = idempotent(persistence_store=store, config=config)(lambda event, context: "booked")
    book({"id": "b-1", "order": "ORD-5"}, None)
    assert book({"id": "b-1", "order": "5"}, None) == "booked"  # the same order number: a duplicate
    with pytest.raises(IdempotencyValidationError):
        book({"id": "b-1", "order": "6"}, None)


def test_the_users_functions_replace_the_built_in_ones_as_in_powertools():
    # As in Powertools, powertools_json is gone; a call to it would fail every record, so it fails the config.
    with pytest.raises(
        IdempotencyConfigError, match=r"calls powertools_json\(\), which its jmespath_options"
    ) as refused:
        IdempotencyConfig(event_key_jmespath="powertools_json(body).id", jmespath_options=NORMALISING)
    # It says why (the user's functions replace the built-in ones) and what to do.
    assert "which its jmespath_options do not define: they replace the built-in functions" in str(refused.value)
    assert str(refused.value).endswith("define it in your custom_functions (every record would fail)")


def test_empty_jmespath_options_are_the_built_in_functions_as_in_powertools():
    config = IdempotencyConfig(event_key_jmespath="powertools_json(body).id", jmespath_options={})
    ran = []
    book = idempotent(persistence_store=InMemoryPersistenceLayer(), config=config)(lambda event, context: ran.append(1))
    book({"body": '{"id": 1}'}, None)
    book({"body": '{"id": 1, "retry": true}'}, None)  # the same id: replayed
    assert ran == [1]
    assert IdempotencyConfig(key_header="Idempotency-Key", jmespath_options={}).key_header == "Idempotency-Key"


def test_jmespath_options_that_jmespath_does_not_take_or_a_key_header_beside_them_are_refused():
    with pytest.raises(IdempotencyConfigError, match=r"jmespath\.Options"):
        IdempotencyConfig(jmespath_options={"functions": Normalising()})
    with pytest.raises(IdempotencyConfigError, match="key_header") as refused:
        IdempotencyConfig(key_header="Idempotency-Key", jmespath_options=NORMALISING)
    assert str(refused.value) == (
        "key_header selects with the header() function, which jmespath_options replaces: give one of them"
    )


# -- lambda_context= ---------------------------------------------------------------------------------------------


def lock_deadline_ms(config: IdempotencyConfig) -> int:
    """How long the lock of an ``@idempotent_function`` called now lasts (read inside its body)."""
    store, seen = InMemoryPersistenceLayer(), []

    @idempotent_function(data_keyword_argument="order", store=store, config=config, clock=FakeClock(), key_prefix="p")
    def charge(order):
        seen.append(next(iter(store.scan())).in_progress_expires_at)

    charge(order={"id": 1})
    return seen[0] - NOW_MS


def test_a_context_given_to_the_config_sets_the_lock_deadline_as_registering_it_does():
    context = FakeContext(remaining_ms=10_000)
    config = IdempotencyConfig(lock_grace_ms=0, lambda_context=context)
    assert current_lambda_context() is context
    assert lock_deadline_ms(config) == 10_000


def test_the_context_is_the_invocations_so_a_copy_of_the_config_registers_nothing():
    config = IdempotencyConfig(lock_grace_ms=0, lambda_context=FakeContext(remaining_ms=900_000))
    assert config.lambda_context is None  # not kept: it would be stale on the next invocation
    later = FakeContext(remaining_ms=3_000)
    config.register_lambda_context(later)  # the next invocation
    copy = dataclasses.replace(config, lock_timeout_seconds=30)
    assert current_lambda_context() is later
    assert lock_deadline_ms(copy) == 3_000


# -- response_hook= written for Powertools -----------------------------------------------------------------------


def test_a_response_hook_reads_the_record_by_powertools_names():
    seen = []

    def stamp(response, idempotent_data):  # as Powertools' documentation writes one, for its DataRecord
        seen.append(idempotent_data)
        expiry = idempotent_data.get_expiration_datetime()
        return {**response, "x-key": idempotent_data.idempotency_key, "x-expires": expiry.isoformat()}

    store = InMemoryPersistenceLayer()
    config = IdempotencyConfig(event_key_jmespath="order", response_hook=stamp)
    place = idempotent_function(data_keyword_argument="order", store=store, config=config, key_prefix="orders")(
        lambda order: {"placed": order["order"]}
    )
    assert place(order={"order": "o-1"}) == {"placed": "o-1"}  # the first run: no hook
    replayed = place(order={"order": "o-1"})
    (record,) = seen
    assert replayed == {
        "placed": "o-1",
        "x-key": record.key,
        "x-expires": dt.datetime.fromtimestamp(record.expires_at).isoformat(),  # noqa: DTZ006 - naive, as there
    }
    assert (record.idempotency_key, record.expiry_timestamp) == (record.key, record.expires_at)
    assert (record.response_data, record.in_progress_expiry_timestamp) == ('{"placed": "o-1"}', None)
    assert record.response_json_as_dict() == {"placed": "o-1"}


def test_a_response_hook_reads_the_response_as_powertools_stores_it_not_our_encoding():
    seen = []

    def read(response, idempotent_data):
        seen.append((idempotent_data.response_json_as_dict(), idempotent_data.response_data))
        return response

    at = dt.datetime(2026, 11, 26, 8, 0, tzinfo=dt.timezone.utc)
    result = {
        "total": decimal.Decimal("1.50"),
        "items": ("a", ("b", 2)),
        "at": at,
        "day": at.date(),
        "blob": b"\x00\xff",
        "tags": {"y", "x"},
        "id": uuid.UUID(int=7),
        "by_number": {1: "one", (2, 3): "pair"},
        "plain": [None, True, 0.5],
    }
    config = IdempotencyConfig(event_key_jmespath="order", response_hook=read)
    place = idempotent_function(
        data_keyword_argument="order", store=InMemoryPersistenceLayer(), config=config, name="place"
    )(lambda order: result)
    place(order={"order": "o-1"})
    assert place(order={"order": "o-1"}) == result  # the replay itself is exact
    ((as_json, text),) = seen
    assert as_json == {
        "total": "1.50",  # Powertools' encoder writes a Decimal as its text
        "items": ["a", ["b", 2]],
        "at": "2026-11-26T08:00:00+00:00",
        "day": "2026-11-26",
        "blob": "AP8=",
        "tags": ["x", "y"],
        "id": "00000000-0000-0000-0000-000000000007",
        "by_number": {"1": "one", "[2, 3]": "pair"},
        "plain": [None, True, 0.5],
    }
    assert json.loads(text) == as_json
    assert "__ic__" not in text
