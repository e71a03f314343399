"""One run: the actors of one key, driven by a schedule, checked by the oracle.

The actors: ``holders`` deliveries of one record, each running the real :class:`consumer.IdempotencyGuard`
around a body that records its run; every delivery that ends failed, in progress or crashed is redelivered
as a new holder (at most ``redeliveries`` times in all); an operator running the CLI's ``records delete``
path (read the record; refuse a live lock; ``release`` the record as read). Once every actor ended, a last
delivery (no faults, its clock past every lock) must end committed or replayed, and the record must be
``COMPLETE``: nothing is lost.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from consumer import AlreadyProcessed, IdempotencyAlreadyInProgressError, IdempotencyConfig, IdempotencyGuard
from consumer.keys import make_key
from consumer.testing._baton import CALL_FAULTS, READ_FAULTS, Actor, Baton, Event, SimulatedCrash, YieldingStore
from consumer.testing._oracle import Oracle, result_of
from persistence import PersistenceLayerError, RecordStatus

if TYPE_CHECKING:
    from persistence import PersistenceLayer

EPOCH_S = 1_000_000_000  # the simulated time every clock starts from (far from the real one: see docs)
LOCK_S = 60  # the guard's lock_timeout_seconds (no Lambda context: the lock deadline is now + 60 s)
JUMP_S = LOCK_S + 1  # a skewed holder's clock is this far ahead (or behind): past any lock it did not see taken
DRAIN_S = 10 * JUMP_S  # the last delivery's clock: past every lock, well within the expiry window
CONFIG = IdempotencyConfig(event_key_jmespath="id", lock_timeout_seconds=LOCK_S, expires_after_seconds=3600)
DATA = {"id": "m-1"}
KEY_PREFIX = "simulated"
OUTCOMES_REDELIVERED = ("in progress", "crashed")
POINT_FAULTS = {"start": ("", "ahead", "behind"), "body": ("", "raise", "crash"), "get": READ_FAULTS}


class BodyFailedError(Exception):
    """The simulated body raised (the record's failure: its lock is released, it is redelivered)."""


#: Picks one of ``count`` options at a choice point (``state()`` names the run's state there); ``None``
#: abandons the run (its state was explored already).
Chooser = Callable[[int, Callable[[], Hashable]], int | None]


@dataclass(frozen=True)
class Step:
    """One scheduled step: which actor went, at which point, with which fault, at what clock."""

    actor: str
    point: str
    fault: str
    clock_s: float

    def __str__(self) -> str:
        """One line of a trace."""
        return f"{self.actor:<9} {self.point:<9} {self.fault or '-':<12} clock {self.clock_s:+g}s"


@dataclass
class Outcome:
    """What a run did: its steps, its violations (empty: it held), whether it was abandoned."""

    steps: list[Step]
    choices: list[int]
    violations: list[str]
    abandoned: bool


@dataclass(frozen=True)
class Settings:
    """The actors and faults of every run (see :func:`consumer.testing.simulate`)."""

    holders: int
    operator: bool
    faults: int
    redeliveries: int
    epoch_s: int

    def play(self, make_store: Callable[[], PersistenceLayer], choose: Chooser) -> Outcome:
        """One run against a fresh store."""
        return Run(make_store(), self).play(choose)


class Run:
    """One run of the actors of one key against a fresh store (see the module's docstring)."""

    def __init__(self, store: PersistenceLayer, settings: Settings) -> None:
        """Prepare the actors; nothing runs before :meth:`play`."""
        self.store, self.faults, self.redeliveries = store, settings.faults, settings.redeliveries
        self.baton = Baton(settings.epoch_s)
        self.oracle = Oracle(settings.epoch_s * 1000)
        self.key = make_key(DATA, CONFIG, KEY_PREFIX) or ""
        self.steps: list[Step] = []
        self.choices: list[int] = []
        self._seen_events = 0
        self._initial = [Actor(f"h{i + 1}", self._holder) for i in range(settings.holders)]
        if settings.operator:
            self._initial.append(Actor("operator", self._operator))
        self._delivered = settings.holders

    def play(self, choose: Chooser) -> Outcome:
        """Run the actors under ``choose`` to their end (or until abandoned), then check the end."""
        for actor in self._initial:
            self.baton.start(actor)
            self._digest()
        while waiting := self.baton.waiting():
            options = [(a, f) for a in waiting for f in self._faults(a.pending)]
            index = choose(len(options), self._state)
            if index is None:
                self.baton.abandon()
                return Outcome(self.steps, self.choices, [], abandoned=True)
            actor, fault = options[index]
            self.choices.append(index)
            self.faults -= fault != ""
            self.steps.append(Step(actor.name, actor.pending, fault, actor.skew_s))
            self.baton.turn(actor, fault)
            self._digest()
            if self.oracle.violations:
                self.baton.abandon()
                return Outcome(self.steps, self.choices, self.oracle.violations, abandoned=False)
        self._drain()
        return Outcome(self.steps, self.choices, self.oracle.violations, abandoned=False)

    def _faults(self, point: str) -> tuple[str, ...]:
        return POINT_FAULTS.get(point, CALL_FAULTS) if self.faults > 0 else ("",)

    def _digest(self) -> None:
        """Check the events since the last step, then the deliveries that ended; redeliver those that must be."""
        for event in self.baton.events[self._seen_events :]:
            self.oracle.see(event)
        self._seen_events = len(self.baton.events)
        for actor in list(self.baton.actors):
            if actor.done and actor.outcome != "seen":
                self.oracle.ended(actor.name)
                if actor.name != "operator":
                    self.oracle.outcome(actor.name, actor.outcome)
                redeliver = actor.outcome in OUTCOMES_REDELIVERED or actor.outcome.startswith("failed")
                actor.history.append(actor.outcome)
                actor.outcome = "seen"
                if redeliver and actor.name != "operator" and self.redeliveries > 0:
                    self.redeliveries -= 1
                    self._delivered += 1
                    self.baton.start(Actor(f"h{self._delivered}", self._holder))
                    self._digest()

    def _drain(self) -> None:
        """The last delivery, alone and without faults, its clock past every lock; then the record's end."""
        last = Actor("last", self._holder, skew_s=DRAIN_S)
        self.redeliveries = 0
        self.baton.start(last)
        while not last.done:
            self.steps.append(Step(last.name, last.pending, "", last.skew_s))
            self.baton.turn(last, "")
        self._digest()
        self.oracle.final(self.store.get(self.key))

    def _state(self) -> Hashable:
        """The run's state, abstracted: equal states have equal futures (leases named by their holders)."""
        events = self.baton.events
        record = self.oracle.show(events[-1].after) if events else "absent"
        actors = tuple((a.name, a.pending, a.skew_s, tuple(a.history)) for a in self.baton.actors)
        o = self.oracle
        running = tuple(sorted((h, d, o.owners.get(lease, "?")) for h, (d, lease) in o.running.items()))
        freed = tuple(sorted(o.owners.get(lease, "?") for lease in o.freed))
        superseded = tuple(sorted(o.owners.get(lease, "?") for lease in o.superseded))
        oracle = (o.generation, o.complete_visible, tuple(sorted(o.committed.items())), running, freed, superseded)
        return (record, actors, oracle, self.faults, self.redeliveries)

    def _holder(self, actor: Actor) -> str:
        baton = self.baton
        skew = baton.yield_point(actor, "start") if actor.name != "last" else ""
        actor.skew_s += {"ahead": JUMP_S, "behind": -JUMP_S}.get(skew, 0)
        actor.history.append(f"start:{skew}")
        store = YieldingStore(self.store, baton, actor, self.key)
        guard = IdempotencyGuard(DATA, store=store, config=CONFIG, key_prefix=KEY_PREFIX, clock=baton.clock(actor))
        try:
            with guard:
                guard.result = self._body(actor)
        except AlreadyProcessed as done:
            self.oracle.replays[actor.name] = (done.record.lease, done.response)
            return "replayed"
        except IdempotencyAlreadyInProgressError:
            return "in progress"
        except Exception as e:  # noqa: BLE001 - every other way a delivery fails: reported, then redelivered
            return f"failed: {type(e).__name__}"
        return "committed" if guard.committed else "returned uncommitted"

    def _body(self, actor: Actor) -> object:
        """The body: a yield point where it may raise or crash; else its run is recorded and it returns."""
        fault = self.baton.yield_point(actor, "body") if actor.name != "last" else ""
        actor.history.append(f"body:{fault}")
        self.baton.events.append(Event(actor.name, "body", fault, (), None, None, None))
        if fault == "raise":
            raise BodyFailedError(actor.name)
        if fault == "crash":
            actor.crashed = True
            raise SimulatedCrash
        self.oracle.finished.add(actor.name)
        return result_of(actor.name)

    def _operator(self, actor: Actor) -> str:
        """``records delete KEY`` without ``--force``: read, refuse a live lock, release the record as read."""
        store = YieldingStore(self.store, self.baton, actor, self.key)
        try:
            record = store.get(self.key)
            if record is None:
                return "nothing to delete"
            now_ms = int(self.baton.clock(actor)() * 1000)
            if record.status is RecordStatus.IN_PROGRESS and not record.can_be_acquired(now_ms):
                return "refused: a live lock"
            store.release(record)
        except PersistenceLayerError as e:
            return f"failed: {type(e).__name__}"
        except Exception as e:  # noqa: BLE001 - LockLostError: the record changed since it was read
            return f"refused: {type(e).__name__}"
        return "deleted"
