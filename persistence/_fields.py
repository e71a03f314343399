"""Dataclasses shown, compared and hashed by their fields through methods written once, not generated for each.

A dataclass compiles each method it generates when its class is made: every cold start pays for them. The public
frozen types (the record, the attribute names, the config, the typed records, the batch summary) stay dataclasses,
so that :func:`dataclasses.replace` and :func:`dataclasses.fields` work on them, declared with ``repr=False,
eq=False`` over :class:`ByFields`, which shows, compares and hashes them as the generated methods would.
"""

from __future__ import annotations

import dataclasses
from typing import Any


class ByFields:
    """``__repr__``, ``__eq__`` and ``__hash__`` of a frozen dataclass, read from its fields (each field's
    ``repr`` and ``compare`` flags): equal to an instance of the same class with equal compared fields, hashed by
    them, shown as ``Name(field=value, ...)``."""  # noqa: D205, D209 - one sentence

    __slots__ = ()

    def _compared(self) -> tuple[Any, ...]:
        return tuple([getattr(self, f.name) for f in dataclasses.fields(self) if f.compare])  # type: ignore[arg-type]

    def __eq__(self, other: object) -> bool:
        """Equal to an instance of the same class whose compared fields are equal."""
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._compared() == other._compared()

    def __hash__(self) -> int:
        """The hash of the compared fields (a field holding a dict or a list makes it unhashable, as generated)."""
        return hash(self._compared())

    def __repr__(self) -> str:
        """``Name(field=value, ...)``: the fields shown, as a dataclass shows them."""
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self) if f.repr)  # type: ignore[arg-type]
        return f"{type(self).__qualname__}({shown})"
