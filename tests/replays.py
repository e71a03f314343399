"""Two deliveries of one record to a function that returns a typed result: did it replay as itself, or was it
committed without its response?"""

import dataclasses
import logging
import uuid
from typing import Any

from consumer import idempotent_function
from persistence import InMemoryPersistenceLayer, RecordStatus


@dataclasses.dataclass
class Delivered:
    first: Any
    replayed: Any
    runs: list[str]
    response: str | None
    log: str


def deliver_twice(face, result, annotation, caplog) -> Delivered:
    """Call a function returning ``result`` (annotated ``annotation``) twice with one key, on a fresh store."""
    store, runs = InMemoryPersistenceLayer(), []

    def body(order: dict[str, str]) -> Any:
        runs.append(order["id"])
        return result() if callable(result) else result

    body.__annotations__["return"] = annotation
    name = f"round-trip-{uuid.uuid4().hex}"
    decorated = idempotent_function(data_keyword_argument="order", store=store, name=name)(face.define(body))
    caplog.clear()
    with caplog.at_level(logging.WARNING, "idempotent_consumer"):
        first = face.call(decorated, order={"id": "o-1"})
        replayed = face.call(decorated, order={"id": "o-1"})
    [record] = store.scan()
    assert record.status is RecordStatus.COMPLETE
    return Delivered(first, replayed, runs, record.response, caplog.text)


def assert_replays_as_itself(delivered: Delivered) -> None:
    assert delivered.runs == ["o-1"]
    assert delivered.response is not None
    assert type(delivered.replayed) is type(delivered.first)
    assert delivered.replayed == delivered.first
    assert "cannot be stored" not in delivered.log


def assert_committed_without_response(delivered: Delivered, why: str) -> None:
    assert delivered.runs == ["o-1"]  # the body ran once: the duplicate replayed the record, without a response
    assert delivered.response is None
    assert delivered.replayed is None
    assert "cannot be stored" in delivered.log
    assert "committed without it" in delivered.log
    assert why in delivered.log
