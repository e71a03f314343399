"""The store contract as a pytest suite: prove that a store you bring meets it, as every shipped store does.

Subclass :class:`StoreContract` in a test module and give it a ``store_factory`` fixture: a callable with no
arguments that returns a store. Every call during one test must return a store on the same, initially empty,
data (the race tests build one per thread or process); each test must start from empty data::

    import dataclasses

    import pytest
    from persistence.testing import StoreContract

    from my_project.stores import PostgresPersistenceLayer


    @dataclasses.dataclass(frozen=True)
    class Postgres:  # picklable (unlike a lambda), so the process race can build stores in other processes
        url: str
        schema: str

        def __call__(self):
            return PostgresPersistenceLayer(self.url, schema=self.schema)


    class TestPostgresStore(StoreContract):
        @pytest.fixture
        def store_factory(self, postgres_url):
            return Postgres(postgres_url, schema=fresh_schema(postgres_url))

The suite covers every row of the transition table (acquire, complete, release, with leases and expiry judged
by the ``now_ms`` the store is given; a release deletes the record only as it was read, its status and lease,
so a lock its holder committed meanwhile is left alone), exact round trips of responses and keys, the 400 KB
item limit, text with no UTF-8 form, the operator calls (``get``, ``delete``, ``scan``), races between threads
and between processes (contenders for a free key; a stale holder's ``complete`` or ``release`` against the
contenders taking its lapsed lock over), and a Hypothesis state machine. Override the ``contract_settings``
fixture to scale the races (:class:`ContractSettings`); ``processes=0`` for a store whose data lives in one
process. The process races need a picklable factory (a module-level function or a dataclass, not a lambda).

A store that commits the body's writes with the record (:class:`persistence.TransactionalStore`) passes
:class:`TransactionalContract` too: all or nothing, a stale holder writes nothing, a refused condition commits
nothing, a retried commit applies once. It reaches the store's own write shape through a ``write_probe`` fixture
(:class:`WriteProbe`).

Needs pytest (and Hypothesis for the state machine): ``pip install 'idempotent-consumer[testing]'``. Importing
:mod:`persistence` never imports this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

# The contract's asserts show the values that differ, as a user's own tests' do: registered before its modules load.
pytest.register_assert_rewrite(
    *(
        f"persistence.testing.{name}"
        for name in ("_content", "_machine", "_races", "_records", "_takeover", "_transitions", "_writes")
    )
)

from persistence.testing._content import ContentContract, EncodingContract, OperatorContract
from persistence.testing._races import ContractSettings, RaceContract, StoreFactory, race_processes, race_threads
from persistence.testing._records import HOUR_S, NOW_MS, NOW_S, done, lock, stored, taken_over
from persistence.testing._takeover import TakeoverRaceContract
from persistence.testing._transitions import AcquireContract, CompleteContract, ReleaseContract
from persistence.testing._writes import TransactionalContract, WriteProbe

if TYPE_CHECKING:
    from persistence._base import PersistenceLayer

__all__ = [
    "HOUR_S",
    "NOW_MS",
    "NOW_S",
    "ContractSettings",
    "StoreContract",
    "StoreFactory",
    "TransactionalContract",
    "WriteProbe",
    "done",
    "lock",
    "race_processes",
    "race_threads",
    "stored",
    "taken_over",
]


class StoreContract(
    AcquireContract,
    CompleteContract,
    ReleaseContract,
    ContentContract,
    EncodingContract,
    OperatorContract,
    RaceContract,
    TakeoverRaceContract,
):
    """The whole store contract; subclass it (as ``Test...``) and provide a ``store_factory`` fixture."""

    @pytest.fixture
    def store(self, store_factory: StoreFactory) -> PersistenceLayer:
        """A store from ``store_factory``, for the tests that need one."""
        return store_factory()
