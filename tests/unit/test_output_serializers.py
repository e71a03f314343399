"""Output serializers: a replay returns what the first run returned, dataclasses and Pydantic models included,
declared on ``@idempotent_function``, inferred from its return annotation, or given to a guard; and what happens
when a serializer fails, storing or replaying. Sync and async faces; the in-memory store (every real store:
``tests/integration/test_output_serializers_on_stores.py``).

The module has ``from __future__ import annotations``: every annotation below is text, resolved by the library.
"""

from __future__ import annotations

import collections
import collections.abc
import dataclasses
import enum
import itertools
import logging
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, Optional, TypedDict

import pydantic
import pytest
from fakes import FakeClock
from output_models import AT, Address, Cents, D, Line, Order, Receipt, Scaled, StrictReceipt, a_receipt, an_order

from consumer import (
    AlreadyProcessed,
    BatchProcessor,
    EventType,
    IdempotencyConfig,
    IdempotencyGuard,
    IdempotencyModelTypeError,
    IdempotencyNoSerializationModelError,
    InvalidResultError,
    ResponseDecodeError,
    idempotent_function,
    process_partial_response,
)
from consumer.serialization import (
    BaseIdempotencyModelSerializer,
    BaseIdempotencySerializer,
    CustomDictSerializer,
    DataclassSerializer,
    NoOpSerializer,
    PydanticSerializer,
    serializer_for,
)
from persistence import InMemoryPersistenceLayer, RecordStatus

if TYPE_CHECKING:
    from decimal import Context as OnlyForTypeCheckers  # never defined at run time

REPOSITORY = Path(__file__).resolve().parents[2]


class Totals(TypedDict):
    amount: int


def twice(face, decorated, **kwargs):
    """The first run's result, and what a duplicate call returns."""
    return face.call(decorated, **kwargs), face.call(decorated, **kwargs)


# -- inferred from the return annotation ---------------------------------------------------------------------


def test_a_dataclass_return_annotation_replays_nested_dataclasses_and_models(face):
    runs = []

    def place(order: dict[str, str]) -> Order:
        runs.append(order["id"])
        return an_order(order["id"])

    decorated = idempotent_function(data_keyword_argument="order", store=InMemoryPersistenceLayer())(face.define(place))
    first, replayed = twice(face, decorated, order={"id": "o-1"})
    assert runs == ["o-1"]
    assert type(replayed) is Order
    assert replayed == first == an_order("o-1")
    assert type(replayed.lines[0]) is Line
    assert type(replayed.by_sku["b-2"]) is Line
    assert type(replayed.ship_to) is Address
    assert replayed.tags == ("gift", "eu")  # a tuple, as the encoder keeps it
    assert replayed.total == D("14.75")  # an init=False field, restored
    assert replayed.placed_at == AT


def test_a_dataclass_replays_its_fields_without_running_its_post_init_again(face):
    # Cents(3) holds 300; built again from 300 it would hold 30000. Scaled needs an InitVar that was never stored.
    def cents(order: dict[str, str]) -> Cents:
        return Cents(3)

    def scaled(order: dict[str, str]) -> Scaled:
        return Scaled(2, scale=10)

    store = InMemoryPersistenceLayer()
    for function, expected in ((cents, Cents(3)), (scaled, Scaled(2, scale=10))):
        decorated = idempotent_function(data_keyword_argument="order", store=store)(face.define(function))
        first, replayed = twice(face, decorated, order={"id": "o-1"})
        assert type(replayed) is type(expected)
        assert replayed == first == expected


def test_a_pydantic_return_annotation_replays_the_model(face):
    def pay(order: dict[str, str]) -> Receipt:
        return a_receipt(order["id"])

    decorated = idempotent_function(data_keyword_argument="order", store=InMemoryPersistenceLayer())(face.define(pay))
    first, replayed = twice(face, decorated, order={"id": "o-1"})
    assert type(replayed) is Receipt
    assert replayed == first
    assert type(replayed.lines[0]) is Line
    assert replayed.amount == D("14.75")


def test_a_strict_pydantic_model_replays_from_its_json_form(face):
    def pay(order: dict[str, str]) -> StrictReceipt:
        return StrictReceipt(amount=D("1.10"), at=AT)

    decorated = idempotent_function(data_keyword_argument="order", store=InMemoryPersistenceLayer())(face.define(pay))
    first, replayed = twice(face, decorated, order={"id": "o-1"})
    assert type(replayed) is StrictReceipt
    assert replayed == first


@pytest.mark.parametrize(
    "annotation",
    ["Order | None", "Optional[Order]", "Annotated[Order, 'doc']", "Annotated[Optional[Order], 'doc']"],
)
def test_an_optional_result_replays_as_itself_and_none_as_none(face, annotation):
    store = InMemoryPersistenceLayer()

    def find(order: dict[str, str]) -> Any:
        return None if order["id"] == "none" else an_order(order["id"])

    find.__annotations__["return"] = annotation  # text, as `from __future__ import annotations` writes it
    decorated = idempotent_function(data_keyword_argument="order", store=store)(face.define(find))
    assert twice(face, decorated, order={"id": "none"}) == (None, None)
    first, replayed = twice(face, decorated, order={"id": "o-2"})
    assert type(replayed) is Order
    assert replayed == first


def test_none_never_reaches_a_serializer_and_replays_as_none(face):
    calls = []
    serializer = CustomDictSerializer(
        to_dict=lambda value: calls.append("to") or {"v": value},
        from_dict=lambda data: calls.append("from") or data["v"],
    )

    def nothing(order: dict[str, str]) -> None:
        return None

    decorated = idempotent_function(
        data_keyword_argument="order", store=InMemoryPersistenceLayer(), output_serializer=serializer
    )(face.define(nothing))
    assert twice(face, decorated, order={"id": "o-1"}) == (None, None)
    assert calls == []


def test_a_generic_alias_of_models_replays_each_element(face):
    store = InMemoryPersistenceLayer()

    def orders(batch: dict[str, str]) -> list[Order]:
        return [an_order("o-1"), an_order("o-2")]

    def by_id(batch: dict[str, str]) -> dict[str, Receipt] | None:
        return {"o-1": a_receipt("o-1")}

    def pair(batch: dict[str, str]) -> tuple[Order, Receipt]:
        return (an_order("o-3"), a_receipt("o-3"))

    def lines(batch: dict[str, str]) -> collections.abc.Sequence[Line]:
        return (Line("a", D(1)),)  # a tuple where the annotation says Sequence: it stays a tuple

    for function in (orders, by_id, pair, lines):
        decorated = idempotent_function(data_keyword_argument="batch", store=store)(face.define(function))
        first, replayed = twice(face, decorated, batch={"id": "b-1"})
        assert replayed == first
        assert type(replayed) is type(first)
    assert [type(o) for o in replayed] == [Line]


def test_a_union_of_several_models_is_not_inferred_and_replays_as_stored_with_a_warning(face, caplog):
    @dataclasses.dataclass
    class Refund:  # a class of its own, so that its one warning is not spent by another test
        amount: int

    def settle(order: dict[str, str]) -> Order | Refund:
        return Refund(3)

    settle.__annotations__["return"] = Refund | Order  # an object: the local class cannot be named by text
    decorated = idempotent_function(data_keyword_argument="order", store=InMemoryPersistenceLayer())(
        face.define(settle)
    )
    with caplog.at_level(logging.WARNING, "idempotent_consumer"):
        first, replayed = twice(face, decorated, order={"id": "o-1"})
    assert first == Refund(3)
    assert replayed == {"amount": 3}
    assert "Refund replay as a dict" in caplog.text
    assert "output serializer" in caplog.text


@pytest.mark.parametrize("annotation", ["dict[str, Any]", "Totals", "int", "Any", "None", "list[int]", "object"])
def test_types_that_replay_exactly_on_their_own_get_no_serializer(annotation):
    def function(order: dict[str, str]) -> Any:
        return order

    function.__annotations__["return"] = annotation
    decorated = idempotent_function(data_keyword_argument="order", store=InMemoryPersistenceLayer())(function)
    assert decorated(order={"id": 1}) == decorated(order={"id": 1}) == {"id": 1}
    assert serializer_for(eval(annotation)) is None  # noqa: S307 - the test's own literals


def test_an_annotation_naming_a_class_defined_further_down_resolves_on_the_first_call():
    assert later_defined(order={"id": "o-1"}) == later_defined(order={"id": "o-1"}) == DefinedLater("o-1")
    assert type(later_defined(order={"id": "o-1"})) is DefinedLater


@idempotent_function(data_keyword_argument="order", store=InMemoryPersistenceLayer())
def later_defined(order: dict[str, str]) -> DefinedLater:
    return DefinedLater(order["id"])


@dataclasses.dataclass
class DefinedLater:
    order_id: str


def test_an_annotation_that_never_resolves_means_no_serializer(caplog):
    def function(order: dict[str, str]) -> OnlyForTypeCheckers:
        return {"id": order["id"]}  # type: ignore[return-value]

    decorated = idempotent_function(data_keyword_argument="order", store=InMemoryPersistenceLayer())(function)
    with caplog.at_level(logging.DEBUG, "idempotent_consumer"):
        assert decorated(order={"id": "o-1"}) == decorated(order={"id": "o-1"}) == {"id": "o-1"}
    assert "OnlyForTypeCheckers" in caplog.text
    assert "its results replay as stored" in caplog.text
    assert all(r.levelno == logging.DEBUG for r in caplog.records)  # often a TypedDict: no warning


# -- declared: output_serializer= ----------------------------------------------------------------------------


def test_a_declared_model_serializer_class_is_built_for_the_return_annotation(face):
    store = InMemoryPersistenceLayer()

    def pay(order: dict[str, str]) -> Receipt | None:
        return a_receipt(order["id"])

    def place(order: dict[str, str]) -> Order:
        return an_order(order["id"])

    for serializer, function in ((PydanticSerializer, pay), (DataclassSerializer, place)):
        decorated = idempotent_function(data_keyword_argument="order", store=store, output_serializer=serializer)(
            face.define(function)
        )
        first, replayed = twice(face, decorated, order={"id": "o-1"})
        assert type(replayed) is type(first)
        assert replayed == first


def test_a_declared_serializer_wins_over_the_annotation_and_no_op_keeps_the_plain_dict(face):
    store = InMemoryPersistenceLayer()
    as_text = CustomDictSerializer(to_dict=lambda order: order.order_id, from_dict=lambda text: f"was {text}")

    def place(order: dict[str, str]) -> Order:
        return an_order(order["id"])

    replays = []
    for name, serializer in (("as-text", as_text), ("no-op", NoOpSerializer())):
        decorated = idempotent_function(
            data_keyword_argument="order", store=store, output_serializer=serializer, name=name
        )(face.define(place))
        first, replayed = twice(face, decorated, order={"id": "o-1"})
        assert first == an_order("o-1")
        replays.append(replayed)
    assert replays[0] == "was o-1"
    assert type(replays[1]) is dict
    assert replays[1]["lines"][0] == {"sku": "a-1", "price": D("10.50")}


def test_a_powertools_style_serializer_subclass_works(face):
    class OrderSerializer(BaseIdempotencySerializer):  # as Powertools' documentation writes one
        def to_dict(self, data: Order) -> dict[str, Any]:
            return {"id": data.order_id, "skus": [line.sku for line in data.lines]}

        def from_dict(self, data: dict[str, Any]) -> Order:
            return Order(data["id"], [Line(sku, D(0)) for sku in data["skus"]])

    def place(order: dict[str, str]) -> Order:
        return an_order(order["id"])

    decorated = idempotent_function(
        data_keyword_argument="order", store=InMemoryPersistenceLayer(), output_serializer=OrderSerializer()
    )(face.define(place))
    _, replayed = twice(face, decorated, order={"id": "o-1"})
    assert replayed == Order("o-1", [Line("a-1", D(0)), Line("b-2", D(0))])


def test_a_powertools_style_model_serializer_class_gets_the_annotation():
    seen = []

    class Doubling(BaseIdempotencyModelSerializer):
        def to_dict(self, data: int) -> dict[str, Any]:
            return {"n": data}

        def from_dict(self, data: dict[str, Any]) -> int:
            return int(data["n"]) * 2

        @classmethod
        def instantiate(cls, model_type: Any) -> BaseIdempotencySerializer:
            seen.append(model_type)
            return cls()

    @idempotent_function(data_keyword_argument="n", store=InMemoryPersistenceLayer(), output_serializer=Doubling)
    def number(n: int) -> int | None:
        return n

    assert (number(n=4), number(n=4)) == (4, 8)
    assert seen == [int | None]


def test_declarations_that_cannot_work_are_refused_when_decorating():
    store = InMemoryPersistenceLayer()

    def unannotated(order):
        return order

    def returns_dict(order: dict[str, str]) -> dict[str, str]:
        return order

    def returns_either(order: dict[str, str]) -> Order | Receipt:
        return an_order()

    with pytest.raises(IdempotencyNoSerializationModelError, match="annotate the return type"):
        idempotent_function(data_keyword_argument="order", store=store, output_serializer=DataclassSerializer)(
            unannotated
        )
    with pytest.raises(IdempotencyModelTypeError, match="needs a dataclass"):
        idempotent_function(data_keyword_argument="order", store=store, output_serializer=DataclassSerializer)(
            returns_dict
        )
    with pytest.raises(IdempotencyModelTypeError, match=r"needs a pydantic\.BaseModel subclass"):
        idempotent_function(data_keyword_argument="order", store=store, output_serializer=PydanticSerializer)(
            returns_dict
        )
    with pytest.raises(IdempotencyModelTypeError, match="union of several types"):
        idempotent_function(data_keyword_argument="order", store=store, output_serializer=DataclassSerializer)(
            returns_either
        )
    with pytest.raises(TypeError, match="output_serializer must be a serializer"):
        idempotent_function(data_keyword_argument="order", store=store, output_serializer=Order)(returns_dict)  # type: ignore[arg-type]
    # Nothing was claimed by the refused decorations: the function can be decorated once fixed.
    idempotent_function(data_keyword_argument="order", store=store)(returns_dict)


def test_a_declared_class_whose_annotation_never_resolves_fails_the_call_not_the_record():
    store = InMemoryPersistenceLayer()

    @idempotent_function(data_keyword_argument="order", store=store, output_serializer=DataclassSerializer)
    def function(order: dict[str, str]) -> OnlyForTypeCheckers:
        raise AssertionError("not reached: the serializer is needed before the body runs")

    with pytest.raises(IdempotencyNoSerializationModelError, match="OnlyForTypeCheckers"):
        function(order={"id": "o-1"})
    assert list(store.scan()) == []  # no lock was taken


@pytest.mark.parametrize(
    ("output_type", "expected"),
    [
        (Order, DataclassSerializer),
        (Optional[Order], DataclassSerializer),  # noqa: UP045 - the old spelling is the point
        (Receipt | None, PydanticSerializer),
        (Annotated[Receipt, "doc"], PydanticSerializer),
        (list[Order], "generic"),
        (dict[str, Receipt], "generic"),
        (collections.abc.Mapping[str, list[Line]] | None, "generic"),
        (frozenset[Line], "generic"),
        (tuple[int, Order], "generic"),
        (dict[str, int], None),
        (Totals, None),
        (Any, None),
        (list[int | str], None),
        (int | str, None),
    ],
)
def test_serializer_for_names_what_each_type_needs(output_type, expected):
    serializer = serializer_for(output_type)
    if expected is None:
        assert serializer is None
    elif expected == "generic":
        assert isinstance(serializer, BaseIdempotencySerializer)
        assert type(serializer) not in (DataclassSerializer, PydanticSerializer)
    else:
        assert type(serializer) is expected


def test_serializer_for_refuses_a_union_of_models_and_model_serializers_refuse_other_types():
    with pytest.raises(IdempotencyModelTypeError, match="union of several types"):
        serializer_for(Order | Receipt)
    with pytest.raises(IdempotencyModelTypeError, match="union of several types"):
        serializer_for(list[Order | Line])
    with pytest.raises(IdempotencyModelTypeError):
        DataclassSerializer(Receipt)
    with pytest.raises(IdempotencyModelTypeError):
        PydanticSerializer(Order)
    with pytest.raises(IdempotencyNoSerializationModelError):
        PydanticSerializer.instantiate(None)
    assert repr(DataclassSerializer.instantiate(Order | None)) == "DataclassSerializer(Order)"


# -- the guard -------------------------------------------------------------------------------------------------


def test_a_guard_with_an_output_serializer_replays_the_model(face):
    store, record = InMemoryPersistenceLayer(), {"messageId": "m-1"}
    serializer = DataclassSerializer(Order)

    def body(guard):
        guard.result = an_order()
        return guard.result

    first = face.guarded(record, body, store=store, output_serializer=serializer)
    with pytest.raises(AlreadyProcessed) as done:
        face.guarded(record, body, store=store, output_serializer=serializer)
    assert type(done.value.response) is Order
    assert done.value.response == first
    assert done.value.response_stored is True
    assert store.get(done.value.key).response is not None


def test_the_response_hook_and_the_local_cache_see_the_model():
    hooked = []

    def hook(response, record):
        hooked.append(type(response))
        return response

    config = IdempotencyConfig(response_hook=hook, use_local_cache=True)
    store = InMemoryPersistenceLayer()

    @idempotent_function(data_keyword_argument="order", store=store, config=config)
    def place(order: dict[str, str]) -> Order:
        return an_order(order["id"])

    replies = [place(order={"id": "o-1"}) for _ in range(3)]  # the third replays from the local cache
    assert [type(r) for r in replies] == [Order, Order, Order]
    assert hooked == [Order, Order]


# -- failures: storing ---------------------------------------------------------------------------------------


class Exploding(BaseIdempotencySerializer):
    def __init__(self, error: BaseException) -> None:
        self.error = error

    def to_dict(self, data: Any) -> dict[str, Any]:  # noqa: ARG002 - the signature of the base class
        raise self.error

    def from_dict(self, data: dict[str, Any]) -> Any:  # noqa: ARG002 - the signature of the base class
        raise AssertionError("not reached: nothing was stored")


def test_a_serializer_that_fails_storing_commits_without_the_response_and_never_runs_again(face, caplog):
    store, runs = InMemoryPersistenceLayer(), []

    def place(order: dict[str, str]) -> Order:
        runs.append(1)
        return an_order(order["id"])

    decorated = idempotent_function(
        data_keyword_argument="order",
        store=store,
        output_serializer=Exploding(ValueError("no room")),
        name=f"exploding-{face.name}",
    )(face.define(place))
    with caplog.at_level(logging.WARNING, "idempotent_consumer"):
        first = face.call(decorated, order={"id": "o-1"})
    assert first == an_order("o-1")  # the caller still gets the result of the run
    [record] = store.scan()
    assert record.status is RecordStatus.COMPLETE
    assert record.response is None
    assert "cannot be stored" in caplog.text
    assert "to_dict failed" in caplog.text
    assert "no room" in caplog.text
    assert face.call(decorated, order={"id": "o-1"}) is None  # replayed without a response: the body stays done
    assert runs == [1]


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
def test_a_serializer_interrupted_storing_commits_the_record_then_lets_the_interrupt_through(face, stop):
    # The body ran: left uncommitted, its lock would lapse and the redelivery would run it a second time.
    store, runs = InMemoryPersistenceLayer(), []

    def place(order: dict[str, str]) -> Order:
        runs.append(1)
        return an_order(order["id"])

    decorated = idempotent_function(
        data_keyword_argument="order",
        store=store,
        output_serializer=Exploding(stop()),
        name=f"interrupted-{face.name}-{stop.__name__}",
    )(face.define(place))
    with pytest.raises(stop):
        face.call(decorated, order={"id": "o-1"})
    [record] = store.scan()
    assert (record.status, record.response) == (RecordStatus.COMPLETE, None)
    assert face.call(decorated, order={"id": "o-1"}) is None  # replayed: the body stays done
    assert runs == [1]


def test_a_serializer_that_fails_storing_in_a_batch_commits_the_record(caplog):
    store, runs = InMemoryPersistenceLayer(), []
    processor = BatchProcessor(EventType.SQS, store=store)
    event = {"Records": [{"messageId": "m-1", "body": "{}"}, {"messageId": "m-2", "body": "{}"}]}

    def handler(record, guard):
        runs.append(record.message_id)
        guard.output_serializer = Exploding(ValueError("no room")) if record.message_id == "m-1" else None
        return an_order(record.message_id)

    with caplog.at_level(logging.WARNING, "idempotent_consumer"):
        assert processor.process(event, handler) == {"batchItemFailures": []}
        assert processor.process(event, handler) == {"batchItemFailures": []}
    assert runs == ["m-1", "m-2"]
    assert processor.summary.replayed == 2
    assert {r.status for r in store.scan()} == {RecordStatus.COMPLETE}


def test_a_serializer_raising_a_base_exception_commits_the_record_then_propagates(face):
    # The body ran: a lock left to its deadline would let the redelivery run it a second time.
    store, clock, runs = InMemoryPersistenceLayer(), FakeClock(), []
    record = {"messageId": "m-1"}

    def body(guard):
        runs.append(1)
        guard.result = an_order()

    with pytest.raises(KeyboardInterrupt):
        face.guarded(record, body, store=store, clock=clock, output_serializer=Exploding(KeyboardInterrupt()))
    [done] = store.scan()
    assert (done.status, done.response) == (RecordStatus.COMPLETE, None)
    with pytest.raises(AlreadyProcessed):
        face.guarded(record, body, store=store, clock=clock)
    assert runs == [1]


def test_a_result_holding_unrun_work_is_still_refused_with_a_serializer(face):
    store = InMemoryPersistenceLayer()

    @dataclasses.dataclass
    class Pending:
        work: Any

    def place(order: dict[str, str]) -> Pending:
        return Pending(iter(map(str, [1])))

    place.__annotations__["return"] = Pending
    decorated = idempotent_function(data_keyword_argument="order", store=store, name=f"pending-{face.name}")(
        face.define(place)
    )
    with pytest.raises(InvalidResultError, match="map"):
        face.call(decorated, order={"id": "o-1"})
    assert list(store.scan()) == []  # released: the redelivery runs it


class Notified(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    order_id: str
    notification: Any = None
    _pending: Any = pydantic.PrivateAttr(default=None)


@dataclasses.dataclass
class Wrapped:
    outcome: Notified


async def send_email(sent: list[str], order_id: str) -> None:
    sent.append(order_id)


def notified(sent: list[str], where: str) -> Notified:
    work = send_email(sent, "o-1")  # never awaited: the email is not sent
    if where == "extra":
        return Notified(order_id="o-1", later=work)
    model = Notified(order_id="o-1", notification=work if where == "field" else None)
    if where == "private":
        model._pending = work
    return model


@pytest.mark.parametrize(
    ("where", "annotation", "shape"),
    [
        pytest.param("field", "Notified", lambda m: m, id="field"),
        pytest.param("field", "Any", lambda m: m, id="field-without-a-serializer"),
        pytest.param("extra", "Notified", lambda m: m, id="extra"),
        pytest.param("field", "Wrapped", Wrapped, id="in-a-dataclass"),
        pytest.param("field", "list[Notified]", lambda m: [m], id="in-a-list"),
    ],
)
def test_unrun_work_inside_a_pydantic_model_is_refused_and_not_committed(face, where, annotation, shape):
    # As inside a dataclass: committed (even without its response), the work would never be done.
    store, sent = InMemoryPersistenceLayer(), []

    def notify(order: dict[str, str]) -> Any:
        return shape(notified(sent, where))

    notify.__annotations__["return"] = annotation
    decorated = idempotent_function(data_keyword_argument="order", store=store, name=f"notify-{uuid.uuid4().hex}")(
        face.define(notify)
    )
    with pytest.raises(InvalidResultError, match="coroutine"):
        face.call(decorated, order={"id": "o-1"})
    assert list(store.scan()) == []  # released: the redelivery runs it
    assert sent == []


@dataclasses.dataclass
class Counted:
    order_id: str

    def __post_init__(self) -> None:
        self._ids = itertools.count(1)  # a helper, not stored: not work the result stands for


@pytest.mark.parametrize("annotation", ["Any", "Counted", "Notified"])
def test_an_attribute_that_is_not_stored_never_fails_a_record_that_ran(face, annotation):
    # A lazy iterator, a private attribute: the body ran, and its record must commit. Refusing such a result as
    # unrun work would release the lock, so every redelivery ran the body again, for ever.
    store, runs = InMemoryPersistenceLayer(), []

    def make(order: dict[str, str]) -> Any:
        runs.append(order["id"])
        if annotation == "Notified":
            model = Notified(order_id=order["id"])
            model._pending = itertools.count(1)
            return model
        return Counted(order["id"])

    make.__annotations__["return"] = annotation
    decorated = idempotent_function(data_keyword_argument="order", store=store, name=f"make-{uuid.uuid4().hex}")(
        face.define(make)
    )
    for _ in range(2):
        face.call(decorated, order={"id": "o-1"})
    assert runs == ["o-1"]
    assert [r.status.value for r in store.scan()] == ["COMPLETE"]


# -- failures: replaying ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class OrderV2:  # Order after a deploy that renamed a field and added a required one
    order_id: str
    items: list[Line]


def test_a_stored_response_that_no_longer_fits_fails_naming_the_key_and_never_runs_again(face):
    store, runs = InMemoryPersistenceLayer(), []

    def place(order: dict[str, str]) -> Order:
        runs.append(order["id"])
        return an_order(order["id"])

    defined = face.define(place)
    first = idempotent_function(data_keyword_argument="order", store=store, name=f"place-{face.name}")(defined)
    face.call(first, order={"id": "o-1"})
    place.__annotations__["return"] = "OrderV2"  # the next deploy: the same function returns the new model
    redeployed = idempotent_function(data_keyword_argument="order", store=store, name=f"place-{face.name}")(defined)
    for _ in range(2):
        with pytest.raises(ResponseDecodeError) as failed:
            face.call(redeployed, order={"id": "o-1"})
    [record] = store.scan()
    error = failed.value
    assert error.key == record.key
    assert record.key in str(error)
    assert "DataclassSerializer(OrderV2)" in str(error)
    assert "has no field 'by_sku', 'gift', 'lines'" in str(error)
    assert error.__cause__ is None  # said by type and place; the serializer's error may quote the stored value
    assert error.existing_record == record
    assert record.status is RecordStatus.COMPLETE  # still done: the fix is a model that reads it, or a delete
    assert runs == ["o-1"]


def test_a_stored_response_that_fails_validation_fails_its_record_in_a_batch():
    store, charges, runs, name = InMemoryPersistenceLayer(), [], [], f"charge-{uuid.uuid4().hex}"

    def charge(order: dict[str, str]) -> Any:
        charges.append(order["id"])
        if order["id"] == "o-1":  # what the first deploy returned: the amount was text then
            return {"order_id": "o-1", "amount": "thirty", "at": "2024-05-01T12:30:00Z"}
        return a_receipt(order["id"])

    charge.__annotations__["return"] = "dict[str, str]"
    idempotent_function(data_keyword_argument="order", store=store, name=name)(charge)(order={"id": "o-1"})
    charge.__annotations__["return"] = "Receipt"  # the next deploy: Receipt.amount is a number
    charged = idempotent_function(data_keyword_argument="order", store=store, name=name)(charge)
    processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer(), raise_on_entire_batch_failure=False)
    event = {"Records": [{"messageId": "m-1", "body": '{"id": "o-1"}'}, {"messageId": "m-2", "body": '{"id": "o-2"}'}]}

    def handler(record):
        runs.append(record.message_id)
        return charged(order=record.json_body)

    assert processor.process(event, handler) == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    failed, succeeded = processor.items
    assert isinstance(failed.error, ResponseDecodeError)
    assert failed.error.__cause__ is None  # the ValidationError quotes the stored value (input_value='thirty')
    assert "amount: Input should be a valid decimal" in str(failed.error)
    assert store.get(failed.error.key).status is RecordStatus.COMPLETE
    assert succeeded.result == a_receipt("o-2")
    assert runs == ["m-1", "m-2"]  # the handler ran; charge's body did not run again for o-1
    assert charges == ["o-1", "o-2"]


def test_a_stored_response_that_is_not_a_stored_result_is_a_response_decode_error():
    store = InMemoryPersistenceLayer()
    with IdempotencyGuard({"messageId": "m-1"}, store=store) as guard:
        guard.result = "done"
    record = store.get(guard.key)
    store._records[guard.key] = dataclasses.replace(record, response="{not json")
    with pytest.raises(ResponseDecodeError, match="cannot be replayed") as failed:
        IdempotencyGuard({"messageId": "m-1"}, store=store).__enter__()
    assert isinstance(failed.value, ValueError)  # as before: a malformed stored result was a ValueError
    assert failed.value.key == guard.key


def test_a_dataclass_defined_in_a_function_with_text_annotations_names_what_did_not_resolve():
    @dataclasses.dataclass
    class Local:
        line: Line  # text: resolved in the module, where Line is defined

    @dataclasses.dataclass
    class Outer:
        inner: Local  # text naming a class the module does not define

    assert DataclassSerializer(Local).from_dict({"line": {"sku": "a", "price": D(1)}}) == Local(Line("a", D(1)))
    with pytest.raises(IdempotencyModelTypeError, match="Local"):
        DataclassSerializer(Outer).from_dict({"inner": {"line": {"sku": "a", "price": D(1)}}})


def test_a_return_type_whose_fields_do_not_resolve_warns_and_a_declared_serializer_fails_before_the_body(caplog):
    store, runs = InMemoryPersistenceLayer(), []

    @dataclasses.dataclass
    class Inner:
        sku: str

    @dataclasses.dataclass
    class Outer:
        inner: Inner  # text naming a class that only this function defines

    def inferred(order: dict[str, str]) -> Outer:
        runs.append("inferred")
        return Outer(Inner(order["id"]))

    def declared(order: dict[str, str]) -> Outer:
        runs.append("declared")
        return Outer(Inner(order["id"]))

    inferred.__annotations__["return"] = Outer  # an object: the function's own annotation is not the problem
    with caplog.at_level(logging.WARNING, "idempotent_consumer"):
        guessed = idempotent_function(data_keyword_argument="order", store=store)(inferred)
        assert guessed(order={"id": "a"}) == Outer(Inner("a"))
        assert guessed(order={"id": "a"}) == {"inner": {"sku": "a"}}  # as stored, and said so:
    assert "the field annotations of" in caplog.text
    assert "Outer cannot be resolved" in caplog.text
    assert "its results replay as stored" in caplog.text
    refusing = idempotent_function(
        data_keyword_argument="order", store=store, output_serializer=DataclassSerializer(Outer)
    )(declared)
    with pytest.raises(IdempotencyModelTypeError, match="Inner"):
        refusing(order={"id": "b"})
    assert runs == ["inferred"]  # the declared one failed before its body ran, and took no lock
    assert len(list(store.scan())) == 1


def test_classes_of_code_run_by_exec_resolve_in_the_functions_namespace():
    code = textwrap.dedent(
        """
        from __future__ import annotations
        import dataclasses

        @dataclasses.dataclass
        class Part:
            name: str

        @dataclasses.dataclass
        class Kit:
            parts: list[Part]

        @idempotent_function(data_keyword_argument="order", store=store, name="kit")
        def kit(order) -> Kit:
            return Kit([Part(order["id"])])
        """
    )
    namespace: dict[str, Any] = {"idempotent_function": idempotent_function, "store": InMemoryPersistenceLayer()}
    exec(compile(code, "<kit>", "exec"), namespace)  # noqa: S102 - the test's own code; its classes have no module
    kit = namespace["kit"]
    assert kit(order={"id": "p-1"}) == kit(order={"id": "p-1"}) == namespace["Kit"]([namespace["Part"]("p-1")])
    assert type(kit(order={"id": "p-1"}).parts[0]) is namespace["Part"]


def test_a_set_of_frozen_dataclasses_replays_through_a_serializer_and_is_refused_without_one(caplog):
    store = InMemoryPersistenceLayer()

    @idempotent_function(data_keyword_argument="order", store=store)
    def skus(order: dict[str, str]) -> frozenset[Line]:
        return frozenset({Line("a", D(1)), Line("b", D(2))})

    first, replayed = skus(order={"id": "o-1"}), skus(order={"id": "o-1"})
    assert type(replayed) is frozenset
    assert replayed == first
    # Without a serializer the set would be stored with dicts in it, which no set can hold on the way back: it is
    # refused when stored (committed without the response), rather than stored and failing every replay.
    with caplog.at_level(logging.WARNING, "idempotent_consumer"):
        for number, result in enumerate(({Line("a", D(1))}, {Line("a", D(1)): 1}, {(1, Line("a", D(1)))})):
            record = {"messageId": f"m-{number}"}
            with IdempotencyGuard(record, store=store) as guard:
                guard.result = result
            with pytest.raises(AlreadyProcessed) as done:
                IdempotencyGuard(record, store=store).__enter__()
            assert done.value.response_stored is False
    assert caplog.text.count("replays as a dict: no set or key can") == 3


# -- pydantic stays optional ---------------------------------------------------------------------------------


def test_pydantic_is_never_imported_by_the_library():
    code = textwrap.dedent(
        """
        import dataclasses, sys
        from consumer import IdempotencyGuard, idempotent_function
        from consumer.serialization import DataclassSerializer, PydanticSerializer, serializer_for
        from persistence import InMemoryPersistenceLayer

        @dataclasses.dataclass
        class Order:
            id: str

        @idempotent_function(data_keyword_argument="order", store=InMemoryPersistenceLayer())
        def place(order: dict) -> Order:
            return Order(order["id"])

        assert place(order={"id": "1"}) == place(order={"id": "1"}) == Order("1")
        assert serializer_for(list[Order]) is not None and serializer_for(dict) is None
        try:
            PydanticSerializer(Order)
        except TypeError:
            pass
        assert "pydantic" not in sys.modules, "pydantic was imported"
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr


def test_an_idempotent_function_handed_to_a_batch_processor_replays_its_type():
    # The processor runs the function in the function's own guard: that guard must carry its serializer too,
    # or a batch replays a dict where a direct call replays the model.
    store, runs = InMemoryPersistenceLayer(), []

    @idempotent_function(data_keyword_argument="record", store=store, name="batch-typed")
    def receipt(record) -> Receipt:
        runs.append(record.message_id)
        return a_receipt(record.json_body["id"])

    message = {"messageId": "m-1", "body": '{"id": "o-1"}'}
    processor = BatchProcessor(EventType.SQS)
    assert process_partial_response({"Records": [message, message]}, receipt, processor) == {"batchItemFailures": []}
    assert [item.result for item in processor.items] == [a_receipt("o-1"), a_receipt("o-1")]
    assert all(isinstance(item.result, Receipt) for item in processor.items)
    assert runs == ["m-1"]


def test_a_serializer_set_in_the_body_commits_without_the_response_instead_of_replaying_another_type(caplog):
    # A duplicate replays before any body runs, through the serializer the guard was entered with: it would have
    # rebuilt a dict where the first run returned a model. The result is committed without its response, logged.
    store, runs = InMemoryPersistenceLayer(), []
    processor = BatchProcessor(EventType.SQS, store=store)
    event = {"Records": [{"messageId": "m-1", "body": "{}"}]}

    def handler(record, guard):
        runs.append(record.message_id)
        guard.output_serializer = PydanticSerializer(Receipt)
        return a_receipt()

    with caplog.at_level(logging.WARNING, "idempotent_consumer"):
        assert processor.process(event, handler) == {"batchItemFailures": []}
        assert processor.items[0].result == a_receipt()
        assert processor.process(event, handler) == {"batchItemFailures": []}
    assert runs == ["m-1"]
    assert (processor.summary.replayed, processor.items[0].result) == (1, None)
    assert "output_serializer was set in the body" in caplog.text
    assert [r.response for r in store.scan()] == [None]


@pytest.mark.parametrize("given", [DataclassSerializer, PydanticSerializer, "not a serializer", {"to_dict": 1}])
def test_the_guard_refuses_what_is_not_a_serializer_instance_when_built(given):
    with pytest.raises(TypeError, match="pass a serializer instance"):
        IdempotencyGuard({"messageId": "m-1"}, store=InMemoryPersistenceLayer(), output_serializer=given)


class Point(NamedTuple):
    x: int
    y: int


class Shade(enum.Enum):
    DARK = "dark"


@pytest.mark.parametrize(
    ("annotation", "result"),
    [
        ("Point", Point(1, 2)),
        ("list[Point]", [Point(1, 2)]),
        ("dict[str, Point]", {"a": Point(1, 2)}),
        ("Shade", Shade.DARK),
        ("collections.Counter[str]", collections.Counter(a=2)),
        ("collections.OrderedDict[str, int]", collections.OrderedDict(b=1, a=2)),
    ],
)
def test_a_named_type_a_return_annotation_names_replays_as_itself(annotation, result):
    # A return annotation names these as a dataclass field's does: they replayed as their base type (a tuple, a
    # str, a dict), with one warning per type in the whole process.
    runs = []

    def make(order):
        runs.append(order)
        return result

    make.__annotations__ = {"order": "dict", "return": annotation}
    function = idempotent_function(data_keyword_argument="order", store=InMemoryPersistenceLayer())(make)
    first, again = function(order={"id": 1}), function(order={"id": 1})
    assert runs == [{"id": 1}]
    assert again == first == result
    assert type(again) is type(result)
    if isinstance(result, (list, dict)) and not isinstance(result, collections.Counter):
        inner = next(iter(again.values() if isinstance(again, dict) else again))
        assert type(inner) is type(next(iter(result.values() if isinstance(result, dict) else result)))
