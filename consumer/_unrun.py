"""Results that stand for work not done yet (a coroutine, a generator, a Future): never committed."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import io
import sys
from types import AsyncGeneratorType, CoroutineType, GeneratorType
from typing import Any

_MAX_SEARCH_DEPTH = 64
PLAIN_RESULTS = frozenset((dict, list, str, int, float, bool, type(None), tuple))


def never_ran(result: Any) -> bool:
    """Whether ``result`` stands for work not done yet: an awaitable, a generator or an async generator.

    The caller skips plain types first (the usual results), so no isinstance and getattr run per record.
    """
    return isinstance(result, (GeneratorType, AsyncGeneratorType)) or hasattr(type(result), "__await__")


def unrun_parts(value: Any, depth: int = 0, seen: set[int] | None = None) -> list[Any]:
    """Work not yet done inside a result: awaitables, iterators (``map``, generators), async iterators, Futures.

    Containers are searched, and so is what a dataclass or a Pydantic model stores: a dataclass's fields, a model's
    fields and extra values (pydantic is not imported when nobody has). Only called once a result
    failed to encode (plain data never holds these), so it costs nothing otherwise.
    """
    t = type(value)
    if (t in PLAIN_RESULTS and t not in (dict, list, tuple)) or depth > _MAX_SEARCH_DEPTH:
        return []
    if (
        hasattr(t, "__await__")
        or hasattr(t, "__anext__")
        or (hasattr(t, "__next__") and not isinstance(value, io.IOBase))
        or isinstance(value, concurrent.futures.Future)
    ):
        return [value]
    seen = set() if seen is None else seen
    if id(value) in seen:  # a cycle: already searched
        return []
    seen.add(id(value))
    if isinstance(value, dict):
        children: Any = value.values()
    elif isinstance(value, (list, tuple, set, frozenset)):
        children = value
    else:
        children = _attributes(value)
    return [part for child in children for part in unrun_parts(child, depth + 1, seen)]


def _attributes(value: Any) -> list[Any]:
    # What of a dataclass or a Pydantic model is stored, so searched: a dataclass's fields, a model's fields and
    # extra values. Other attributes (a helper counter, a client, a private attribute) are not the result's data:
    # a coroutine left there is the application's to await, and a lazy iterator there is no unrun work of ours.
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [getattr(value, f.name) for f in dataclasses.fields(value)]
    pydantic = sys.modules.get("pydantic")
    if pydantic is None or not isinstance(value, pydantic.BaseModel):
        return []
    return [*vars(value).values(), *(getattr(value, "__pydantic_extra__", None) or {}).values()]


def close_unrun(parts: list[Any]) -> None:
    """Stop the work ``parts`` stand for, as far as it can be stopped, before the lock is released.

    Coroutines and generators are closed (one left unclosed warns "never awaited" later). Tasks and futures
    (asyncio's or ``concurrent.futures``') are cancelled: a task scheduled in the body would otherwise run on
    after the record was reported failed, and again on its redelivery.
    """
    for part in parts:
        if isinstance(part, (GeneratorType, CoroutineType)):
            part.close()
        elif callable(getattr(part, "cancel", None)) and callable(getattr(part, "done", None)):
            part.cancel()
