"""The invariants, checked against every store call of a run as it happened, and at its end.

The oracle reads the run's events (each store call with the record before and after it, read from the real
store outside the schedule) and keeps what the invariants need: who owns which lease, which bodies run now,
which holder's ``complete`` was accepted in each *generation*. A generation ends when the operator deletes a
``COMPLETE`` record it read as ``COMPLETE`` (``records delete``: the operator asked for the record to run again).

- **Fenced**: each call did exactly what the contract allows, judged by the record before it (an acquire takes
  only an absent, expired or lapsed record; a ``complete`` or ``release`` is accepted only under the caller's
  lease, a ``release`` only for the status read; a ``COMPLETE`` keeps no lock deadline; a refusal changes nothing).
- **No overlap**: a body starts while another body of the key runs only if that one's lock had lapsed by the
  later holder's clock, or was taken over or deleted (by the operator) as lapsed by the clock of whoever did: a
  holder whose lock is gone runs on, fenced (its ``complete`` is refused), and excludes no one.
- **Once**: in a generation, at most one ``complete`` is accepted, and no body starts once it is.
- **Three ways**: a delivery that returned committed its own body's result; a replay ran no body.
- **Faithful replays**: a replay returns exactly the result of the body whose ``complete`` was accepted under
  the replayed record's lease.
- **Nothing lost**: at the end, the record is ``COMPLETE`` with the result of a body that finished.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from persistence import IdempotencyRecord, LockLostError, RecordStatus

if TYPE_CHECKING:
    from consumer.testing._baton import Event


def result_of(holder: str) -> dict[str, str]:
    """The result a holder's body returns: its name, so every replay can be traced to the body it replays."""
    return {"by": holder}


@dataclass
class Oracle:
    """What the invariants need to know of a run so far; :meth:`see` takes each event in order."""

    epoch_ms: int
    operator: str = "operator"
    owners: dict[str, str] = field(default_factory=dict)  # lease -> holder
    generation: int = 0
    committed: dict[str, int] = field(default_factory=dict)  # holder -> generation its complete was accepted in
    complete_visible: bool = False
    running: dict[str, tuple[int, str]] = field(default_factory=dict)  # holder -> (lock deadline, lease)
    # holder -> (order of its acquire, the record it wrote, its clock then)
    acquired: dict[str, tuple[int, IdempotencyRecord, int]] = field(default_factory=dict)
    freed: set[str] = field(default_factory=set)  # leases of lapsed locks the operator deleted
    superseded: set[str] = field(default_factory=set)  # leases of lapsed locks another holder took over
    bodies: dict[str, int] = field(default_factory=dict)  # holder -> bodies run
    finished: set[str] = field(default_factory=set)  # holders whose body returned its result
    replays: dict[str, tuple[str, object]] = field(default_factory=dict)  # holder -> (lease, response)
    violations: list[str] = field(default_factory=list)

    def see(self, event: Event) -> None:
        """Check one event (a store call, or a body starting) and update the state."""
        check = getattr(self, f"_{event.call}")
        check(event)

    def ended(self, holder: str) -> None:
        """``holder``'s delivery ended (or crashed): its body no longer runs."""
        self.running.pop(holder, None)

    def _fail(self, event: Event, what: str) -> None:
        self.violations.append(
            f"{what} ({event.actor} {event.call}: before {self.show(event.before)}, "
            f"after {self.show(event.after)}, answer {self._answer(event.answer)})"
        )

    def show(self, record: IdempotencyRecord | None) -> str:
        """A record as the trace shows it: status, owner of its lease, deadline relative to the epoch."""
        if record is None:
            return "absent"
        owner = self.owners.get(record.lease, "?")
        deadline = record.in_progress_expires_at
        lock = "" if deadline is None else f" lock {(deadline - self.epoch_ms) / 1000:+g}s"
        response = "" if record.response is None else f" {record.response}"
        return f"{record.status.value}[{owner}]{lock}{response}"

    def _answer(self, answer: object) -> str:
        if isinstance(answer, IdempotencyRecord):
            return self.show(answer)
        return "ok" if answer is None else type(answer).__name__

    def _acquire(self, event: Event) -> None:
        record, now_ms = event.args
        before, after, answer = event.before, event.after, event.answer
        self.owners[record.lease] = event.actor
        ours = after is not None and after.lease == record.lease and after.status is RecordStatus.IN_PROGRESS
        if answer is None:
            free = before is None or before.can_be_acquired(now_ms) or before.lease == record.lease
            if not (free and ours and after.in_progress_expires_at == record.in_progress_expires_at):  # type: ignore[union-attr]
                self._fail(event, "fenced: acquire took a record that was not free")
            elif before is not None and before.lease != record.lease:
                if before.status is RecordStatus.COMPLETE:
                    self.generation, self.complete_visible = self.generation + 1, False  # an expired COMPLETE
                self.superseded.add(before.lease)
            self.acquired[event.actor] = (len(self.acquired), record, now_ms)
        elif isinstance(answer, IdempotencyRecord):
            if before is None or before.can_be_acquired(now_ms) or after != before or answer != before:
                self._fail(event, "fenced: acquire refused a free record, or changed what it refused")
        elif after != before and not ours:
            self._fail(event, "fenced: a failed acquire changed the record")

    def _complete(self, event: Event) -> None:
        record = event.args[0]
        before, after, answer = event.before, event.after, event.answer
        mine = before is not None and before.lease == record.lease
        if answer is None:
            written = after is not None and after.lease == record.lease and after.status is RecordStatus.COMPLETE
            if not (mine and written and after.response == record.response):  # type: ignore[union-attr]
                self._fail(event, "fenced: complete accepted without the lease, or did not write the result")
            elif after.in_progress_expires_at is not None:  # type: ignore[union-attr]
                self._fail(event, "fenced: the COMPLETE record kept its lock deadline")
            elif before.status is RecordStatus.IN_PROGRESS:  # type: ignore[union-attr]
                self._committed(event)
        elif isinstance(answer, LockLostError):
            if after != before or (mine and before.status is RecordStatus.IN_PROGRESS):  # type: ignore[union-attr]
                self._fail(event, "fenced: complete refused our own lock, or changed the record it refused")
        elif after != before:
            self._fail(event, "fenced: a failed complete changed the record")
        self.ended(event.actor)

    def _committed(self, event: Event) -> None:
        earlier = [holder for holder, generation in self.committed.items() if generation == self.generation]
        if earlier:
            self._fail(event, f"once: a second complete accepted in one generation (after {earlier[0]}'s)")
        self.committed[event.actor] = self.generation
        self.complete_visible = True

    def _release(self, event: Event) -> None:
        record = event.args[0]
        before, after, answer = event.before, event.after, event.answer
        as_read = before is not None and before.lease == record.lease and before.status is record.status
        if answer is None:
            if after is not None or not (before is None or as_read):
                self._fail(event, "fenced: release deleted a record other than the one read")
            elif before is not None and event.actor == self.operator:
                if before.status is RecordStatus.COMPLETE:
                    self.generation, self.complete_visible = self.generation + 1, False
                else:
                    self.freed.add(before.lease)
        elif isinstance(answer, LockLostError):
            if after != before or before is None or as_read:
                self._fail(event, "fenced: release refused the record as read, or changed what it refused")
        elif after not in (before, None):
            self._fail(event, "fenced: a failed release changed the record")
        self.ended(event.actor)

    def _get(self, event: Event) -> None:
        if event.after != event.before or event.answer != event.before:
            self._fail(event, "fenced: get did not return the stored record, or changed it")

    def _body(self, event: Event) -> None:
        _, record, _ = self.acquired[event.actor]
        if self.complete_visible and record.lease not in self.superseded | self.freed:
            self._fail(event, "once: a body ran, its lock never lapsed, while a COMPLETE record was stored")
        for other in self.running:
            (_, earlier, _), (_, _, later_ms) = sorted((self.acquired[other], self.acquired[event.actor]))
            lapsed = earlier.lease in self.freed | self.superseded  # deleted or taken over as lapsed: fenced
            if not ((earlier.in_progress_expires_at or 0) < later_ms or lapsed):
                self._fail(event, f"no overlap: the body ran beside {other}'s, and neither lock had lapsed")
        self.running[event.actor] = (record.in_progress_expires_at or 0, record.lease)
        self.bodies[event.actor] = self.bodies.get(event.actor, 0) + 1

    def outcome(self, holder: str, outcome: str) -> None:
        """Check how a delivery ended (three ways; a replay is faithful)."""
        ran = self.bodies.get(holder, 0)
        if outcome == "committed" and (holder not in self.committed or ran != 1 or holder not in self.finished):
            self.violations.append(f"three ways: {holder} returned as committed, but its own result was not")
        if outcome == "replayed":
            lease, response = self.replays[holder]
            owner = self.owners.get(lease, "?")
            if ran:
                self.violations.append(f"three ways: {holder} replayed after its own body ran")
            if owner not in self.committed or response != result_of(owner):
                self.violations.append(f"faithful: {holder} replayed {response!r}, not what {owner} committed")
        if outcome in ("", "returned uncommitted"):
            self.violations.append(f"three ways: {holder} ended in none of them ({outcome or 'no outcome'})")

    def final(self, record: IdempotencyRecord | None) -> None:
        """Nothing lost: once every delivery ended, the record is COMPLETE, holding a finished body's result."""
        owner = "?" if record is None else self.owners.get(record.lease, "?")
        complete = record is not None and record.status is RecordStatus.COMPLETE
        if not (complete and owner in self.committed and owner in self.finished):
            self.violations.append(f"nothing lost: the record ended {self.show(record)}")
