"""Where a rebuild failed, noted on its exception, and the errors a rebuild raises of its own.

:func:`._typed.rebuild` notes on an exception that passes through it the type that raised (the first
rebuild it leaves), the type the rebuild started from (the last) and each step in between: a field, an index, the
value or the key of a dict entry, named by its place among the entries (``[<key 2>]``), never by the key itself,
which is data. :mod:`._describe` turns that into a message.

The errors raised here have messages made of type names, field names and counts: no stored value.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from consumer._serde import _name

_POSITION = "_idempotent_consumer_position"  # the exception's attribute (every exception has a __dict__)

#: One step down a stored value: ``("field", name)``, ``("index", i)``, the value (``("value", i)``) or the key
#: (``("key", i)``) of the i-th entry of a dict.
Step = tuple[str, Any]


@dataclasses.dataclass
class Position:
    """Where a rebuild failed: down ``steps`` (innermost first) from ``root`` to ``type``, whose rebuild raised."""

    type: Any
    root: Any
    steps: list[Step]


def reached(error: BaseException, tp: Any) -> None:
    """Note on ``error`` that it left the rebuild of ``tp``: the first call names the type that raised."""
    found = error.__dict__.get(_POSITION)
    if found is None:
        error.__dict__[_POSITION] = Position(tp, tp, [])
    else:
        found.root = tp


def stepped(error: BaseException, step: Step) -> None:
    """Note on ``error`` a step its rebuild came down, innermost first."""
    found = error.__dict__.get(_POSITION)
    if found is not None:
        found.steps.append(step)


def position(error: BaseException) -> Position | None:
    """Where the rebuild that raised ``error`` failed; ``None`` when no rebuild did."""
    found = error.__dict__.get(_POSITION)
    return found if isinstance(found, Position) else None


def render(steps: list[Step]) -> str:
    """``steps`` (outermost first) as a path: ``.lines[0]``, ``[<key 2>]``, ``.keys()[2]`` (a key itself)."""
    said = {"field": ".{}", "index": "[{}]", "value": "[<key {}>]", "key": ".keys()[{}]"}
    return "".join(said[kind].format(at) for kind, at in steps)


class StoredFormError(TypeError):
    """A stored value is not in the form its type is stored in (the message names types and fields only)."""


class UnknownFieldsError(StoredFormError):
    """A dict stored for a dataclass has keys that are not its fields."""

    def __init__(self, cls: type, names: list[str]) -> None:
        """``names``: the keys ``cls`` has no field for."""
        self.cls, self.names = cls, names
        super().__init__(self.said(named=True))

    def said(self, named: bool) -> str:
        """The message, naming the keys only when ``named`` (keys may be data, not field names)."""
        if named:
            return f"{_name(self.cls)} has no field {', '.join(map(repr, self.names))}"
        return f"{_name(self.cls)} has no field for {len(self.names)} of the stored keys"


class MissingFieldsError(StoredFormError):
    """A dict stored for a dataclass lacks fields that have no default."""

    def __init__(self, cls: type, names: list[str]) -> None:
        """``names``: the fields of ``cls`` without a default that were not stored."""
        super().__init__(f"{_name(cls)} has no stored value for its field {', '.join(map(repr, names))}")


class NotAMemberError(ValueError):
    """A value stored in an enum position is not the value of one of its members."""

    def __init__(self, cls: type) -> None:
        """``cls``: the enum."""
        super().__init__(f"the stored value is not one of the members of {_name(cls)}")


#: The errors whose message holds no stored value.
SAFE_ERRORS = (StoredFormError, NotAMemberError)
