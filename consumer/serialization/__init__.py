"""Output serializers: a replay returns what the first run returned, dataclasses and Pydantic models included.

A result is stored as JSON: plain values (and ``Decimal``, ``datetime``, ``bytes``, tuples, sets, ...) replay
exactly on their own, but a dataclass or a Pydantic model is stored as its fields and, without a serializer,
replays as a dict. An output serializer turns the result into what is stored (``to_dict``) and the stored value
back into the result (``from_dict``). ``@idempotent_function`` picks one from the function's return annotation
(:func:`serializer_for`), or takes one as ``output_serializer=``; a guard takes one as ``output_serializer=``.

The class names and methods are those of Powertools for AWS Lambda (Python), so its serializers, and its
``output_serializer=`` arguments, work here with an import change.

The serializers built in here (not a pair of functions of yours) make sure of what they store: when a guard
stores a result, the text it encoded once is decoded and rebuilt through ``from_dict``, as a replay would, and
compared with the result (:meth:`~consumer.serialization._Typed.check_replay`). When they differ (a
``SecretStr`` dumped masked, a field left out of ``model_dump``, a subclass of the annotated class) the result is
committed without its response, with a warning, rather than replayed as something else. A subclass of one of
them is checked through its own ``to_dict`` and ``from_dict``, as its replays go.

The serialization wing owns the serializers (this module) and typed replays. One type table (``_types``) says what
each place of a result is; the rebuild of a stored value as the annotated type (``_typed``), the check that it
replays as itself (``_round_trip``) and the words saying where and why it does not (``_describe``) follow it. It
may import the core and ``persistence``, no other wing. The core's result codec (``consumer._output``,
``consumer._serde``) loads it lazily, when a guard or a decorated function meets a serializer or a typed return
annotation: plain JSON results never load it.

Examples:
    >>> import dataclasses
    >>> @dataclasses.dataclass
    ... class Receipt:
    ...     order_id: str
    ...     amount: int
    >>> serializer = DataclassSerializer(Receipt)
    >>> serializer.to_dict(Receipt("o-1", 30))
    {'order_id': 'o-1', 'amount': 30}
    >>> serializer.from_dict({"order_id": "o-1", "amount": 30})
    Receipt(order_id='o-1', amount=30)
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

from consumer._errors import IdempotencyModelTypeError, IdempotencyNoSerializationModelError
from consumer.serialization import _round_trip
from consumer.serialization._typed import plain, rebuild
from consumer.serialization._types import holds_models, is_dataclass_type, is_model_type, optional_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from typing_extensions import Self  # typing.Self is 3.11+

__all__ = [
    "BaseIdempotencyModelSerializer",
    "BaseIdempotencySerializer",
    "CustomDictSerializer",
    "DataclassSerializer",
    "NoOpSerializer",
    "PydanticSerializer",
    "serializer_for",
]


class BaseIdempotencySerializer(abc.ABC):
    """Turns a result into what is stored, and what was stored back into the result.

    Neither method sees ``None``: a ``None`` result is stored as ``None`` and replays as ``None``. A method that
    raises while storing leaves the record committed without its response (the body ran: it must not run
    again); one that raises on a replay fails the record with :class:`~consumer.ResponseDecodeError`.
    """

    @abc.abstractmethod
    def to_dict(self, data: Any) -> dict[str, Any]:
        """What to store for ``data``: a dict, or any other value the result encoder replays exactly."""

    @abc.abstractmethod
    def from_dict(self, data: dict[str, Any]) -> Any:
        """The result to replay for ``data``, the value ``to_dict`` returned (as the encoder replays it)."""


class BaseIdempotencyModelSerializer(BaseIdempotencySerializer):
    """A serializer built for a type: pass the class itself to ``@idempotent_function(output_serializer=...)``
    and it is built for the function's return annotation."""  # noqa: D205, D209 - one sentence

    @classmethod
    @abc.abstractmethod
    def instantiate(cls, model_type: Any) -> BaseIdempotencySerializer:
        """A serializer for ``model_type`` (``X`` or ``X | None``); ``model_type`` is ``None`` when unknown.

        Raises:
            IdempotencyNoSerializationModelError: ``model_type`` is ``None``.
            IdempotencyModelTypeError: This class cannot serialize ``model_type``.
        """


class NoOpSerializer(BaseIdempotencySerializer):
    """Stores the result as it is (what happens without a serializer): a dataclass replays as a dict.

    Pass it to ``@idempotent_function`` to keep a dataclass or model return annotation from choosing a
    serializer.
    """

    def to_dict(self, data: Any) -> Any:
        """``data`` itself."""
        return data

    def from_dict(self, data: Any) -> Any:
        """``data`` itself."""
        return data


class CustomDictSerializer(BaseIdempotencySerializer):
    """A serializer made of two functions.

    Examples:
        >>> import fractions
        >>> serializer = CustomDictSerializer(
        ...     to_dict=lambda f: {"n": f.numerator, "d": f.denominator},
        ...     from_dict=lambda d: fractions.Fraction(d["n"], d["d"]),
        ... )
        >>> serializer.from_dict(serializer.to_dict(fractions.Fraction(3, 4)))
        Fraction(3, 4)
    """

    def __init__(self, to_dict: Callable[[Any], Any], from_dict: Callable[[Any], Any]) -> None:
        """Wrap the two functions.

        Args:
            to_dict: The result to what is stored (a dict, or any value the result encoder replays exactly).
            from_dict: What was stored back to the result.
        """
        self._to_dict = to_dict
        self._from_dict = from_dict

    def to_dict(self, data: Any) -> Any:
        """``to_dict(data)``."""
        return self._to_dict(data)

    def from_dict(self, data: Any) -> Any:
        """``from_dict(data)``."""
        return self._from_dict(data)


class _Typed(BaseIdempotencySerializer):
    """The serializers built in here: a type's values stored as plain values (:func:`plain`) and rebuilt from them;
    dataclasses and models inside containers (``list[Order]``, ``dict[str, Order]``, ``tuple[Order, ...]``) and
    generic dataclasses (``Box[Line]``) as they are, a dataclass or a model by its own class below.

    The guard encodes ``to_dict(result)`` once and passes that text to :meth:`check_replay`, which decodes it and
    rebuilds it through ``from_dict``, as a replay does: the pair is checked as it is used, a subclass's overrides
    included.
    """  # noqa: D205 - the summary needs two lines

    def __init__(self, model: Any) -> None:
        self.model = model

    def to_dict(self, data: Any) -> dict[str, Any]:
        """The instance as plain values: its fields, nested dataclasses and models as dicts (JSON-ready)."""
        return plain(data)  # type: ignore[no-any-return]  # a dict for an instance of a dataclass or a model

    def from_dict(self, data: dict[str, Any]) -> Any:
        """The instance rebuilt from its stored dict (a model is validated)."""
        return rebuild(self.model, data)

    def check_replay(self, result: Any, text: str) -> None:
        """Check that ``text``, the stored form of ``result``, replays as ``result``, as ``model`` annotates it.

        Raises:
            NotReplayableError: It replays as something else, or not at all.
        """
        _round_trip.require_replay(result, text, self.from_dict, self.model)

    def __repr__(self) -> str:
        return f"serializer_for({self.model!r})"


class _OneModel(_Typed, BaseIdempotencyModelSerializer):
    """What the dataclass and the Pydantic serializers share: ``model``, stored as plain values, rebuilt from them."""

    @classmethod
    def instantiate(cls, model_type: Any) -> Self:
        """A serializer for ``model_type`` (or ``model_type | None``)."""
        return cls(_model_of(model_type))

    def __repr__(self) -> str:
        """``DataclassSerializer(Model)``, ``PydanticSerializer(Model)``."""
        return f"{type(self).__name__}({self.model.__qualname__})"


class DataclassSerializer(_OneModel):
    """Replays a dataclass as itself: nested dataclasses (in fields, lists, tuples, sets, dict values, ``X | None``,
    generic ones as ``Box[Line]`` or a subclass binding them, ``LineBox(Box[Line])``), Pydantic models and enum
    members in its fields too.

    Field annotations are resolved in the dataclass's module on the first replay, so a string annotation (``from
    __future__ import annotations``) works unless it names a class defined inside a function. A stored dict with
    a field the class no longer has, or without one it requires, fails the replay with
    :class:`~consumer.ResponseDecodeError`; fields with ``init=False`` are restored after construction.

    A result whose stored form would not replay as itself is committed without its response when a guard stores
    it (:meth:`~consumer.serialization._Typed.check_replay`): a subclass, a dict, a dataclass, a
    model or a plain enum in a field annotated ``Any``, an attribute that is not a field (set by ``__post_init__`` or a
    custom ``__init__``, in ``__dict__`` or in a slot), a model field that does not replay (see
    :class:`PydanticSerializer`). The values are compared field by field, with
    ``==`` (Decimals with their exponent; a value whose ``==`` is identity or raises is not compared); a subclass
    of a built-in type (an ``IntEnum`` in an ``int`` field) replays as that type, with a warning, as without a
    serializer, where the annotation allows that type, and a raw value in an enum field (``"open"`` for
    ``Status.OPEN``) as the member equal to it. A named tuple, a ``Counter``, an ``OrderedDict`` and an enum member
    of a ``Literal`` replay as themselves where a field annotates them; another subclass annotated as itself is
    refused.
    """  # noqa: D205 - the summary needs two lines

    def __init__(self, model: type[Any]) -> None:
        """Serialize instances of ``model``.

        Raises:
            IdempotencyModelTypeError: ``model`` is not a dataclass.
        """
        if not is_dataclass_type(model):
            # Powertools' first words (its grammar too): code may match on them.
            raise IdempotencyModelTypeError(
                f"Model type is not inherited of dataclass type: DataclassSerializer needs a dataclass, not {model!r}"
            )
        super().__init__(model)


class PydanticSerializer(_OneModel):
    """Replays a Pydantic v2 model as itself: stored as ``model_dump(mode="json", round_trip=True)``, read back
    with validation.

    Fields are stored by name and read by name or by alias, whichever the record has (Pydantic 2.11 and later;
    before, stored and read by alias), so aliased fields replay, records that Powertools or earlier versions
    stored by alias too; ``round_trip`` leaves computed fields out (a model that forbids extra fields would refuse
    them) and keeps ``Json`` fields as text (a ``model_dump`` override that does not take them is called as
    ``model_dump(mode="json")``). A model whose stored form would not replay as itself is committed without its
    response: a field excluded from the dump, a ``SecretStr`` (dumped masked), a subclass of the model. Private
    attributes are not data (``model_dump`` leaves them out): a replay has them as a new model gets them. A
    stored dict that no longer validates (the model changed since) fails the replay with
    :class:`~consumer.ResponseDecodeError`. Pydantic stays an optional dependency: it is never imported here (a
    model class means it already was).
    """  # noqa: D205 - the summary needs two lines

    def __init__(self, model: type[Any]) -> None:
        """Serialize instances of ``model``.

        Raises:
            IdempotencyModelTypeError: ``model`` is not a Pydantic v2 model class.
        """
        if not is_model_type(model):
            raise IdempotencyModelTypeError(  # Powertools' first words: code may match on them
                "Model type is not inherited from pydantic BaseModel: PydanticSerializer needs a pydantic.BaseModel "
                f"subclass, not {model!r}"
            )
        super().__init__(model)


def serializer_for(output_type: Any) -> BaseIdempotencySerializer | None:
    """The serializer that replays values of ``output_type`` as themselves; ``None`` when none is needed.

    ``@idempotent_function`` calls it with the function's return annotation. A dataclass gets a
    :class:`DataclassSerializer`, a Pydantic model a :class:`PydanticSerializer`, each also as ``X | None``;
    lists, tuples, sets, frozensets and dicts of them (``list[Order]``, ``dict[str, Order] | None``, their
    ``collections.abc`` forms too) and generic dataclasses with their arguments (``Box[Line]``) get a serializer
    that rebuilds each element. Any other type (``dict``, ``int``, a ``TypedDict``, ``Any``) needs none: the
    stored result already replays with its exact type.

    Raises:
        IdempotencyModelTypeError: A union of several types holding a dataclass or a model (``A | B``): a
            stored dict does not say which one to rebuild.

    Examples:
        >>> import dataclasses
        >>> @dataclasses.dataclass
        ... class Line:
        ...     sku: str
        >>> serializer_for(Line | None), serializer_for(dict[str, int])
        (DataclassSerializer(Line), None)
        >>> serializer_for(list[Line]).from_dict([{"sku": "a-1"}])
        [Line(sku='a-1')]
    """
    if not holds_models(output_type):
        return None
    model = optional_of(output_type)
    if is_dataclass_type(model):
        return DataclassSerializer(model)
    if is_model_type(model):
        return PydanticSerializer(model)
    return _Typed(output_type)


def _model_of(model_type: Any) -> Any:
    if model_type is None:
        raise IdempotencyNoSerializationModelError(  # Powertools' first words: code may match on them
            "No serialization model was supplied: no type to build the serializer for; annotate the return type"
        )
    return optional_of(model_type)
