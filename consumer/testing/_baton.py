"""The controlled scheduler: actors on threads, one running at a time, a choice at every store call.

Each actor runs on its own thread, but holds the baton only between two yield points: every call it makes to
the store (through :class:`YieldingStore`), and the simulator's own points (a holder's start, its body). At a
yield point the actor hands the baton back and waits; the scheduler then picks which waiting actor goes next
and which fault, if any, its call meets. Since exactly one thread runs at a time and every choice comes from
the schedule, a run is a pure function of its schedule: replaying the choices replays the run.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from persistence import IdempotencyRecord, LockLostError, PersistenceLayerError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from persistence import PersistenceLayer, RecordStatus

#: The faults a store call may meet ("" is none). ``lost``: applied, the caller sees an error; ``fail``: not
#: applied, an error; ``crash``: the actor dies before the call; ``crash-after``: it dies once the call applied.
CALL_FAULTS = ("", "fail", "lost", "crash", "crash-after")
READ_FAULTS = ("", "fail")


class SimulatedCrash(BaseException):
    """The actor's process died here: it makes no further call, and its lock stays."""


class Abandoned(BaseException):
    """The run was cut short (its state was explored already): the actor unwinds without touching the store."""


@dataclass
class Actor:
    """One delivery (or the operator), run on its own thread, holding the baton between yield points."""

    name: str
    program: Callable[[Actor], str]
    skew_s: float = 0.0
    pending: str = ""  # the yield point it waits at ("" before it first ran)
    fault: str = ""  # the fault chosen for its pending point
    outcome: str = ""  # how it ended, once done
    history: list[str] = field(default_factory=list)  # what it saw, point by point: its state, abstracted
    crashed: bool = False
    done: bool = False
    go: bool = False
    thread: threading.Thread | None = None


@dataclass(frozen=True)
class Event:
    """A store call as it happened: who, what, with which fault, the record before and after, the answer."""

    actor: str
    call: str
    fault: str
    args: tuple[Any, ...]
    before: IdempotencyRecord | None
    after: IdempotencyRecord | None
    answer: object  # the value returned, or the exception raised by the store (before any fault)


class Baton:
    """Runs actors one at a time; :meth:`turn` lets one go until its next yield point or its end."""

    def __init__(self, epoch_s: float) -> None:
        """Start with no actors; ``epoch_s`` is the simulated time every clock starts from."""
        self.epoch_s = epoch_s
        self.actors: list[Actor] = []
        self.events: list[Event] = []
        self.abandoned = False
        self._cv = threading.Condition()

    def clock(self, actor: Actor) -> Callable[[], float]:
        """The clock injected into ``actor``'s guard: the simulated epoch plus the actor's skew."""
        return lambda: self.epoch_s + actor.skew_s

    def start(self, actor: Actor) -> None:
        """Add ``actor`` and run it to its first yield point."""
        self.actors.append(actor)
        actor.thread = threading.Thread(target=self._main, args=(actor,), name=f"sim-{actor.name}", daemon=True)
        actor.thread.start()
        self.turn(actor, "")

    def waiting(self) -> list[Actor]:
        """The actors that wait at a yield point, in the order they started."""
        return [actor for actor in self.actors if not actor.done]

    def turn(self, actor: Actor, fault: str) -> None:
        """Let ``actor`` take its pending step with ``fault``; return once it waits again or ended."""
        with self._cv:
            actor.fault, actor.go = fault, True
            self._cv.notify_all()
            while actor.go:
                self._cv.wait()

    def abandon(self) -> None:
        """Cut the run short: every waiting actor unwinds (raising :class:`Abandoned`) without a store call."""
        self.abandoned = True
        for actor in self.waiting():
            self.turn(actor, "")
        for actor in self.actors:
            if actor.thread is not None:
                actor.thread.join()

    def yield_point(self, actor: Actor, point: str) -> str:
        """Called on ``actor``'s thread: hand the baton back, wait for the scheduler, return the fault chosen."""
        if actor.crashed or self.abandoned:
            raise Abandoned if self.abandoned else SimulatedCrash
        with self._cv:
            actor.pending, actor.go = point, False
            self._cv.notify_all()
            while not actor.go:
                self._cv.wait()
        if self.abandoned:
            raise Abandoned
        return actor.fault

    def _main(self, actor: Actor) -> None:
        with self._cv:
            while not actor.go:
                self._cv.wait()
        try:
            actor.outcome = "" if self.abandoned else actor.program(actor)
        except SimulatedCrash:
            actor.outcome = "crashed"
        except Abandoned:
            actor.outcome = "abandoned"
        finally:
            with self._cv:
                actor.done, actor.go, actor.pending = True, False, ""
                self._cv.notify_all()


class YieldingStore:
    """The store as one actor sees it: every call is a yield point, and meets the fault the scheduler chose."""

    blocking = True  # an async guard would reach it through a thread; the simulator drives the sync face

    def __init__(self, store: PersistenceLayer, baton: Baton, actor: Actor, key: str) -> None:
        """Wrap ``store`` for ``actor``; ``key`` is the key read before and after each call (for the checks)."""
        self._store, self._baton, self._actor, self._key = store, baton, actor, key

    def acquire(self, record: IdempotencyRecord, now_ms: int) -> IdempotencyRecord | None:
        """See :meth:`persistence.PersistenceLayer.acquire`."""
        answer: IdempotencyRecord | None = self._call("acquire", self._store.acquire, record, now_ms)
        return answer

    def complete(self, record: IdempotencyRecord) -> None:
        """See :meth:`persistence.PersistenceLayer.complete`."""
        self._call("complete", self._store.complete, record)

    def release(self, record: IdempotencyRecord) -> None:
        """See :meth:`persistence.PersistenceLayer.release`."""
        self._call("release", self._store.release, record)

    def get(self, key: str) -> IdempotencyRecord | None:
        """See :meth:`persistence.PersistenceLayer.get`."""
        answer: IdempotencyRecord | None = self._call("get", self._store.get, key)
        return answer

    def delete(self, key: str) -> bool:
        """Not a step of any actor: an unconditional delete is not part of the protocol simulated."""
        raise NotImplementedError(key)

    def scan(self, status: RecordStatus | None = None, limit: int | None = None) -> Iterator[IdempotencyRecord]:
        """Not a step of any actor (see :meth:`delete`)."""
        raise NotImplementedError((status, limit))

    def _call(self, call: str, method: Callable[..., object], *args: object) -> Any:
        actor = self._actor
        fault = self._baton.yield_point(actor, call)
        if fault == "crash":
            actor.crashed = True
            actor.history.append(f"{call}:crash")
            raise SimulatedCrash
        if fault == "fail":
            actor.history.append(f"{call}:fail")
            raise PersistenceLayerError(f"simulated failure of {call} (not applied)", key=self._key)
        before = self._store.get(self._key)
        answer: Any
        try:
            answer = method(*args)
        except (LockLostError, PersistenceLayerError) as e:
            answer = e
        after = self._store.get(self._key)
        self._baton.events.append(Event(actor.name, call, fault, args, before, after, answer))
        actor.history.append(f"{call}:{fault}:{self._baton_view(answer)}")
        if fault == "crash-after":
            actor.crashed = True
            raise SimulatedCrash
        if fault == "lost":
            raise PersistenceLayerError(f"simulated lost answer of {call} (applied)", key=self._key)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def _baton_view(self, answer: object) -> str:
        if isinstance(answer, IdempotencyRecord):
            return f"{answer.status.value}"
        return type(answer).__name__
