"""The replay check of the built-in output serializers, against what it got wrong when it came: it refused what
replays (private attributes, a raw value in an enum field, a generic model built without its parameter, a subclass
serializer's envelope, a narrower ``model_dump``), let through what does not (an attribute set by ``__post_init__``,
a Decimal that loses its exponent), logged dict keys and values, cost two encodes, and named no nested position;
and a record stored by alias no longer replayed.

Annotations here are objects (no ``from __future__ import annotations``).
"""

import dataclasses
import decimal
import enum
import functools
import logging
import threading
import uuid
from typing import Annotated, Any, Generic, TypeVar

import pydantic
import pytest
from output_models import Checked
from pydantic.alias_generators import to_camel
from replays import assert_committed_without_response, assert_replays_as_itself, deliver_twice

import consumer._serde
import consumer.serialization._round_trip
from consumer import BatchProcessor, EventType, ResponseDecodeError, idempotent_function
from consumer._output import encode_output
from consumer.serialization import PydanticSerializer
from persistence import MAX_ITEM_BYTES, InMemoryPersistenceLayer

D = decimal.Decimal
T = TypeVar("T")
SECRET = "s3cr3t-4111-1111"  # planted in keys and values: no log line may hold it
VALIDATES_BY_NAME = tuple(map(int, pydantic.VERSION.split(".")[:2])) >= (2, 11)
by_name = pytest.mark.skipif(not VALIDATES_BY_NAME, reason="Pydantic reads by name and alias at once from 2.11 on")


# -- records stored by alias -------------------------------------------------------------------------------------

CAMEL = pydantic.ConfigDict(alias_generator=to_camel, populate_by_name=True, serialize_by_alias=True)


class Camel(pydantic.BaseModel):  # an API model: model_dump() writes camelCase
    model_config = CAMEL
    order_id: str
    card_last4: str


class CamelOrder(pydantic.BaseModel):
    model_config = CAMEL
    receipt: Camel
    lines: list[Camel]


class Aliased(pydantic.BaseModel):
    order_id: str = pydantic.Field(alias="orderId")


class TwoAliases(pydantic.BaseModel):
    amount: int = pydantic.Field(validation_alias="amountIn", serialization_alias="amountOut")


RECEIPT = Camel(order_id="o-1", card_last4="4242")


@by_name
@pytest.mark.parametrize(
    ("model", "stored", "expected"),
    [
        pytest.param(Camel, {"orderId": "o-1", "cardLast4": "4242"}, RECEIPT, id="camel-by-alias"),
        pytest.param(Camel, {"order_id": "o-1", "card_last4": "4242"}, RECEIPT, id="camel-by-name"),
        pytest.param(Aliased, {"orderId": "o-1"}, Aliased(orderId="o-1"), id="alias"),
        pytest.param(Aliased, {"order_id": "o-1"}, Aliased(orderId="o-1"), id="alias-by-name"),
        pytest.param(TwoAliases, {"amountIn": 3}, TwoAliases(amountIn=3), id="validation-alias"),
        pytest.param(TwoAliases, {"amount": 3}, TwoAliases(amountIn=3), id="validation-alias-by-name"),
        pytest.param(
            CamelOrder,
            {"receipt": {"orderId": "o-1", "cardLast4": "4242"}, "lines": [{"orderId": "o-1", "cardLast4": "4242"}]},
            CamelOrder(receipt=RECEIPT, lines=[RECEIPT]),
            id="nested-by-alias",
        ),
    ],
)
def test_a_record_stored_by_alias_or_by_name_replays(model, stored, expected):
    # By alias: what earlier versions stored for a model that serializes by alias, and Powertools' model_dump().
    assert PydanticSerializer(model).from_dict(stored) == expected


def test_a_record_an_earlier_version_stored_by_alias_replays_and_the_body_never_runs_again(face):
    store, runs, name = InMemoryPersistenceLayer(), [], f"charge-{uuid.uuid4().hex}"

    def charge(order: dict[str, str]) -> Any:
        runs.append(order["id"])
        return Camel(order_id=order["id"], card_last4="4242").model_dump(mode="json")  # as earlier versions stored

    defined = face.define(charge)
    charge.__annotations__["return"] = dict[str, str]
    face.call(idempotent_function(data_keyword_argument="order", store=store, name=name)(defined), order={"id": "o-1"})
    assert [r.response for r in store.scan()] == ['{"orderId":"o-1","cardLast4":"4242"}']
    charge.__annotations__["return"] = Camel  # this version: the function returns the model
    upgraded = idempotent_function(data_keyword_argument="order", store=store, name=name)(defined)
    assert face.call(upgraded, order={"id": "o-1"}) == RECEIPT
    assert runs == ["o-1"]


# -- what a refusal or a failed replay says: no key, no value -----------------------------------------------------


class Payment(pydantic.BaseModel):
    card: pydantic.SecretStr


class Raw(pydantic.BaseModel):
    raw: bytes  # dumped as UTF-8 text in JSON mode: its error quotes the bytes


class Excluded(pydantic.BaseModel):
    order_id: str
    token: str = pydantic.Field(exclude=True)


class Status(str, enum.Enum):
    OPEN = "open"


class Size(enum.IntEnum):
    S = 1


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Order:
    status: Status
    size: Size | None = None


@dataclasses.dataclass
class Painted:
    color: Color


@dataclasses.dataclass
class Tally:
    counts: dict[Status, int]


@dataclasses.dataclass
class Parcel:
    weight: int


@dataclasses.dataclass
class Loose:
    value: Any


@pytest.mark.parametrize(
    ("result", "annotation", "why"),
    [
        pytest.param(
            {SECRET: Payment(card="4111")}, dict[str, Payment], "dict[<key 0>].card: a SecretStr replays masked"
        ),
        pytest.param(
            {"weight": 3, SECRET: 1},
            Parcel,
            "a dict does not replay as a Parcel: test_replay_check.Parcel has no field for 1 of the stored keys",
            id="dict-with-a-key-that-is-no-field",
        ),
        pytest.param(Loose({SECRET: Parcel(1)}), Loose, "Loose.value[<key 0>]: a Parcel replays as a dict"),
        pytest.param(Order(status=SECRET), Order, "Order.status: a str does not replay as a Status", id="not-a-member"),
        pytest.param(
            Tally({SECRET: 1}),
            Tally,
            "Tally.counts.keys()[0]: a str does not replay as a Status",
            id="not-a-member-key",
        ),
        pytest.param(Excluded(order_id="o-1", token=SECRET), Excluded, "an Excluded does not replay: token: Field"),
        pytest.param(Checked.model_construct(card=SECRET), Checked, "a Checked does not replay: card: value_error"),
        pytest.param(
            Raw(raw=b"\xff" + SECRET.encode()),
            Raw,
            "PydanticSerializer(Raw).to_dict failed on a result of type Raw: UnicodeDecodeError",
            id="dump-fails",
        ),
    ],
)
def test_a_refusal_says_where_without_a_key_or_a_value(face, caplog, result, annotation, why):
    delivered = deliver_twice(face, result, annotation, caplog)
    assert_committed_without_response(delivered, why)
    assert SECRET not in delivered.log


@dataclasses.dataclass
class Home:
    status: Status
    rooms: dict[str, Excluded]


@pytest.mark.parametrize(
    ("stored", "annotation", "why"),
    [
        pytest.param({"card": SECRET}, Checked, "a Checked does not replay: card: value_error", id="validator"),
        pytest.param(
            {"order_id": "o-1", "token": 5},
            Excluded,
            "an Excluded does not replay: token: Input should be a valid string",
            id="validation",
        ),
        pytest.param(
            {"status": SECRET, "rooms": {}},
            Home,
            "Home.status: a Status does not replay: the stored value is not one of the members",
            id="not-a-member",
        ),
        pytest.param(
            {"status": "open", "rooms": {SECRET: {"order_id": SECRET}}},
            Home,
            "Home.rooms[<key 0>]: an Excluded does not replay: token: Field required",
            id="in-a-dict",
        ),
        pytest.param(
            {"status": "open", "rooms": {}, SECRET: 1},
            Home,
            "test_replay_check.Home has no field for 1 of the stored keys",
            id="a-key-that-is-no-field",
        ),
    ],
)
def test_a_response_that_cannot_be_replayed_is_said_without_a_key_or_a_value(caplog, stored, annotation, why):
    # Stored by an earlier deploy (a dict then); this one annotates the type. In a batch: the record fails, logged.
    store, name = InMemoryPersistenceLayer(), f"charge-{uuid.uuid4().hex}"

    def charge(record: Any) -> Any:
        return stored

    charge.__annotations__["return"] = dict[str, Any]
    idempotent_function(data_keyword_argument="record", store=store, name=name)(charge)(record={"id": "o-1"})
    charge.__annotations__["return"] = annotation
    charged = idempotent_function(data_keyword_argument="record", store=store, name=name)(charge)
    with pytest.raises(ResponseDecodeError) as failed:
        charged(record={"id": "o-1"})
    assert why in str(failed.value)
    assert SECRET not in str(failed.value)
    event = {"Records": [{"messageId": "m-1", "body": '{"id": "o-1"}'}]}
    processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer(), raise_on_entire_batch_failure=False)
    with caplog.at_level(logging.DEBUG, "idempotent_consumer"):
        processor.process(event, lambda record: charged(record=record.json_body))
    messages = [r.getMessage() for r in caplog.records]
    assert any("cannot be replayed" in m and why in m for m in messages)
    assert not [m for m in messages if SECRET in m]


# -- what replays, and was refused -------------------------------------------------------------------------------


class Locked(pydantic.BaseModel):
    order_id: str
    _lock: Any = pydantic.PrivateAttr(default_factory=threading.Lock)


class Counted(pydantic.BaseModel):
    order_id: str
    _length: int = pydantic.PrivateAttr(default=0)

    def model_post_init(self, context: Any, /) -> None:  # noqa: ARG002 - Pydantic passes its context
        self._length = len(self.order_id)


def test_private_attributes_replay_as_a_new_model_has_them(face, caplog):
    delivered = deliver_twice(face, Locked(order_id="o-1"), Locked, caplog)
    assert (delivered.response, delivered.replayed.order_id) == ('{"order_id":"o-1"}', "o-1")
    assert delivered.replayed._lock is not delivered.first._lock  # a lock of its own
    delivered = deliver_twice(face, Counted(order_id="o-1"), Counted, caplog)
    assert (delivered.response, delivered.replayed._length) == ('{"order_id":"o-1"}', 3)
    assert "cannot be stored" not in delivered.log


def test_a_raw_value_in_an_enum_field_replays_as_the_member_equal_to_it(face, caplog):
    delivered = deliver_twice(face, Order(status="open", size=1), Order, caplog)  # dataclasses do not validate
    assert delivered.runs == ["o-1"]
    assert delivered.response == '{"status":"open","size":1}'
    assert delivered.replayed.status is Status.OPEN
    assert delivered.replayed.size is Size.S
    assert "cannot be stored" not in delivered.log


def test_a_raw_value_that_its_enum_does_not_equal_is_refused(face, caplog):
    delivered = deliver_twice(face, Painted(color="red"), Painted, caplog)  # Color.RED != "red": no str mixin
    assert_committed_without_response(delivered, "Painted.color: a str replays as a Color")


class Item(pydantic.BaseModel):
    sku: str


class Page(pydantic.BaseModel, Generic[T]):
    items: list[T]


@dataclasses.dataclass
class Catalog:
    page: Page[Item]


def test_a_generic_model_built_without_its_parameter_replays_as_its_annotation(face, caplog):
    delivered = deliver_twice(face, Page(items=[Item(sku="a-1")]), Page[Item], caplog)
    assert delivered.runs == ["o-1"]
    assert type(delivered.replayed) is Page[Item]
    assert delivered.replayed.items == [Item(sku="a-1")]
    delivered = deliver_twice(face, Catalog(Page(items=[Item(sku="a-1")])), Catalog, caplog)
    assert type(delivered.replayed.page) is Page[Item]
    assert "cannot be stored" not in delivered.log


class Receipt(pydantic.BaseModel):
    order_id: str


class Versioned(PydanticSerializer):
    """Stores the model in an envelope, as some Powertools users' serializers do."""

    def to_dict(self, data: Any) -> dict[str, Any]:
        return {"v": 1, "data": super().to_dict(data)}

    def from_dict(self, data: dict[str, Any]) -> Any:
        return super().from_dict(data["data"])


class Wrapping(PydanticSerializer):
    """Wraps what it stores, and forgot to unwrap it: its replays would fail."""

    def to_dict(self, data: Any) -> dict[str, Any]:
        return {"data": super().to_dict(data)}


def twice_through(serializer: Any, result: Any, caplog: Any) -> tuple[Any, str | None]:
    store, name = InMemoryPersistenceLayer(), f"serialized-{uuid.uuid4().hex}"

    @idempotent_function(data_keyword_argument="order", store=store, name=name, output_serializer=serializer)
    def place(order: dict[str, str]) -> Any:
        return result

    caplog.clear()
    with caplog.at_level(logging.WARNING, "idempotent_consumer"):
        place(order={"id": "o-1"})
        replayed = place(order={"id": "o-1"})
    [record] = store.scan()
    return replayed, record.response


def test_a_subclass_of_a_built_in_serializer_is_checked_through_its_own_pair(caplog):
    assert twice_through(Versioned(Receipt), Receipt(order_id="o-1"), caplog) == (
        Receipt(order_id="o-1"),
        '{"v":1,"data":{"order_id":"o-1"}}',
    )
    assert "cannot be stored" not in caplog.text
    assert twice_through(Versioned(Payment), Payment(card="4111"), caplog) == (None, None)
    assert "Payment.card: a SecretStr replays masked" in caplog.text
    assert twice_through(Wrapping(Receipt), Receipt(order_id="o-1"), caplog) == (None, None)
    assert "a Receipt does not replay: " in caplog.text


class Narrow(pydantic.BaseModel):
    a: int
    b: int | None = None

    def model_dump(self, *, mode: str = "python", by_alias: bool = False, exclude_none: bool = True) -> Any:  # type: ignore[override]
        return super().model_dump(mode=mode, by_alias=by_alias, exclude_none=exclude_none)


def test_a_model_dump_override_that_takes_fewer_keywords_is_called_as_before(face, caplog):
    delivered = deliver_twice(face, Narrow(a=1), Narrow, caplog)
    assert_replays_as_itself(delivered)
    assert delivered.response == '{"a":1}'  # as the override has it


# -- what does not replay, and was stored --------------------------------------------------------------------------


@dataclasses.dataclass
class Cart:
    prices: list[D]

    def __post_init__(self) -> None:
        self._total = sum(self.prices)


@dataclasses.dataclass
class Priced:
    prices: list[D]

    @functools.cached_property
    def total(self) -> D:
        return sum(self.prices, D(0))


class Money(pydantic.BaseModel):
    amount: Annotated[D, pydantic.PlainSerializer(float, return_type=float)]


class Exact(pydantic.BaseModel):
    amount: D


def test_an_attribute_set_by_post_init_that_is_not_a_field_is_refused(face, caplog):
    # A replay does not run __post_init__ again (it would derive a value from one already derived).
    delivered = deliver_twice(face, Cart([D("1.50")]), Cart, caplog)
    assert_committed_without_response(delivered, "Cart._total: an attribute that is not a field is not stored")


class TotalSlot:
    __slots__ = ("_total",)


@dataclasses.dataclass(slots=True)
class SlottedCart(TotalSlot):  # its base's slot, set by __post_init__, is no field
    price: int

    def __post_init__(self) -> None:
        self._total = self.price * 3


class PrivateSlot:
    __slots__ = ("__secret",)


@dataclasses.dataclass(slots=True)
class Sealed(PrivateSlot):  # a private slot is stored under its mangled name
    price: int

    def __post_init__(self) -> None:
        self._PrivateSlot__secret = self.price


@dataclasses.dataclass(init=False)
class Labelled:  # a field keeps its class default: as many attributes in __dict__ as fields
    order_id: str
    carrier: str = "post"

    def __init__(self, order_id: str) -> None:
        self.order_id, self.label = order_id, f"label-{order_id}"


@dataclasses.dataclass(slots=True)
class SlottedPlain(TotalSlot):  # the base's slot left unset: nothing is lost
    price: int


@pytest.mark.parametrize(
    ("result", "why"),
    [
        pytest.param(SlottedCart(10), "SlottedCart._total: an attribute that is not a field", id="base-slot"),
        pytest.param(Sealed(10), "Sealed._PrivateSlot__secret: an attribute that is not a field", id="private-slot"),
        pytest.param(Labelled("o-1"), "Labelled.label: an attribute that is not a field", id="custom-init"),
    ],
)
def test_an_attribute_that_is_not_a_field_is_refused_in_a_slot_or_beside_a_class_default(face, caplog, result, why):
    delivered = deliver_twice(face, result, type(result), caplog)
    assert_committed_without_response(delivered, why)


def test_a_slot_that_is_not_a_field_and_was_never_set_replays(face, caplog):
    assert_replays_as_itself(deliver_twice(face, SlottedPlain(10), SlottedPlain, caplog))


def test_a_cached_property_that_was_read_is_computed_again_on_a_replay(face, caplog):
    priced = Priced([D("1.50")])
    assert priced.total == D("1.50")  # cached in the instance's __dict__
    delivered = deliver_twice(face, priced, Priced, caplog)
    assert_replays_as_itself(delivered)
    assert delivered.replayed.total == D("1.50")


def test_a_decimal_replayed_without_its_exponent_is_refused(face, caplog):
    delivered = deliver_twice(face, Money(amount=D("30.50")), Money, caplog)  # stored as 30.5: == says equal
    assert_committed_without_response(delivered, "Money.amount: a Decimal replays with another value")
    delivered = deliver_twice(face, Exact(amount=D("30.50")), Exact, caplog)
    assert_replays_as_itself(delivered)
    assert str(delivered.replayed.amount) == "30.50"


# -- what it costs ---------------------------------------------------------------------------------------------


class CountingEncoder:
    def __init__(self, encoder: Any) -> None:
        self.encoder, self.calls = encoder, 0

    def encode(self, value: Any) -> str:
        self.calls += 1
        return str(self.encoder.encode(value))


def test_the_stored_text_is_encoded_once_and_that_text_is_checked(monkeypatch):
    encoder = CountingEncoder(consumer._serde._PLAIN)
    monkeypatch.setattr(consumer._serde, "_PLAIN", encoder)
    checked = []
    decode = consumer.serialization._round_trip.decode_result
    monkeypatch.setattr(
        consumer.serialization._round_trip, "decode_result", lambda text: checked.append(text) or decode(text)
    )
    text = encode_output(Receipt(order_id="o-1"), PydanticSerializer(Receipt))
    assert (text, encoder.calls, checked) == ('{"order_id":"o-1"}', 1, [text])


def test_a_result_too_large_for_any_store_is_not_checked(face, caplog, monkeypatch):
    def refuse(*args: Any) -> None:
        raise AssertionError("checked a result no store takes")

    monkeypatch.setattr(consumer.serialization._round_trip, "require_replay", refuse)
    payments = [Payment(card="4111")] * (MAX_ITEM_BYTES // 10)  # would be refused: each card replays masked
    delivered = deliver_twice(face, payments, list[Payment], caplog)
    assert delivered.runs == ["o-1"]
    assert (delivered.response, delivered.replayed) == (None, None)
    assert "too large to store" in delivered.log


# -- where: the nested type and its position ---------------------------------------------------------------------


class Cat(pydantic.BaseModel):
    name: str
    token: str = pydantic.Field(exclude=True)


class Owner(pydantic.BaseModel):
    pets: list[Cat]


@dataclasses.dataclass
class Household:
    owners: dict[str, Owner]


CAT = Cat(name="c", token="t")


@pytest.mark.parametrize(
    ("result", "annotation", "why"),
    [
        pytest.param([CAT, CAT], list[Cat], "list[0]: a Cat does not replay: token: Field required", id="list"),
        pytest.param(Owner(pets=[CAT]), Owner, "Owner.pets[0]: a Cat does not replay: token: Field required"),
        pytest.param(
            Household({SECRET: Owner(pets=[CAT])}),
            Household,
            "Household.owners[<key 0>].pets[0]: a Cat does not replay: token: Field required",
        ),
    ],
)
def test_a_refusal_names_the_nested_type_and_its_position(face, caplog, result, annotation, why):
    assert_committed_without_response(deliver_twice(face, result, annotation, caplog), why)
