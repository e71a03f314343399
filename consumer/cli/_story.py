"""``invoke``'s story of each delivery: what became of every record of the batches its handler processed.

The handler is the user's: the command cannot pass it a processor or a hook. It finds the batch processors
of the process instead (in the garbage collector's list, before and after each delivery: nothing in the library
keeps a registry for it) and reads the batch each one processed last, as ``processor.items`` gives it to anyone.
A handler that processes no batch (``@idempotent``, a guard of its own) has no story of records: its response is
its story.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any

from consumer import AsyncBatchProcessor, BatchProcessor
from consumer.observability import NOT_RUN, Outcome
from consumer.observability._outcomes_log import _error_text

if TYPE_CHECKING:
    from consumer.batch import BatchSummary
    from consumer.observability import Item

#: Each outcome in words: the record ran its handler, replayed the first run's result, or failed (why).
WORDS = {
    Outcome.PROCESSED: "ran and committed",
    Outcome.REPLAYED: "replayed: completed before, the handler did not run",
    Outcome.UNGUARDED: "ran unguarded: no idempotency key was selected, a redelivery runs it again",
    Outcome.FAILED: "failed",
    Outcome.IN_PROGRESS: "failed: in progress, another invocation holds its lock",
    Outcome.SKIPPED: f"skipped: {NOT_RUN[Outcome.SKIPPED]}",
    Outcome.DEFERRED: f"deferred: {NOT_RUN[Outcome.DEFERRED]}",
}
#: What Lambda does with an invocation that raised, whatever its event source: every record comes back.
LAMBDA_RETRIES = "Lambda counts the invocation failed and delivers the whole event again, every record of it"


class Batches:
    """The batch processors of this process, and the last batch of each, to tell which ones a delivery processed."""

    def __init__(self) -> None:
        """Note every processor's last batch (the handler's module may have processed one on import)."""
        self._seen = self._last_batches()

    @staticmethod
    def _last_batches() -> dict[int, tuple[BatchProcessor[Any] | AsyncBatchProcessor[Any], BatchSummary | None]]:
        found = (o for o in gc.get_objects() if isinstance(o, (BatchProcessor, AsyncBatchProcessor)))
        return {id(p): (p, p.summary) for p in found}

    def processed(self) -> list[list[Item]]:
        """The batches processed since the last call (or since this was built), each as its records' items."""
        now = self._last_batches()
        batches = [
            processor.items
            for key, (processor, summary) in now.items()
            if summary is not None and (key not in self._seen or self._seen[key][1] is not summary)
        ]
        self._seen = now
        return batches


def story(delivery: int, deliveries: int, batches: list[list[Item]]) -> list[str]:
    """The lines telling what became of each record of ``batches`` on delivery ``delivery`` of ``deliveries``."""
    lines = []
    for items in batches:
        lines.append(f"delivery {delivery} of {deliveries}: {len(items)} record{'s' if len(items) != 1 else ''}")
        width = max((len(str(item.item_id)) for item in items), default=0)
        lines.extend(f"  {item.item_id!s:<{width}}  {_words(item)}" for item in items)
    return lines


def _words(item: Item) -> str:
    if item.outcome is None:
        return "undecided: the invocation was interrupted"
    words = WORDS[item.outcome]
    if item.outcome is Outcome.FAILED and item.error is not None:
        words += f": {_error_text(item.error)}"
    return words
