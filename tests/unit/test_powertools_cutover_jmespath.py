"""The cut-over's JMESPath options: a key it cannot compute as Powertools did never reruns a record Powertools kept.

A function the cut-over's options do not define is refused when the cut-over is built; a configuration error met
while keying a record (an arity its options refuse) fails that record, unrun. Only what Powertools itself would
have raised on the payload means "Powertools kept no record of it".
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from jmespath import exceptions, functions

from consumer import (
    BatchProcessor,
    EventType,
    IdempotencyConfig,
    IdempotencyConfigError,
    PowertoolsCutover,
    idempotent_function,
)
from persistence import InMemoryPersistenceLayer

UNTIL = dt.datetime(2099, 1, 1, tzinfo=dt.timezone.utc)


class OrderFunctions(functions.Functions):
    """The user's functions, as their Powertools deployment had them."""

    @functions.signature({"types": ["object"]})
    def _func_order_id(self, order: dict[str, Any]) -> Any:
        return order["order"]["id"]


class Table:
    """The Powertools table: every key COMPLETED."""

    def __init__(self) -> None:
        self.reads = 0

    def get_item(self, **_: Any) -> dict[str, Any]:
        self.reads += 1
        return {"Item": {"status": {"S": "COMPLETED"}, "expiration": {"N": "4000000000"}, "data": {"S": '"once"'}}}


def cutover(table: Table | None = None, **options: Any) -> PowertoolsCutover:
    return PowertoolsCutover(table_name="pt", until=UNTIL, key_prefix="charge", boto3_client=table, **options)


@pytest.mark.parametrize(
    ("expressions", "named"),
    [
        ({"event_key_jmespath": "order_id(@)"}, re.escape("event_key_jmespath 'order_id(@)'")),
        ({"payload_validation_jmespath": "[id, powertools_json(body).amount, order_id(@)]"}, "payload_validation"),
        ({"event_key_jmespath": "json_parse(body).id"}, "event_key_jmespath"),  # ours, not Powertools'
    ],
    ids=["key", "validation", "our-function"],
)
def test_a_function_the_cutovers_options_do_not_define_is_refused_when_it_is_built(expressions, named):
    # The user moved their function onto IdempotencyConfig(jmespath_options=...): the cut-over, which keys as
    # Powertools did, does not inherit them. Before, it was built, and every record keyed "with no Powertools key"
    # ran again, Powertools' COMPLETED records included, with only a warning.
    with pytest.raises(IdempotencyConfigError, match=named) as refused:
        cutover(**expressions)
    function = "order_id" if "order_id" in str(expressions) else "json_parse"
    assert f"{function}()" in str(refused.value)
    assert "jmespath_options" in str(refused.value)  # the fix is named


def test_options_given_without_the_function_are_refused_too():
    with pytest.raises(IdempotencyConfigError, match=r"'order_id\(@\)' calls order_id\(\), which its jmespath_options"):
        cutover(event_key_jmespath="order_id(@)", jmespath_options={"custom_functions": functions.Functions()})
    with pytest.raises(IdempotencyConfigError, match=r"jmespath_options are not jmespath\.Options arguments"):
        cutover(event_key_jmespath="id", jmespath_options={"functions": OrderFunctions()})


def test_with_the_options_powertools_keyed_with_its_completed_record_replays(face):
    table = Table()
    options = {"custom_functions": OrderFunctions()}
    config = IdempotencyConfig(
        event_key_jmespath="order_id(@)",
        jmespath_options=options,
        powertools_cutover=cutover(table, event_key_jmespath="order_id(@)", jmespath_options=options),
    )
    ran = []

    def charge(order: dict[str, Any]) -> str:
        ran.append(order)
        return "charged again"

    guarded = idempotent_function(data_keyword_argument="order", store=InMemoryPersistenceLayer(), config=config)
    assert face.call(guarded(face.define(charge)), order={"order": {"id": 7}}) == "once"
    assert ran == []
    assert table.reads == 1


class Dispatching:
    """Custom functions resolved when called (no function table to check when the cut-over is built)."""

    def call_function(self, name: str, args: list[Any]) -> Any:
        if name != "order_id":
            raise exceptions.UnknownFunctionError(f"Unknown function: {name}()")
        return args[0]["order"]["id"]


@pytest.mark.parametrize(
    ("expression", "options", "error"),
    [
        ("order_id(@, id)", {"custom_functions": OrderFunctions()}, "Expected 1 argument for function order_id()"),
        ("order_ref(@)", {"custom_functions": Dispatching()}, "Unknown function: order_ref()"),
    ],
    ids=["arity", "unknown-when-called"],
)
def test_a_jmespath_configuration_error_met_on_a_record_fails_it_unrun(expression, options, error):
    # Before, "Powertools failed on this payload too": the body ran over a record Powertools had COMPLETED.
    table = Table()
    store = InMemoryPersistenceLayer()
    read_through = cutover(table, event_key_jmespath=expression, jmespath_options=options)
    config = IdempotencyConfig(powertools_cutover=read_through)
    processor = BatchProcessor(EventType.SQS, store=store, config=config, raise_on_entire_batch_failure=False)
    ran = []
    event = {"Records": [{"messageId": "m-1", "body": "{}", "order": {"id": 7}}]}
    response = processor.process(event, lambda record: ran.append(record.message_id))
    assert response == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    assert ran == []
    assert table.reads == 0
    failure = processor.items[0].error
    assert isinstance(failure, IdempotencyConfigError)
    assert error in str(failure)
    assert repr(expression) in str(failure)
    assert list(store.scan()) == []  # our lock was released


def test_a_payload_error_is_still_a_record_powertools_kept_none_of():
    # What Powertools itself raised on this payload (a body that is not JSON): it kept no record, the body runs.
    table = Table()
    config = IdempotencyConfig(powertools_cutover=cutover(table, event_key_jmespath="powertools_json(body).id"))
    processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer(), config=config)
    ran = []
    processor.process({"Records": [{"messageId": "m-1", "body": "not json"}]}, lambda r: ran.append(r.message_id))
    assert ran == ["m-1"]
    assert table.reads == 0
