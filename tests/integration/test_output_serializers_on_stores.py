"""Output serializers on real stores: a SQLite file and DynamoDB Local. The first run and its replay return equal
objects of the same type, the replay read by a second store object (another Lambda instance on the same table);
a serializer failing while storing leaves the record committed without its response; a stored response that no
longer fits fails its record and never runs it again."""

from __future__ import annotations

import fractions
import logging
import uuid
from typing import Any

import pytest
from output_models import Line, Order, Receipt, StrictReceipt, a_receipt, an_order

from consumer import (
    AlreadyProcessed,
    BatchProcessor,
    EventType,
    ResponseDecodeError,
    idempotent_function,
)
from consumer.serialization import BaseIdempotencySerializer, CustomDictSerializer, DataclassSerializer
from persistence import RecordStatus

pytestmark = pytest.mark.parametrize("store_factory", ["sqlite", "dynamodb"], indirect=True)

AS_FRACTION = CustomDictSerializer(
    to_dict=lambda f: {"n": f.numerator, "d": f.denominator}, from_dict=lambda d: fractions.Fraction(d["n"], d["d"])
)


def place(order: dict[str, str]) -> Order:
    return an_order(order["id"])


def maybe_place(order: dict[str, str]) -> Order | None:
    return None if order["id"] == "none" else an_order(order["id"])


def pay(order: dict[str, str]) -> Receipt:
    return a_receipt(order["id"])


def pay_strictly(order: dict[str, str]) -> StrictReceipt:
    return StrictReceipt(amount=a_receipt().amount, at=a_receipt().at)


def place_all(order: dict[str, str]) -> list[Order]:
    return [an_order(order["id"]), an_order(order["id"] + "-b")]


def split(order: dict[str, str]) -> fractions.Fraction:
    return fractions.Fraction(1, len(order["id"]))


CASES = {
    "nested-dataclasses": (place, None),
    "optional-dataclass": (maybe_place, None),
    "optional-none": (maybe_place, None),
    "pydantic-v2-model": (pay, None),
    "strict-pydantic-model": (pay_strictly, None),
    "generic-list-of-dataclasses": (place_all, None),
    "custom-pair": (split, AS_FRACTION),
}


@pytest.mark.parametrize("case", CASES)
def test_a_replay_returns_an_equal_object_of_the_same_type(face, store_factory, case):
    function, serializer = CASES[case]
    runs = []

    def body(order: dict[str, str]) -> Any:
        runs.append(order["id"])
        return function(order)

    body.__annotations__["return"] = function.__annotations__["return"]  # text: resolved in this module
    order = {"id": "none" if case == "optional-none" else f"o-{case}"}
    first_instance, second_instance = store_factory(), store_factory()
    first = idempotent_function(
        data_keyword_argument="order", store=first_instance, output_serializer=serializer, name=f"{case}-{face.name}"
    )(face.define(body))
    result = face.call(first, order=order)
    del first  # the next instance decorates the same function again, under the same name
    second = idempotent_function(
        data_keyword_argument="order", store=second_instance, output_serializer=serializer, name=f"{case}-{face.name}"
    )(face.define(body))
    replayed = face.call(second, order=order)
    assert runs == [order["id"]]
    assert type(replayed) is type(result)
    assert replayed == result
    if case == "optional-none":
        assert replayed is None
    if case == "generic-list-of-dataclasses":
        assert [type(o) for o in replayed] == [Order, Order]
        assert type(replayed[0].lines[0]) is Line


def test_a_guard_with_a_serializer_replays_through_another_store_instance(face, store_factory):
    record = {"messageId": "m-1"}

    def body(guard):
        guard.result = an_order()

    face.guarded(record, body, store=store_factory(), output_serializer=DataclassSerializer(Order))
    with pytest.raises(AlreadyProcessed) as done:
        face.guarded(record, body, store=store_factory(), output_serializer=DataclassSerializer(Order))
    assert type(done.value.response) is Order
    assert done.value.response == an_order()


class Refusing(BaseIdempotencySerializer):
    def to_dict(self, data: Any) -> dict[str, Any]:
        raise OverflowError(f"cannot store {data!r}")

    def from_dict(self, data: dict[str, Any]) -> Any:
        raise AssertionError(f"not reached: nothing was stored, yet {data!r} is replayed")


def test_a_serializer_failing_to_store_commits_the_record_without_its_response(face, store_factory, caplog):
    store, runs = store_factory(), []
    processor = face.processor(EventType.SQS, store=store)
    event = {"Records": [{"messageId": "m-1", "body": '{"id": "o-1"}'}]}

    def handler(record, guard):
        runs.append(record.message_id)
        guard.output_serializer = Refusing()
        return an_order(record.json_body["id"])

    with caplog.at_level(logging.WARNING, "idempotent_consumer"):
        assert face.process(event, handler, processor) == {"batchItemFailures": []}
    [record] = store_factory().scan()
    assert record.status is RecordStatus.COMPLETE
    assert record.response is None
    assert "cannot be stored" in caplog.text
    assert "OverflowError" in caplog.text
    assert face.process(event, handler, face.processor(EventType.SQS, store=store_factory())) == {
        "batchItemFailures": []
    }
    assert runs == ["m-1"]


def test_a_stored_response_that_no_longer_fits_fails_its_record_and_is_never_run_again(store_factory):
    runs, name = [], f"charge-{uuid.uuid4().hex}"  # one name for both deploys of the function, and this test only

    def charge(order: dict[str, str]) -> dict[str, Any]:
        runs.append(order["id"])
        return {"order_id": order["id"], "items": []}

    idempotent_function(data_keyword_argument="order", store=store_factory(), name=name)(charge)(order={"id": "o-1"})
    charge.__annotations__["return"] = "Order"  # the next deploy returns a dataclass that has no "items"
    redeployed = idempotent_function(data_keyword_argument="order", store=store_factory(), name=name)(charge)
    processor = BatchProcessor(EventType.SQS, store=store_factory(), raise_on_entire_batch_failure=False)
    event = {"Records": [{"messageId": "m-1", "body": '{"id": "o-1"}'}, {"messageId": "m-2", "body": '{"id": "o-2"}'}]}

    for _ in range(2):  # the redelivery fails the same way: the body of charge never runs again for o-1
        response = processor.process(event, lambda record: redeployed(order=record.json_body))
        assert response == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
        failed = processor.items[0]
        assert isinstance(failed.error, ResponseDecodeError)
        assert failed.error.key in str(failed.error)
        assert "DataclassSerializer(Order)" in str(failed.error)
        assert store_factory().get(failed.error.key).status is RecordStatus.COMPLETE
    assert runs == ["o-1", "o-2"]
