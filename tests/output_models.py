"""Results of every shape an output serializer replays: nested dataclasses, Pydantic v2 models, both mixed.

Annotations are text here (``from __future__ import annotations``): the library resolves them in this module.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal

import pydantic

D = decimal.Decimal
AT = dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.timezone.utc)


@dataclasses.dataclass(frozen=True, slots=True)
class Line:
    sku: str
    price: D


class Address(pydantic.BaseModel):
    city: str
    zip: str


@dataclasses.dataclass
class Order:
    """Nested dataclasses in a list, a dict and an optional field; a model; a tuple; an ``init=False`` field."""

    order_id: str
    lines: list[Line]
    tags: tuple[str, ...] = ()
    gift: Line | None = None
    by_sku: dict[str, Line] = dataclasses.field(default_factory=dict)
    ship_to: Address | None = None
    placed_at: dt.datetime = AT
    total: D = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.total = sum((line.price for line in self.lines), D(0))


class Receipt(pydantic.BaseModel):
    """A model holding a dataclass."""

    order_id: str
    amount: D
    at: dt.datetime
    lines: list[Line] = []


class StrictReceipt(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(strict=True)
    amount: D
    at: dt.datetime


def an_order(order_id: str = "o-1") -> Order:
    lines = [Line("a-1", D("10.50")), Line("b-2", D("4.25"))]
    return Order(
        order_id,
        lines,
        tags=("gift", "eu"),
        gift=Line("card", D("0")),
        by_sku={line.sku: line for line in lines},
        ship_to=Address(city="Lyon", zip="69001"),
    )


def a_receipt(order_id: str = "o-1") -> Receipt:
    return Receipt(order_id=order_id, amount=D("14.75"), at=AT, lines=[Line("a-1", D("10.50"))])


@dataclasses.dataclass
class Cents:
    """Built from dollars: ``__post_init__`` turns its one field into cents."""

    amount: int

    def __post_init__(self) -> None:
        self.amount *= 100


@dataclasses.dataclass(frozen=True, slots=True)
class Scaled:
    """A field derived from an ``InitVar`` that is never stored."""

    x: int
    scale: dataclasses.InitVar[int]

    def __post_init__(self, scale: int) -> None:
        object.__setattr__(self, "x", self.x * scale)


class Checked(pydantic.BaseModel):
    """A card model whose validator refuses the cards the tests plant as secrets, quoting them (as validators do),
    and whose serializer refuses a card ending in ``!``, quoting it too."""

    card: str

    @pydantic.field_validator("card")
    @classmethod
    def known(cls, card: str) -> str:
        if card.startswith(("SECRET", "s3cr3t")):
            raise ValueError(f"unknown card {card}")  # a validator's message quotes the value
        return card

    @pydantic.field_serializer("card")
    def dumped(self, card: str) -> str:
        if card.endswith("!"):
            raise ValueError(f"cannot dump {card}")
        return card
