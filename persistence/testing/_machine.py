"""The lock state machine: holders with a jumping clock, checked against a reference model.

No two holders ever both hold a live lock, a stale holder's write is always refused, and the store agrees with
the model at every step.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from persistence._errors import LockLostError
from persistence._record import IdempotencyRecord, RecordStatus
from persistence.testing._records import NOW_MS, done

if TYPE_CHECKING:
    from persistence._base import PersistenceLayer
    from persistence.testing._races import ContractSettings

HOLDERS = st.sampled_from(["a", "b", "c"])


class LockMachine(RuleBasedStateMachine):
    """Three holders acquire, complete and release one key, an operator deletes what it read; the clock jumps."""

    store: PersistenceLayer  # set on a subclass per store

    def __init__(self) -> None:
        super().__init__()
        self.key = f"sm-{uuid.uuid4().hex}"
        self.now_ms = NOW_MS
        self.model: IdempotencyRecord | None = None
        self.held: dict[str, IdempotencyRecord] = {}  # the last record each holder acquired
        self.believers: set[str] = set()  # holders who acquired and have not finished
        self.read: IdempotencyRecord | None = None  # the record an operator last read

    @rule(holder=HOLDERS, lock_ms=st.sampled_from([500, 1000, 60_000]), expires_s=st.sampled_from([1, 60, 3600]))
    def acquire(self, holder: str, lock_ms: int, expires_s: int) -> None:
        """A holder tries to take the key."""
        record = IdempotencyRecord.in_progress(
            self.key, expires_at=self.now_ms // 1000 + expires_s, lock_deadline_ms=self.now_ms + lock_ms
        )
        free = self.model is None or self.model.can_be_acquired(self.now_ms)
        existing = self.store.acquire(record, self.now_ms)
        if free:
            assert existing is None
            self.model, self.held[holder] = record, record
            self.believers = {holder}
        else:
            assert existing == self.model

    @precondition(lambda self: self.held)
    @rule(holder=HOLDERS, response=st.sampled_from(["0", '""', "[]", "false", "null", '"ü"']))
    def complete(self, holder: str, response: str) -> None:
        """A holder commits under the lease it last acquired."""
        held = self.held.get(holder)
        if held is None:
            return
        mine = self.model is not None and self.model.lease == held.lease
        ours = mine and self.model is not None and self.model.status is RecordStatus.IN_PROGRESS
        record = done(held, response, expires_at=self.now_ms // 1000 + 60)
        if ours:
            self.store.complete(record)
            self.model = dataclasses.replace(record, in_progress_expires_at=None)
        elif mine:  # already COMPLETE under our lease: a retry, accepted without writing
            self.store.complete(record)
        else:
            with pytest.raises(LockLostError):
                self.store.complete(record)
        self.believers.discard(holder)

    @precondition(lambda self: self.held)
    @rule(holder=HOLDERS)
    def release(self, holder: str) -> None:
        """A holder releases the lock it last acquired (refused once committed or taken over)."""
        held = self.held.get(holder)
        if held is None:
            return
        self._release(held)
        self.believers.discard(holder)

    @rule()
    def operator_reads(self) -> None:
        """An operator reads the record (``records delete`` asks before it deletes)."""
        self.read = self.store.get(self.key)

    @precondition(lambda self: self.read is not None)
    @rule()
    def operator_deletes(self) -> None:
        """The operator deletes the record it read, whatever happened since."""
        assert self.read is not None
        self._release(self.read)

    def _release(self, record: IdempotencyRecord) -> None:
        same = self.model is not None and (self.model.status, self.model.lease) == (record.status, record.lease)
        if self.model is None or same:
            self.store.release(record)  # gone already counts as released
            self.model = None
        else:
            with pytest.raises(LockLostError):
                self.store.release(record)

    @rule(ms=st.one_of(st.integers(0, 2_000), st.integers(50_000, 70_000), st.just(3_700_000)))
    def tick(self, ms: int) -> None:
        """The clock jumps forward."""
        self.now_ms += ms

    @invariant()
    def store_agrees_with_the_model(self) -> None:
        """The stored record is the model's."""
        assert self.store.get(self.key) == self.model

    @invariant()
    def at_most_one_live_holder(self) -> None:
        """No two holders believe they hold a live lock."""
        live = [h for h in self.believers if (self.held[h].in_progress_expires_at or 0) >= self.now_ms]
        assert len(live) <= 1, live


def run_lock_machine(store: PersistenceLayer, contract: ContractSettings) -> None:
    """Run the lock state machine against ``store``."""
    machine = type("LockMachineOnStore", (LockMachine,), {"store": store})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=contract.state_machine_examples,
            stateful_step_count=contract.state_machine_steps,
            deadline=None,
        ),
    )
