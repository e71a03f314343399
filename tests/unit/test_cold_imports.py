"""A DynamoDB consumer's cold start imports only what it uses: the rest loads when its name is first used."""

from __future__ import annotations

import subprocess
import sys

DEFERRED = (
    "sqlite3",
    "persistence.sqlite",
    "persistence.urls",
    "consumer.cli",
    "consumer.cli._key",
    "consumer.cli._records",
    "consumer.sources._missing_key",
    "consumer.serialization",
    "consumer.sources._kafka",
    "consumer.sources._headers",
    "consumer.sources._record_views",
    "consumer.batch._async_batch",
    "consumer.powertools",
)


def test_importing_the_library_leaves_what_a_dynamodb_consumer_does_not_use():
    # A check shared by the batch processor and the CLI once pulled the Kafka and header modules into every
    # cold start; nothing else said so.
    code = f"import sys, consumer, persistence; print([m for m in {DEFERRED!r} if m in sys.modules])"
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert shown.strip() == "[]"
