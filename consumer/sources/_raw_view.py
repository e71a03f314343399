"""The raw event behind a typed record, read as Powertools' data classes read it: one view every record shares.

Every typed record of the sources wing (SQS, Kinesis, DynamoDB Streams, Kafka, and the Powertools-shaped views)
subclasses it, the records through :class:`KeyedByRaw` (what their keys see); it imports nothing of the wing, so
each record module can import it without a circle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView


class RawEventView:
    """Read access to the raw event behind a typed record, as Powertools' data classes give it.

    ``record["body"]``, ``record.get("attributes")``, ``"body" in record``, iterating, ``len(record)``,
    ``keys()`` / ``values()`` / ``items()`` and ``raw_event`` read the record as its event carries it; the typed
    attributes are the subclass's own. Nothing is copied or parsed until asked (a Kafka record's ``raw_event``,
    iteration and ``len`` build the record without the event fields our parser added to it).
    """

    __slots__ = ()

    #: Fields our parser adds to ``raw`` that the event's record does not carry: this view leaves them out.
    _ADDED: ClassVar[frozenset[str]] = frozenset()

    if TYPE_CHECKING:

        @property
        def raw(self) -> Mapping[str, Any]:
            """The record as the subclass holds it."""

    @property
    def raw_event(self) -> Mapping[str, Any]:
        """The record as its event carries it (Powertools' name)."""
        if not self._ADDED:
            return self.raw
        return {name: value for name, value in self.raw.items() if name not in self._ADDED}

    def __getitem__(self, name: str) -> Any:
        """The raw event's field ``name`` (``KeyError`` when it has none)."""
        if name in self._ADDED:
            raise KeyError(name)
        return self.raw[name]

    def get(self, name: str, default: Any = None) -> Any:
        """The raw event's field ``name``, or ``default``."""
        return default if name in self._ADDED else self.raw.get(name, default)

    def __contains__(self, name: object) -> bool:
        """Whether the raw event has the field ``name``."""
        return name not in self._ADDED and name in self.raw

    def __iter__(self) -> Iterator[str]:
        """The raw event's field names."""
        return iter(self.raw_event)

    def __len__(self) -> int:
        """How many fields the raw event has."""
        return len(self.raw_event)

    def keys(self) -> KeysView[str]:
        """The raw event's field names."""
        return self.raw_event.keys()

    def values(self) -> ValuesView[Any]:
        """The raw event's field values."""
        return self.raw_event.values()

    def items(self) -> ItemsView[str, Any]:
        """The raw event's ``(name, value)`` pairs."""
        return self.raw_event.items()


class KeyedByRaw(RawEventView):
    """A typed record of an event source: idempotency keys see it as :meth:`key_data` gives it, never its attributes."""

    __slots__ = ()
    __keyed_by_raw__ = True  # keys see key_data(): the record as its event carries it, never its delivery

    def key_data(self) -> Mapping[str, Any]:
        """The record as idempotency keys see it: its raw event, the same on every delivery."""
        return self.raw


class StreamRecord(KeyedByRaw):
    """A record of Kinesis Data Streams or DynamoDB Streams: ``batchItemFailures`` names it by its sequence number.

    Its subclasses live in :mod:`consumer.sources._streams`, which loads with the first stream batch; this base
    lets the sources' face tell a stream record apart without loading them.
    """

    __slots__ = ()

    if TYPE_CHECKING:
        sequence_number: str
