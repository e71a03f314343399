"""What one invocation did with its batch (:class:`BatchSummary`), made when a summary is first read.

A batch's counts are taken as it ends (``_event.Tally``); the summary is built from them only when something reads
it: a log line (a failure, or INFO on), metrics, ``processor.summary``. A batch that succeeded with INFO off reads
none, so this module, and the methods its dataclass generates, load with the first read, not with the package.
"""

from __future__ import annotations

from dataclasses import dataclass

from persistence._fields import ByFields


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # shown, compared, hashed: ByFields
class BatchSummary(ByFields):
    """What one invocation did with its batch."""

    event_type: str
    records: int
    processed: int
    replayed: int
    unguarded: int
    failed: int
    in_progress: int
    skipped: int
    deferred: int
    duration_ms: float
    lock_lost: int = 0  # of the failed: their commit was refused, another invocation took the record over
