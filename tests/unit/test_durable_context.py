"""A durable function's ``DurableContext`` (the AWS durable execution SDK's), with a stand-in of it.

What the library does with one: the Lambda context it carries is the invocation's (it bounds the lock, the batch's
deadline margin); the handler still gets the ``DurableContext``. A suspension (the SDK's ``SuspendExecution``, a
``BaseException``) ends the body: its lock is released, so the replay takes the key afresh and runs, skipping the
steps the SDK checkpointed. A replay that meets a live lock is in progress like any other delivery: it is not run
again beside a holder nobody has proved dead (Powertools runs it). Once that lock is past its deadline the replay
takes it over, and the old holder's commit is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from events import failures, sqs_event, sqs_record
from fakes import FakeClock, FakeContext

from consumer import (
    BatchProcessor,
    EventType,
    IdempotencyAlreadyInProgressError,
    IdempotencyConfig,
    IdempotencyGuard,
    current_lambda_context,
    idempotent,
    process_partial_response,
    register_lambda_context,
)
from persistence import InMemoryPersistenceLayer, LockLostError, RecordStatus

GRACE_MS = 1000


class SuspendExecution(BaseException):
    """Stands in for the SDK's: a wait (or a callback) suspends the execution by raising it through the handler."""


@dataclass
class ExecutionState:
    """Stands in for the SDK's execution state: the operations checkpointed so far (the execution's own first)."""

    operations: list[str] = field(default_factory=lambda: ["EXECUTION"])


@dataclass
class DurableContext:
    """Stands in for the SDK's ``DurableContext``: what the library (and Powertools) read of it."""

    lambda_context: FakeContext
    state: ExecutionState = field(default_factory=ExecutionState)

    def replayed(self, *steps: str) -> DurableContext:
        """The next invocation of this execution, after the steps it checkpointed."""
        return DurableContext(FakeContext(remaining_ms=60_000), ExecutionState([*self.state.operations, *steps]))


def workflow(store: InMemoryPersistenceLayer, clock: FakeClock, steps: list[str]) -> Any:
    """A durable handler: one step, then a wait that suspends the first invocation; the replay skips the step."""
    seen: list[Any] = []

    @idempotent(store=store, config=IdempotencyConfig(event_key_jmespath="order"), clock=clock)
    def handler(event: dict[str, Any], context: DurableContext) -> str:
        seen.append((context, current_lambda_context()))
        if "charge" not in context.state.operations:
            steps.append("charge")  # a step: checkpointed, so a replay does not run it again
            raise SuspendExecution("wait 1 h")
        return "shipped"

    handler.seen = seen  # type: ignore[attr-defined]
    return handler


def test_the_lambda_context_a_durable_context_carries_bounds_the_lock():
    store, clock = InMemoryPersistenceLayer(), FakeClock()
    context = DurableContext(FakeContext(remaining_ms=5_000))
    held = []

    @idempotent(store=store, config=IdempotencyConfig(event_key_jmespath="order"), clock=clock)
    def handler(event, durable):
        held.extend(store.scan())
        return durable is context and current_lambda_context() is context.lambda_context

    assert handler({"order": "o-1"}, context) is True
    now_ms = int(clock() * 1000)
    assert [r.in_progress_expires_at for r in held] == [now_ms + 5_000 + GRACE_MS]


def test_a_suspended_execution_holds_no_lock_and_its_replay_runs_to_the_end_once():
    store, clock, steps = InMemoryPersistenceLayer(), FakeClock(), []
    handler = workflow(store, clock, steps)
    first = DurableContext(FakeContext(remaining_ms=60_000))
    with pytest.raises(SuspendExecution):
        handler({"order": "o-1"}, first)
    assert list(store.scan()) == []  # released: the replay need not wait for this invocation's deadline
    assert handler({"order": "o-1"}, first.replayed("charge")) == "shipped"
    another_execution = DurableContext(FakeContext(remaining_ms=60_000))  # a duplicate delivery, later
    assert handler({"order": "o-1"}, another_execution) == "shipped"
    assert steps == ["charge"]
    assert [r.status for r in store.scan()] == [RecordStatus.COMPLETE]
    assert len(handler.seen) == 2


def test_a_replay_that_meets_a_live_lock_is_in_progress_and_takes_it_over_only_once_it_lapsed():
    store, clock, steps = InMemoryPersistenceLayer(), FakeClock(), []
    handler = workflow(store, clock, steps)
    config = IdempotencyConfig(event_key_jmespath="order")
    holder = IdempotencyGuard({"order": "o-1"}, store=store, config=config, clock=clock, context=FakeContext(10_000))
    holder.__enter__()  # an earlier invocation, still running as far as anyone can tell
    replay = DurableContext(FakeContext(remaining_ms=60_000)).replayed("charge")
    with pytest.raises(IdempotencyAlreadyInProgressError):
        handler({"order": "o-1"}, replay)
    assert handler.seen == []  # not run beside the holder

    clock.advance(10 + GRACE_MS / 1000 + 0.001)  # the holder's lock has lapsed: it is taken over, fenced
    assert handler({"order": "o-1"}, replay) == "shipped"
    holder.result = "late"
    with pytest.raises(LockLostError):
        holder.__exit__(None, None, None)
    assert store.get(holder.key).response == '"shipped"'


def test_a_batch_given_a_durable_context_keeps_the_deadline_margin_of_its_lambda_context():
    processor = BatchProcessor(
        EventType.SQS, store=InMemoryPersistenceLayer(), deadline_margin_ms=1_000, raise_on_entire_batch_failure=False
    )
    context = DurableContext(FakeContext(remaining_ms=500))
    response = process_partial_response(sqs_event(sqs_record("a", 1)), lambda r: pytest.fail("ran"), processor, context)
    assert failures(response) == ["a"]
    assert processor.summary.deferred == 1


def test_a_context_carrying_a_lambda_context_but_no_execution_state_is_used_itself():
    # A durable context is recognised as Powertools recognises it: by its lambda_context and its state, both.
    carrier = FakeContext(remaining_ms=5_000)
    carrier.lambda_context = FakeContext(remaining_ms=900_000)  # type: ignore[attr-defined]
    with register_lambda_context(carrier):
        assert current_lambda_context() is carrier


def test_powertools_registration_of_a_durable_context_registers_its_lambda_context():
    context = DurableContext(FakeContext(remaining_ms=5_000))
    config = IdempotencyConfig()
    config.register_lambda_context(context)
    try:
        assert current_lambda_context() is context.lambda_context
    finally:
        config.register_lambda_context(None)
