"""The scenarios of Powertools' batch page: its examples, each run on an event of ours that has a failing record."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import standins
from harness import HERE, Harness, attempt, scenario

if TYPE_CHECKING:
    from harness import Scenario


def batch(h: Harness, event: str) -> dict[str, Any]:
    m = h.load(h.name)
    response = attempt(lambda: m.lambda_handler(h.event(event), h.context()))
    logged = json.loads(json.dumps(standins.LOGGED, default=lambda value: type(value).__name__))
    return {"response": response, "logged": logged}


#: The examples that are a handler and its processor, each with the event of ours it runs on: a batch with a record
#: that fails, the context-manager and model (``model=``) variants of the getting-started ones included.
EVENTS = {
    "getting_started_sqs": "sqs_batch.json",
    "getting_started_sqs_context_manager": "sqs_batch.json",
    "context_manager_access": "sqs_batch.json",
    "disable_tracing": "sqs_batch.json",
    "extending_processor_handlers": "sqs_batch.json",
    "getting_started_kinesis": "kinesis_batch.json",
    "getting_started_kinesis_context_manager": "kinesis_batch.json",
    "getting_started_dynamodb": "dynamodb_batch.json",
    "getting_started_dynamodb_context_manager": "dynamodb_batch.json",
    "getting_started_sqs_fifo": "sqs_fifo_batch.json",
    "getting_started_sqs_fifo_context_manager": "sqs_fifo_batch.json",
    "getting_started_sqs_fifo_skip_on_error": "sqs_fifo_batch.json",
    "getting_started_kafka": "kafka_batch.json",
    "getting_started_error_handling": "sqs_batch_empty_body.json",
    "working_with_entire_batch_fail": "sqs_batch_all_bad.json",
    "advanced_accessing_lambda_context": "sqs_single.json",
    "pydantic_sqs": "sqs_orders.json",
    "pydantic_kinesis": "kinesis_orders.json",
    "pydantic_dynamodb": "dynamodb_orders.json",
}


def _on(event: str) -> Scenario:
    return lambda h: batch(h, event)


for _example, _event in EVENTS.items():
    scenario("batch", _example)(_on(_event))


@scenario("batch", "custom_partial_processor")
def batch_own_processor(h: Harness) -> dict[str, Any]:
    """A processor of the user's own (``BasePartialProcessor``) that writes its successes to a table of its own."""
    table = h.create_table(key="messageId")
    os.environ["TABLE_NAME"] = table
    observed = batch(h, "sqs_batch.json")
    return {**observed, "written": len(h.client.scan(TableName=table)["Items"])}


@scenario("batch", "advanced_accessing_lambda_context_manager")
def batch_lambda_context_manager(h: Harness) -> dict[str, Any]:
    """Returns what ``process()`` returned: Powertools' outcomes, compared by status and result."""
    m = h.load(h.name)
    outcomes = attempt(lambda: m.lambda_handler(h.event("sqs_batch.json"), h.context()))
    if isinstance(outcomes, list):
        outcomes = [[status, result if status == "success" else "..."] for status, result, _ in outcomes]
    return {"outcomes": outcomes, "logged": list(standins.LOGGED)}


@scenario("batch", "getting_started_async")
def batch_async(h: Harness) -> dict[str, Any]:
    m = h.load(h.name)
    response = m.lambda_handler(h.event("sqs_batch.json"), h.context())
    if asyncio.iscoroutine(response):
        response.close()
        return {"response": "a coroutine", "requests": len(standins.SENT)}
    return {"response": response, "requests": len(standins.SENT)}


@scenario("batch", "getting_started_with_test")
def batch_test(h: Harness) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        (Path(directory) / "events").mkdir()
        (Path(directory) / "events" / "sqs_event.json").write_text((HERE / "events" / "sqs_batch.json").read_text())
        previous = Path.cwd()
        os.chdir(directory)  # the documented test reads events/sqs_event.json from where it runs
        try:
            return attempt(
                lambda: h.run_test("getting_started_with_test_app", h.name, "test_app_batch_partial_response")
            )
        finally:
            os.chdir(previous)
